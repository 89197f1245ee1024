/* p2p: the modes of the timing core beyond the ping-pong (--mode; docs/loggp.md).
 *
 * LogGP, as Bell et al. measure it (seed 002, section 4):
 *   flood    rank 0 keeps q messages outstanding: it starts q sends, waits for
 *            the q/2 oldest, starts q/2 more, ... (q = 1: one at a time), and
 *            after the last one waits for one reply from rank 1, which keeps q
 *            receives posted the same way. Time per message: g at 8 bytes, and
 *            over sizes the per-byte gap G (fitted in reframe/testbed/loggp.py).
 *   overlap  the flood at q = 1 and 8 bytes with a calibrated busy loop of w us
 *            after each send is started (side send: rank 0) or after each
 *            receive is posted (side recv: rank 1), before its wait. The time
 *            per message stays put while the loop hides in the wait and grows
 *            as w + o once it cannot: o_s and o_r are read off the points
 *            (reframe/testbed/loggp.py; w runs from 0 to 6x the time at w = 0).
 * Streams (seed 003):
 *   stream   NetPIPE's: rank 0 sends back to back with the blocking call, rank 1
 *            receives each with the blocking call, one reply at the end.
 *   unidir   MPBench/OSU's window: W sends started, all waited for; rank 1 posts
 *            W receives, waits for all and replies once per window.
 *   bidir    both ranks post W receives and start W sends, then wait for all
 *            2W; throughput counts both directions.
 *
 * Transports: MPI two-sided, MPI one-sided (Put with flush: tr_rma.c, whose
 * window is this file's receive slots and ack slot) and raw TCP.
 *
 * Every sample, as the ping-pong's: buffers filled outside the timed region
 * (receive slots with the complement of what must arrive), the partner's
 * receives posted, a barrier, one untimed round trip that absorbs its skew,
 * then the clock, the messages and the final reply, the clock; then each
 * receiving rank checks the length and every byte of every receive slot the
 * sample used. Points are calibrated (messages or windows per sample, until
 * the shortest of 3 samples lasts --min-time-ms) and then sampled in passes,
 * one sample of each point per pass. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/tb_clock.h"
#include "../common/tb_watchdog.h"
#include "control.h"
#include "core.h"
#include "p2p.h"
#include "stats.h"
#include "transport.h"

#define CALIB_TRIES 3
#define OVERLAP_SIZE 8
/* the busy loop's w, as multiples of the time per message at w = 0 */
static const double work_ladder[] = { 0, 0.25, 0.5, 0.75, 1, 1.25, 1.5, 2, 3, 4, 6 };
#define NWORK (int)(sizeof work_ladder / sizeof work_ladder[0])

enum kind { K_FLOOD, K_OVER_SEND, K_OVER_RECV, K_STREAM, K_UNIDIR, K_BIDIR };
static const char *const style_names[] = { "flood", "send", "recv", "stream", "unidir", "bidir" };

struct point {
    enum kind kind;
    long size;
    int q;              /* flood and overlap: queue depth; unidir/bidir: window */
    long work_iters;    /* overlap: busy-loop iterations on the busy rank */
    double work_us;     /* ... as asked for, and as timed alone on that rank */
    double work_us_measured;
    long reps;          /* messages (flood, overlap, stream) or windows per sample */
    double *t;          /* [sample]: us per message (per direction) */
    long checked;       /* receive slots this rank checked */
};

struct mctx {
    const struct options *o;
    int rank;
    struct tport *t;
    unsigned char *sbuf;    /* one send buffer (bidir: one per rank, as here) */
    unsigned char *slots;   /* P2P_MAX_Q receive slots, `stride` bytes apart, then ackr */
    size_t stride;
    unsigned char ack[8], *ackr;
    double iters_per_us;    /* this rank's busy loop */
    char mode[96];
};

/* ---- the busy loop: a chain of dependent multiply-adds the compiler cannot fold ---- */

static volatile uint64_t busy_sink;

static void busy(long iters)
{
    uint64_t x = busy_sink;
    for (long i = 0; i < iters; i++)
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    busy_sink = x;
}

/* Seconds per call of busy(iters), the least of 5 timings of enough calls for 1 ms. */
static double busy_time(long iters)
{
    long calls = 1;
    double best = 0;
    for (;;) {
        double t0 = tb_now_s();
        for (long c = 0; c < calls; c++)
            busy(iters);
        double dt = tb_now_s() - t0;
        if (dt >= 1e-3 || calls >= (1L << 26))
            break;
        calls *= 4;
    }
    for (int k = 0; k < 5; k++) {
        double t0 = tb_now_s();
        for (long c = 0; c < calls; c++)
            busy(iters);
        double dt = (tb_now_s() - t0) / calls;
        best = k == 0 || dt < best ? dt : best;
    }
    return best;
}

/* ---- one sample ---- */

static inline long lmin(long a, long b) { return a < b ? a : b; }

/* Completes `count` slots of a ring of q, oldest first, from message number `from`. */
static void wait_ring(struct tport *t, long from, long count, int q)
{
    int s = (int)(from % q);
    while (count > 0) {
        int c = (int)lmin(count, q - s);
        t->wait(t, s, c);
        count -= c;
        s = 0;
    }
}

/* Rank 0 of flood and overlap: n messages, q outstanding, ws busy iterations after each start. */
static void flood_send(struct tport *t, const unsigned char *buf, int size, long n, int q,
                       long ws)
{
    long batch = q > 1 ? q / 2 : 1, posted = lmin(q, n), done = 0;
    for (long k = 0; k < posted; k++) {
        t->isend(t, (int)k, buf, size);
        if (ws)
            busy(ws);
    }
    while (done < n) {
        long c = lmin(batch, posted - done);
        wait_ring(t, done, c, q);
        done += c;
        for (long k = 0; k < c && posted < n; k++, posted++) {
            t->isend(t, (int)(posted % q), buf, size);
            if (ws)
                busy(ws);
        }
    }
}

/* Rank 1: the first min(q, n) receives were posted before the barrier. */
static void flood_recv(struct mctx *m, int size, long n, int q, long wr)
{
    struct tport *t = m->t;
    long batch = q > 1 ? q / 2 : 1, posted = lmin(q, n), done = 0;
    while (done < n) {
        long c = lmin(batch, posted - done);
        wait_ring(t, done, c, q);
        done += c;
        for (long k = 0; k < c && posted < n; k++, posted++) {
            int s = (int)(posted % q);
            t->irecv(t, s, m->slots + (size_t)s * m->stride, size);
            if (wr)
                busy(wr);
        }
    }
}

static int is_flood(enum kind k) { return k == K_FLOOD || k == K_OVER_SEND || k == K_OVER_RECV; }

/* Receive slots a sample of `reps` uses on a receiving rank. */
static long slots_used(const struct point *p, long reps)
{
    if (is_flood(p->kind))
        return lmin(p->q, reps);
    return p->kind == K_STREAM ? 1 : p->q;
}

/* One sample of `reps`; returns rank 0's timed seconds (0 on rank 1). */
static double sample(struct mctx *m, struct point *p, long reps, unsigned idx,
                     const char *phase)
{
    struct tport *t = m->t;
    int me = m->rank, n = (int)p->size;
    int bidir = p->kind == K_BIDIR, receiver = me == 1 || bidir;
    long used = slots_used(p, reps);
    uint32_t mine = p2p_pattern_seed(me, p->size, idx);
    uint32_t theirs = p2p_pattern_seed(1 - me, p->size, idx);
    long ws = p->kind == K_OVER_SEND && me == 0 ? p->work_iters : 0;
    long wr = p->kind == K_OVER_RECV && me == 1 ? p->work_iters : 0;
    double dt = 0;

    tb_watchdog_at(phase, m->mode, NULL, p->size);  /* a beat per sample, before any timing */
    if (me == 0 || bidir) {
        p2p_fill(m->sbuf, p->size, mine, 0);
        if (m->o->corrupt_at == p->size)      /* the test switch: the check must catch it */
            m->sbuf[n / 2] ^= 0xA5;
    }
    if (receiver)
        for (long k = 0; k < used; k++)
            p2p_fill(m->slots + (size_t)k * m->stride, p->size, theirs, 1);
    if (me == 1 && is_flood(p->kind))
        for (long k = 0; k < used; k++)
            t->irecv(t, (int)k, m->slots + (size_t)k * m->stride, n);
    ctl_barrier();
    if (me == 0) {          /* the untimed round trip */
        t->send(t, m->ack, 1);
        t->post(t, m->ackr, 1);
        t->recv(t);
    } else {
        t->post(t, m->ackr, 1);
        t->recv(t);
        t->send(t, m->ack, 1);
    }

    double t0 = tb_now_s();
    switch (p->kind) {
    case K_FLOOD: case K_OVER_SEND: case K_OVER_RECV:
        if (me == 0)
            flood_send(t, m->sbuf, n, reps, p->q, ws);
        else
            flood_recv(m, n, reps, p->q, wr);
        break;
    case K_STREAM:
        for (long i = 0; i < reps; i++)
            if (me == 0) {
                t->send(t, m->sbuf, n);
            } else {
                t->post(t, m->slots, n);
                t->recv(t);
            }
        break;
    case K_UNIDIR:
        for (long i = 0; i < reps; i++) {
            for (int k = 0; k < p->q; k++)
                if (me == 0)
                    t->isend(t, k, m->sbuf, n);
                else
                    t->irecv(t, k, m->slots + (size_t)k * m->stride, n);
            t->wait(t, 0, p->q);
            if (me == 0) {          /* one reply per window, as MPBench and OSU */
                t->post(t, m->ackr, 1);
                t->recv(t);
            } else {
                t->send(t, m->ack, 1);
            }
        }
        break;
    case K_BIDIR:
        for (long i = 0; i < reps; i++) {
            for (int k = 0; k < p->q; k++)
                t->irecv(t, k, m->slots + (size_t)k * m->stride, n);
            for (int k = 0; k < p->q; k++)
                t->isend(t, P2P_MAX_Q + k, m->sbuf, n);
            t->wait(t, P2P_MAX_Q, p->q);    /* sends first: rma tells the partner there */
            t->wait(t, 0, p->q);
        }
        break;
    }
    if (p->kind != K_UNIDIR && p->kind != K_BIDIR) {   /* the final reply */
        if (me == 0) {
            t->post(t, m->ackr, 1);
            t->recv(t);
        } else {
            t->send(t, m->ack, 1);
        }
    }
    if (me == 0)
        dt = tb_now_s() - t0;

    if (!receiver)
        return dt;
    char what[120];
    for (long k = 0; k < used; k++) {
        long got = p->kind == K_STREAM ? t->received(t) : t->slot_received(t, (int)k);
        if (got != p->size) {
            snprintf(what, sizeof what, "%s: slot %ld received %ld bytes, expected %ld",
                     style_names[p->kind], k, got, p->size);
            p2p_payload_failed(me, t, p->size, what);
        }
        long bad = p2p_first_bad(m->slots + (size_t)k * m->stride, p->size, theirs);
        if (bad >= 0) {
            snprintf(what, sizeof what, "%s: slot %ld byte %ld is not the pattern",
                     style_names[p->kind], k, bad);
            p2p_payload_failed(me, t, p->size, what);
        }
    }
    p->checked += used;
    return dt;
}

/* Messages (per direction) a sample of `reps` moves. */
static long messages(const struct point *p, long reps)
{
    return p->kind == K_UNIDIR || p->kind == K_BIDIR ? reps * p->q : reps;
}

/* As the ping-pong's calibration: grow reps until the shortest of 3 samples
 * lasts --min-time-ms; rank 0 decides and tells rank 1. Returns that shortest
 * sample's us per message too (rank 0; the overlap ladder is built on it). */
static long calibrate(struct mctx *m, struct point *p, double *us_per_msg)
{
    long reps = p->kind == K_UNIDIR || p->kind == K_BIDIR ? 1 : 16;
    sample(m, p, reps, 0, "warm-up");
    for (;;) {
        double t = sample(m, p, reps, 0, "calibration");
        for (int k = 1; k < CALIB_TRIES; k++) {
            double u = sample(m, p, reps, 0, "calibration");
            t = u < t ? u : t;
        }
        long next = m->rank == 0 ? p2p_next_reps(reps, t, m->o->min_time_s) : reps;
        ctl_bcast_long(&next);
        if (next < 0) {
            if (us_per_msg)
                *us_per_msg = t / messages(p, -next) * 1e6;
            return -next;
        }
        reps = next;
    }
}

/* ---- records ---- */

static void unsupported(const struct mctx *m, const char *mode, const char *why)
{
    if (m->rank != 0)
        return;
    printf("P2P-UNSUPPORTED {\"stack\":");
    json_str(m->o->stack);
    printf(",\"transport\":\"%s\",\"mode\":\"%s\",\"reason\":", m->t->name, mode);
    json_str(why);
    printf("}\n");
    fflush(stdout);
}

static void print_point(const struct mctx *m, const struct point *p, long checked, double *tmp)
{
    const struct options *o = m->o;
    int dirs = p->kind == K_BIDIR ? 2 : 1;
    memcpy(tmp, p->t, (size_t)o->samples * sizeof *tmp);
    struct stats st = summarise(tmp, o->samples);
    const char *tag = p->kind == K_FLOOD ? "P2P-FLOOD" :
                      is_flood(p->kind) ? "P2P-OVERLAP" : "P2P-STREAM";
    printf("%s {\"stack\":", tag);
    json_str(o->stack);
    printf(",\"transport\":\"%s\",\"pair\":\"%s\",\"variant\":\"%s\",\"style\":\"%s\","
           "\"size_bytes\":%ld", m->t->name, m->t->pair, m->t->variant,
           style_names[p->kind], p->size);
    if (is_flood(p->kind))
        printf(",\"q\":%d", p->q);
    else
        printf(",\"window\":%d,\"directions\":%d", p->kind == K_STREAM ? 1 : p->q, dirs);
    if (p->kind == K_OVER_SEND || p->kind == K_OVER_RECV)
        printf(",\"side\":\"%s\",\"work_iters\":%ld,\"work_us\":%.6g,\"work_us_measured\":%.6g",
               style_names[p->kind], p->work_iters, p->work_us, p->work_us_measured);
    /* time per message (per direction); bandwidth over every direction, 10^6 bytes/s */
    printf(",\"samples\":%d,\"reps_per_sample\":%ld,\"messages_per_sample\":%ld,"
           "\"min_us\":%.6g,\"median_us\":%.6g,\"mean_us\":%.6g,\"p95_us\":%.6g,\"cv\":%.4g,"
           "\"bandwidth_MBps\":%.6g,\"checked_messages\":%ld,\"samples_us\":[",
           o->samples, p->reps, messages(p, p->reps), st.min, st.median, st.mean, st.p95,
           st.cv, dirs * p->size / st.median, checked);
    for (int s = 0; s < o->samples; s++)
        printf("%s%.6g", s ? "," : "", p->t[s]);
    printf("]}\n");
}

/* ---- the points of every mode asked for ---- */

static int add(struct point *pts, int n, enum kind k, long size, int q)
{
    memset(&pts[n], 0, sizeof pts[n]);
    pts[n].kind = k;
    pts[n].size = size;
    pts[n].q = q;
    return n + 1;
}

/* The busy loop's iterations for w us on the rank that runs it (by its own
 * calibration), and w timed alone there, so that the record says what ran. */
static void set_work(struct mctx *m, struct point *p, double w_us)
{
    int busy_rank = p->kind == K_OVER_SEND ? 0 : 1;
    double mine[2] = { 0, 0 }, theirs[2] = { 0, 0 };
    if (m->rank == busy_rank) {
        long iters = (long)(w_us * m->iters_per_us + 0.5);
        mine[0] = (double)iters;
        mine[1] = iters ? busy_time(iters) * 1e6 : 0;
    }
    ctl_exchange_bytes(mine, theirs, (int)sizeof mine);
    const double *b = m->rank == busy_rank ? mine : theirs;
    p->work_us = w_us;
    p->work_iters = (long)b[0];    /* used on the busy rank only; the other records it */
    p->work_us_measured = b[1];
}

static void measure_points(struct mctx *m, struct point *pts, int np)
{
    const struct options *o = m->o;
    for (int i = 0; i < np; i++) {
        snprintf(m->mode, sizeof m->mode, "%s %s q%d", m->t->name, style_names[pts[i].kind],
                 pts[i].q);
        pts[i].reps = calibrate(m, &pts[i], NULL);
    }
    for (int s = 0; s < o->samples; s++)
        for (int i = 0; i < np; i++) {
            snprintf(m->mode, sizeof m->mode, "%s %s q%d", m->t->name,
                     style_names[pts[i].kind], pts[i].q);
            double dt = sample(m, &pts[i], pts[i].reps, (unsigned)s + 1, "sample");
            pts[i].t[s] = dt / messages(&pts[i], pts[i].reps) * 1e6;
        }
}

void p2p_measure_modes(const struct options *o, int rank)
{
    struct tport tp;
    struct mctx m;
    char err[200] = "";
    long maxsize = o->sizes[o->nsizes - 1];
    memset(&tp, 0, sizeof tp);
    memset(&m, 0, sizeof m);
    m.o = o;
    m.rank = rank;
    m.t = &tp;
    /* The receive slots, then a page for the ack: one arena, the window of rma. */
    m.stride = ((size_t)maxsize + 4095) / 4096 * 4096;
    size_t arena = m.stride * P2P_MAX_Q + 4096;
    m.sbuf = aligned_alloc(4096, m.stride);
    m.slots = aligned_alloc(4096, arena);
    if (!m.sbuf || !m.slots) {
        fprintf(stderr, "p2p: rank %d: out of memory for %d receive slots of %ld bytes\n",
                rank, P2P_MAX_Q, maxsize);
        ctl_abort(1);
    }
    memset(m.slots, 0, arena);   /* touch every page before timing */
    m.ackr = m.slots + m.stride * P2P_MAX_Q;
    const char *none = NULL;     /* why this transport runs no mode, if it runs none */
    if (o->transport == T_TCP || o->transport == T_TCP_POLL)
        tr_tcp_init(&tp, o->transport == T_TCP_POLL);
    else if (o->transport == T_MPI)
        tr_mpi_init(&tp, 0, 0);        /* Send-Recv for the blocking calls */
    else if (o->transport == T_RMA && (o->rma_op == RMA_GET || (o->rma_sync >= 0 &&
                                                               o->rma_sync != RMA_FLUSH)))
        none = "the modes over rma run Put with passive-target flush only (--rma-op put "
               "--rma-sync flush): fence and pscw open an epoch per message or batch";
    else if (o->transport == T_RMA)
        tr_rma_modes_init(&tp, m.slots, m.stride, arena, m.stride * P2P_MAX_Q, m.ack);
    else
        none = "the modes beyond the ping-pong run over --transport mpi, rma, tcp or tcp_poll";
    if (none) {
        tp.name = o->transport == T_SHM ? "shm" : o->transport == T_MEMCPY ? "memcpy" : "rma";
        unsupported(&m, "flood,overlap,stream,unidir,bidir", none);
        free(m.sbuf);
        free(m.slots);
        return;
    }
    snprintf(m.mode, sizeof m.mode, "%s modes", tp.name);
    tb_watchdog_at("setup", m.mode, NULL, maxsize);
    int ok = tp.setup(&tp, maxsize, err, sizeof err) == 0;
    ok = ctl_exchange_int(ok) && ok;
    if (!ok) {
        if (rank == 0) {
            printf("P2P-UNAVAILABLE {\"transport\":\"%s\",\"reason\":", tp.name);
            json_str(err[0] ? err : "the partner failed to set it up");
            printf("}\n");
            fflush(stdout);
        }
        free(m.sbuf);
        free(m.slots);
        return;
    }

    /* Which points: flood q x sizes; overlap both sides over the ladder; the streams. */
    int cap = o->nqdepths * o->nsizes + 2 * NWORK + o->nsizes * (1 + 2 * o->nwindows);
    struct point *pts = calloc((size_t)cap, sizeof *pts);
    double *ts = calloc((size_t)cap * (size_t)o->samples, sizeof *ts);
    double *tmp = malloc((size_t)o->samples * sizeof *tmp);
    if (!pts || !ts || !tmp)
        ctl_abort(1);
    int np = 0;
    int slots = tp.isend != NULL;
    if (o->modes & MODE_FLOOD) {
        if (!slots)
            unsupported(&m, "flood", "the transport cannot keep messages outstanding");
        else
            for (int qi = 0; qi < o->nqdepths; qi++)
                for (int s = 0; s < o->nsizes; s++)
                    np = add(pts, np, K_FLOOD, o->sizes[s], o->qdepths[qi]);
    }
    int over_from = np;
    if (o->modes & MODE_OVERLAP) {
        if (!slots)
            unsupported(&m, "overlap", "the transport cannot keep messages outstanding");
        else
            for (int side = 0; side < 2; side++)
                for (int w = 0; w < NWORK; w++)
                    np = add(pts, np, side ? K_OVER_RECV : K_OVER_SEND, OVERLAP_SIZE, 1);
    }
    int over_to = np;
    for (int s = 0; s < o->nsizes; s++) {
        if (o->modes & MODE_STREAM)
            np = add(pts, np, K_STREAM, o->sizes[s], 1);
        for (int w = 0; w < o->nwindows && slots; w++) {
            if (o->modes & MODE_UNIDIR)
                np = add(pts, np, K_UNIDIR, o->sizes[s], o->windows[w]);
            if ((o->modes & MODE_BIDIR) && tp.duplex)
                np = add(pts, np, K_BIDIR, o->sizes[s], o->windows[w]);
        }
    }
    if ((o->modes & MODE_UNIDIR) && !slots)
        unsupported(&m, "unidir", "the transport cannot keep messages outstanding");
    if ((o->modes & MODE_BIDIR) && !(slots && tp.duplex))
        unsupported(&m, "bidir", "the transport cannot have sends and receives outstanding on "
                    "both ranks at once (its send blocks until the bytes are taken)");
    for (int i = 0; i < np; i++)
        pts[i].t = &ts[(size_t)i * o->samples];

    /* The overlap ladder: this rank's busy loop calibrated (~10 ms), w = 0 measured, then
     * w as multiples of that time per message. */
    if (over_to > over_from) {
        long iters = 1L << 16;
        double per;
        while ((per = busy_time(iters)) < 1e-2 && iters < (1L << 34))
            iters *= 2;
        m.iters_per_us = iters / (per * 1e6);
        struct point base = pts[over_from];
        double t0_us = 0;
        snprintf(m.mode, sizeof m.mode, "%s overlap base", tp.name);
        base.t = tmp;
        calibrate(&m, &base, &t0_us);
        double bcast = t0_us;
        ctl_bcast_bytes(&bcast, (int)sizeof bcast);
        for (int i = over_from; i < over_to; i++)
            set_work(&m, &pts[i], work_ladder[(i - over_from) % NWORK] * bcast);
        double rates[2] = { m.iters_per_us, 0 };
        ctl_exchange_bytes(&rates[0], &rates[1], (int)sizeof rates[0]);
        if (rank == 0) {
            printf("P2P-BUSYLOOP {\"stack\":");
            json_str(o->stack);
            printf(",\"iters_per_us\":[%.6g,%.6g],\"base_us\":%.6g,\"ladder\":[", rates[0],
                   rates[1], bcast);
            for (int w = 0; w < NWORK; w++)
                printf("%s%.4g", w ? "," : "", work_ladder[w]);
            printf("]}\n");
            fflush(stdout);
        }
    }

    measure_points(&m, pts, np);
    tb_watchdog_at("records", m.mode, NULL, -1);
    for (int i = 0; i < np; i++) {
        long checked = pts[i].checked + ctl_exchange_int((int)pts[i].checked);
        if (rank == 0)
            print_point(&m, &pts[i], checked, tmp);
    }
    fflush(stdout);
    tp.cleanup(&tp);
    free(pts);
    free(ts);
    free(tmp);
    free(m.sbuf);
    free(m.slots);
}
