/* xhpl: the time inside MPI of every panel this rank receives, over copies of the same bytes.
 *
 * Why: HPL's Gflop/s holds its communication diluted by its arithmetic (MPI is 5-12 % of a
 * 1x2 run's time here), so a 1.5x slower library moves it by a few percent, inside the
 * run-to-run spread. Its panel broadcasts are the one large, regular transfer of the run:
 * HPL 2.0's ring broadcasts (src/comm/HPL_1ring.c and its kin) probe with MPI_Iprobe and,
 * once the panel is there, take it with MPI_Recv. That MPI_Recv is the library's transfer
 * with no wait for a late sender in it, and it is what this file times.
 *
 * How: xhpl is linked with -Wl,--wrap=MPI_Iprobe,--wrap=MPI_Recv (build.sh), so HPL's calls
 * come here and go on to the library's (__real_*: the dynamic symbol, which a preloaded
 * library such as apps/slowdown still interposes). An MPI_Recv right after a successful
 * MPI_Iprobe of the same source, tag and communicator is timed on tb_now_s; every other
 * MPI_Recv passes through untimed. After HPL, panel_time_report() times copies of each
 * received size on this rank, each the lower quartile of 9 (after one untimed):
 *   - memcpy: a warm copy within this rank's core;
 *   - xcopy: one copy out of a shared buffer that the partner rank (rank ^ 1, on the same
 *     host) has just written, so the bytes move from the partner's core to this one;
 *   - pipe: the partner copies the bytes in by 32 KiB chunks, publishing each, while this rank
 *     copies each published chunk out, both cores at once, as a library's shared-memory path
 *     (and apps/p2p/tr_shm.c: the pipe of apps/common/tb_raw.h) does;
 *   - cma: this rank reads the bytes out of the partner's own buffer, which the partner has
 *     just written, with process_vm_readv: the kernel's single copy that MPICH and Open MPI
 *     make for large messages between two processes of a host (su3's exchange over the same
 *     copy followed the VM's drift where memcpy did not: docs/measurement.md);
 *   - replay: the partner sends the same bytes with MPI_Send and this rank takes them as HPL
 *     does, MPI_Iprobe until they are there, then a timed MPI_Recv: the library's transfer of
 *     the panel's size with both ranks otherwise idle. The panels in the run are timed with
 *     the partner computing on the other core, and drifted 3-7 % (SD) between runs over every
 *     copy timed after it (docs/measurement.md); replay over cma is the library against the
 *     kernel copy under the same conditions, as su3's exchanges are timed alone;
 *   - posted: the same with the receive posted before the partner sends, as IMB and NetPIPE
 *     take theirs, so that the replay has peers (Intel MPI 2021 took an unexpected large
 *     message 2.2x slower than a posted one, docs/measurement.md).
 * Why the two copies between cores: one clean run found the transfers 0.66-0.91x their usual
 * time for an hour, and memcpy within a core unchanged (docs/measurement.md); whether a copy
 * between the cores moves with the transfers is what xcopy and pipe are recorded to show.
 * Rank 0 prints
 *   HPL-PANELS {"messages":n,"bytes_min":..,"bytes_max":..,"recv_over_memcpy_lq":..,
 *               "recv_over_memcpy_median":..,"recv_mb_s_median":..,
 *               "memcpy_mb_s_median":..,"paired_messages":k,"xcopy_messages":m,
 *               "recv_over_xcopy_lq":..,
 *               "recv_over_xcopy_median":..,"xcopy_mb_s_median":..,"recv_over_pipe_lq":..,
 *               "recv_over_pipe_median":..,"pipe_mb_s_median":..,"recv_over_cma_lq":..,
 *               "recv_over_cma_median":..,"cma_mb_s_median":..,"replay_over_cma_lq":..,
 *               "replay_over_cma_median":..,"replay_mb_s_median":..,"posted_over_cma_lq":..,
 *               "posted_over_cma_median":..,"posted_mb_s_median":..,"kept_all":true|false}
 * over every panel of every rank (n = 0 on one rank: no broadcast; k of the n are on ranks
 * with a partner, all but the last rank's of an odd count; m = k where every pair shares a
 * host, m = 0 where none does, and the xcopy and pipe fields are then left out; the cma
 * and the replays' fields also where the kernel refused process_vm_readv, which stderr
 * then names); the rates, in MB/s = 10^6 bytes per second, say which side of a ratio moved. */
#define _POSIX_C_SOURCE 200809L
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <mpi.h>
#include "../common/tb_clock.h"
#include "../common/tb_cma.h"
#include "../common/tb_median.h"
#include "../common/tb_raw.h"
#include "../common/tb_raw_pair.h"
#include "../common/tb_watchdog.h"
#include "panel_time.h"

int __real_MPI_Iprobe(int source, int tag, MPI_Comm comm, int *flag, MPI_Status *status);
int __real_MPI_Recv(void *buf, int count, MPI_Datatype type, int source, int tag,
                    MPI_Comm comm, MPI_Status *status);

#define MAX_PANELS 4096   /* N / NB per run summed over the N list; more are not kept */

static struct { long bytes; double s; } panels[MAX_PANELS];
static int n_panels, kept_all = 1;
static struct { int on, source, tag; MPI_Comm comm; } probed;

int __wrap_MPI_Iprobe(int source, int tag, MPI_Comm comm, int *flag, MPI_Status *status)
{
    int rc = __real_MPI_Iprobe(source, tag, comm, flag, status);
    probed.on = rc == MPI_SUCCESS && *flag;
    probed.source = source;
    probed.tag = tag;
    probed.comm = comm;
    return rc;
}

int __wrap_MPI_Recv(void *buf, int count, MPI_Datatype type, int source, int tag,
                    MPI_Comm comm, MPI_Status *status)
{
    int timed = probed.on && probed.source == source && probed.tag == tag &&
                probed.comm == comm;
    probed.on = 0;
    if (!timed)
        return __real_MPI_Recv(buf, count, type, source, tag, comm, status);
    double t0 = tb_now_s();
    int rc = __real_MPI_Recv(buf, count, type, source, tag, comm, status);
    double s = tb_now_s() - t0;
    int type_bytes = 0;
    MPI_Type_size(type, &type_bytes);
    if (rc != MPI_SUCCESS || count <= 0 || type_bytes <= 0)
        return rc;
    if (n_panels == MAX_PANELS) {
        kept_all = 0;
        return rc;
    }
    panels[n_panels].bytes = (long)count * type_bytes;
    panels[n_panels].s = s;
    n_panels++;
    return rc;
}

enum { COPIES = 9 };   /* timed copies per size, after one untimed */

/* Warm memcpy of `bytes` (buffers touched by the untimed copy), the lower quartile of 9 single
 * copies from src to dst: the same count and statistic as the copies between the cores below,
 * so the panel's ratios over each differ only in the copy. */
static double memcpy_s(char *dst, const char *src, long bytes)
{
    static const struct tb_copy_method single = {
        .warm_s = 0, .per_sample = 1, .sample_s = 0, .samples_min = COPIES,
        .samples_max = COPIES, .read_back = 0
    };
    char *pair[2] = { (char *)src, dst };
    double t[COPIES];
    return tb_raw_memcpy_s(pair, 1, bytes, &single, t);
}

/* The partner's buffer, read with process_vm_readv (tb_cma_read); err: 0, or the kernel's
 * errno. */
struct kernel_src { long pid; uintptr_t addr; int err; };

enum { XCOPY, PIPE, CMA, REPLAY, POSTED, WAYS };

#define REPLAY_TAG 0x7c
#define GO_TAG 0x7d       /* the posted replay's "send now" */

/* The library's transfer of `bytes` from the partner, as HPL takes a panel: the partner sends
 * (MPI_Send), this rank probes until the message is there, then times MPI_Recv (the real calls:
 * the wrappers above would count the replay as a panel; a preloaded library such as
 * apps/slowdown still interposes them). With `posted` this rank posts the receive, as IMB's
 * and NetPIPE's are posted, then tells the partner to send (a zero-byte message) and times
 * from there to the receive's completion: the go message's latency is inside the time (a
 * small share of the smallest panel's 15 us). A library may take a message that found its
 * receive posted by another path than one that came unexpected (Intel MPI 2021 did,
 * docs/measurement.md). (Posted before a barrier instead, Open MPI took the whole message
 * inside the barrier, before the clock started: lower quartiles of 0.0009 of the kernel
 * copy.) The reader's lower quartile of 9 after an untimed one, 0 on the writer; the
 * barriers are outside the time. */
static double replay_s(MPI_Comm pair, int reader, unsigned char *src, unsigned char *dst,
                       long bytes, int posted)
{
    double t[COPIES + 1];
    int me, flag = 0;
    MPI_Status st;
    MPI_Request req;
    MPI_Comm_rank(pair, &me);
    int other = 1 - me;
    for (int c = 0; c <= COPIES; c++) {
        MPI_Barrier(pair);
        if (!reader) {
            if (posted)
                __real_MPI_Recv(NULL, 0, MPI_BYTE, other, GO_TAG, pair, &st);
            MPI_Send(src, (int)bytes, MPI_BYTE, other, REPLAY_TAG, pair);
            continue;
        }
        double t0;
        if (posted) {
            MPI_Irecv(dst, (int)bytes, MPI_BYTE, other, REPLAY_TAG, pair, &req);
            t0 = tb_now_s();
            MPI_Send(NULL, 0, MPI_BYTE, other, GO_TAG, pair);
            MPI_Wait(&req, &st);
        } else {
            do
                __real_MPI_Iprobe(other, REPLAY_TAG, pair, &flag, &st);
            while (!flag);
            t0 = tb_now_s();
            __real_MPI_Recv(dst, (int)bytes, MPI_BYTE, other, REPLAY_TAG, pair, &st);
        }
        t[c] = tb_now_s() - t0;
    }
    MPI_Barrier(pair);
    if (!reader)
        return 0;
    tb_median(t + 1, COPIES);
    return t[1 + COPIES / 4];
}

/* One side of a copy of `bytes` between the pair's cores, the reader's lower quartile of 9
 * (after an untimed one that maps the pages), 0 on the writer, -1 where the kernel refused
 * (k->err set); the barriers are outside the time. XCOPY: the writer fills the shared buffer,
 * then the reader copies it out (one copy); PIPE: the writer copies `src` in by 32 KiB chunks,
 * publishing each, while the reader copies each published chunk out (two copies at once, as a
 * shared-memory path does: tb_raw.h's pipe, as p2p's shm transport); CMA: the writer fills
 * `src`, its own buffer, then the reader reads it with process_vm_readv (one copy by the
 * kernel, as the libraries make it). */
static double xcopy_s(MPI_Comm pair, int reader, struct tb_raw_lane *x, unsigned char *src,
                      unsigned char *dst, long bytes, int way, uint64_t *published,
                      struct kernel_src *k)
{
    double t[COPIES + 1];
    int piped = way == PIPE;
    for (int c = 0; c <= COPIES; c++) {
        if (!reader)
            memset(way == XCOPY ? x->data : src, 1 + c, (size_t)bytes);  /* writer's cache */
        MPI_Barrier(pair);
        uint64_t base = *published;
        double t0 = tb_now_s();
        if (way == XCOPY && reader)
            memcpy(dst, x->data, (size_t)bytes);
        if (way == CMA && reader && !k->err)
            k->err = tb_cma_read(k->pid, dst, (const void *)k->addr, bytes);
        if (piped && reader)     /* bare reads, yielding: a 1x3 grid has more ranks than cores */
            tb_raw_pipe_read(&x->ready, x->data, dst, bytes, base, TB_SPIN_YIELD);
        if (piped && !reader)
            tb_raw_pipe_write(&x->ready, x->data, src, bytes, base);
        t[c] = tb_now_s() - t0;
        __asm__ __volatile__("" : : "r"(dst) : "memory");
        *published = base + (piped ? (uint64_t)bytes : 0);
        MPI_Barrier(pair);                                 /* read before the next write */
    }
    if (!reader)
        return 0;
    if (way == CMA && k->err)
        return -1;
    tb_median(t + 1, COPIES);
    return t[1 + COPIES / 4];
}

/* The xcopy, pipe, cma and both replays' times of each of this rank's panels, from its
 * partner (rank ^ 1), in xs[WAYS i + way] (cma: -1 where the kernel refused); returns 1, or 0
 * where there is no partner on this host or no shared buffer (both ranks of a pair return the
 * same). Collective over comm (MPI_Comm_split). */
static int xcopy_panels(MPI_Comm comm, char *dst, double *xs)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    int partner = rank ^ 1;
    MPI_Comm pair;
    MPI_Comm_split(comm, partner < size ? rank / 2 : MPI_UNDEFINED, rank, &pair);
    if (pair == MPI_COMM_NULL)
        return 0;
    int me = rank & 1, other = 1 - me, tag = 0x7b;
    /* this rank's panel count and largest size: the buffer holds the larger of the pair's */
    long mine[2] = {n_panels, 1}, theirs[2];
    for (int i = 0; i < n_panels; i++)
        mine[1] = panels[i].bytes > mine[1] ? panels[i].bytes : mine[1];
    MPI_Sendrecv(mine, 2, MPI_LONG, other, tag, theirs, 2, MPI_LONG, other, tag, pair,
                 MPI_STATUS_IGNORE);
    long cap = mine[1] > theirs[1] ? mine[1] : theirs[1], partner_pid;
    size_t seglen = sizeof(struct tb_raw_lane) + (size_t)cap;
    /* NULL on both ranks where the pair is on two hosts or either could not map it */
    struct tb_raw_lane *x = tb_raw_pair_segment(pair, "panels", seglen, &partner_pid);
    int ok = x != NULL;
    if (ok) {
        long *sizes = malloc(sizeof(long) * (size_t)(theirs[0] > 0 ? theirs[0] : 1));
        long *own = malloc(sizeof(long) * (size_t)(n_panels > 0 ? n_panels : 1));
        unsigned char *src = malloc((size_t)cap);
        for (int i = 0; i < n_panels && own; i++)
            own[i] = panels[i].bytes;
        int have = sizes && own && src, both;
        MPI_Allreduce(&have, &both, 1, MPI_INT, MPI_MIN, pair);
        ok = both;
        /* where the partner's own buffer is, for the kernel copy */
        struct kernel_src k = { partner_pid, 0, 0 };
        long src_at = (long)(uintptr_t)src, their_src = 0;
        if (ok) {
            MPI_Sendrecv(own, n_panels, MPI_LONG, other, tag, sizes, (int)theirs[0], MPI_LONG,
                         other, tag, pair, MPI_STATUS_IGNORE);
            MPI_Sendrecv(&src_at, 1, MPI_LONG, other, tag, &their_src, 1, MPI_LONG, other, tag,
                         pair, MPI_STATUS_IGNORE);
            k.addr = (uintptr_t)their_src;
        }
        uint64_t published = 0;
        if (ok && me == 0)
            atomic_store(&x->ready, 0);
        if (ok)
            MPI_Barrier(pair);                             /* the count is 0 before any copy */
        /* the even rank reads its panels' sizes first, then the odd rank */
        for (int turn = 0; turn < 2 && ok; turn++) {
            int reader = me == turn;
            long n = reader ? n_panels : theirs[0];
            for (long i = 0; i < n; i++)
                for (int way = 0; way < WAYS; way++) {
                    long bytes = reader ? own[i] : sizes[i];
                    tb_watchdog_beat();        /* one per panel and way, outside the timing */
                    double s = way == REPLAY || way == POSTED
                        ? replay_s(pair, reader, src, (unsigned char *)dst, bytes,
                                   way == POSTED)
                        : xcopy_s(pair, reader, x, src, (unsigned char *)dst, bytes, way,
                                  &published, &k);
                    if (reader)
                        xs[WAYS * i + way] = s;
                }
        }
        if (k.err)
            fprintf(stderr, "panel_time: rank %d: no kernel copy baseline (cma fields left "
                    "out): process_vm_readv: %s\n", rank, strerror(k.err));
        free(src);
        free(own);
        free(sizes);
    }
    tb_raw_segment_unmap(x, seglen);
    MPI_Comm_free(&pair);
    return ok;
}

/* per panel: recv/memcpy, recv MB/s, memcpy MB/s, then per way (xcopy, pipe, cma) recv/way,
 * way MB/s, and for the two replays (probed, posted) replay/cma, replay MB/s */
enum { COLS = 3 + 2 * WAYS };

/* Column c of rank 0's table over the panels that have it (xcopy columns: >= 0): its median,
 * and its lower quartile in *lq; the count in *n. */
static double column(const double *every, int rows, int c, double *lq, int *n)
{
    double *col = malloc(sizeof(double) * (rows > 0 ? rows : 1));
    *n = 0;
    for (int i = 0; i < rows && col; i++)
        if (every[COLS * i + c] >= 0)
            col[(*n)++] = every[COLS * i + c];
    double med = *n ? tb_median(col, *n) : 0;             /* sorts col */
    *lq = *n ? col[*n / 4] : 0;
    int kept = col != NULL;
    free(col);
    return kept ? med : -1;
}

void panel_time_report(MPI_Comm comm)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    long most = 1;
    for (int i = 0; i < n_panels; i++)
        if (panels[i].bytes > most)
            most = panels[i].bytes;
    char *src = malloc((size_t)most), *dst = malloc((size_t)most);
    double *fig = malloc(sizeof(double) * COLS * (n_panels > 0 ? n_panels : 1));
    double *xs = malloc(sizeof(double) * WAYS * (n_panels > 0 ? n_panels : 1));
    int ok = src && dst && fig && xs;
    if (ok) {
        memset(src, 0x5a, (size_t)most);
        for (int i = 0; i < n_panels; i++) {
            double copy = memcpy_s(dst, src, panels[i].bytes);
            fig[COLS * i] = panels[i].s / copy;
            fig[COLS * i + 1] = 1e-6 * (double)panels[i].bytes / panels[i].s;
            fig[COLS * i + 2] = 1e-6 * (double)panels[i].bytes / copy;
            for (int c = 3; c < COLS; c++)
                fig[COLS * i + c] = -1;                    /* no xcopy (yet) */
        }
    }
    /* collective, so every rank takes part; one without buffers reads into none */
    int all_ok;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm);
    if (all_ok && xcopy_panels(comm, dst, xs))
        for (int i = 0; i < n_panels; i++) {
            for (int way = 0; way < WAYS; way++) {
                double t = xs[WAYS * i + way];
                if (t <= 0)
                    continue;                              /* the kernel refused: left out */
                int replay = way == REPLAY || way == POSTED;
                double over = replay ? xs[WAYS * i + CMA] : panels[i].s;
                if (over <= 0)
                    continue;                              /* replay over a refused copy */
                fig[COLS * i + 3 + 2 * way] = replay ? t / over : over / t;
                fig[COLS * i + 4 + 2 * way] = 1e-6 * (double)panels[i].bytes / t;
            }
        }
    long least = most;
    for (int i = 0; i < n_panels; i++)
        if (panels[i].bytes < least)
            least = panels[i].bytes;
    /* One reduction: a rank that lost a panel or its buffers, the least and largest size
     * (the maximum of -least is the least). */
    long mine[4] = {ok ? n_panels : 0, !(ok && kept_all), n_panels ? -least : -(1L << 62),
                    n_panels ? most : 0};
    long all[4];
    MPI_Allreduce(mine, all, 4, MPI_LONG, MPI_MAX, comm);
    int *counts = rank == 0 ? malloc(sizeof(int) * size) : NULL;
    int n = COLS * (int)mine[0];
    MPI_Gather(&n, 1, MPI_INT, counts, 1, MPI_INT, 0, comm);
    double *every = NULL;
    int total = 0, *offsets = NULL;
    if (rank == 0) {
        offsets = malloc(sizeof(int) * size);
        for (int r = 0; r < size; r++) {
            offsets[r] = total;
            total += counts[r];
        }
        every = malloc(sizeof(double) * (total > 0 ? total : 1));
    }
    MPI_Gatherv(fig, n, MPI_DOUBLE, every, counts, offsets, MPI_DOUBLE, 0, comm);
    if (rank == 0) {
        int rows = total / COLS, got;
        double lq, xlq, unused;
        /* the panels of ranks with a partner: an odd count's last rank has none */
        int paired = 0;
        for (int r = 0; r < size; r++)
            paired += (r ^ 1) < size ? counts[r] / COLS : 0;
        printf("HPL-PANELS {\"messages\":%d", rows);
        if (rows > 0) {
            double ratio = column(every, rows, 0, &lq, &got);
            double recv = column(every, rows, 1, &unused, &got);
            double copy = column(every, rows, 2, &unused, &got);
            printf(",\"bytes_min\":%ld,\"bytes_max\":%ld,\"recv_over_memcpy_lq\":%.4g,"
                   "\"recv_over_memcpy_median\":%.4g,\"recv_mb_s_median\":%.5g,"
                   "\"memcpy_mb_s_median\":%.5g", -all[2], all[3], lq, ratio, recv, copy);
            double xratio = column(every, rows, 3 + 2 * XCOPY, &xlq, &got);
            double xrate = column(every, rows, 4 + 2 * XCOPY, &unused, &got);
            printf(",\"paired_messages\":%d,\"xcopy_messages\":%d", paired, got);
            if (got > 0)
                printf(",\"recv_over_xcopy_lq\":%.4g,\"recv_over_xcopy_median\":%.4g,"
                       "\"xcopy_mb_s_median\":%.5g", xlq, xratio, xrate);
            double plq, pratio = column(every, rows, 3 + 2 * PIPE, &plq, &got);
            double prate = column(every, rows, 4 + 2 * PIPE, &unused, &got);
            if (got > 0)
                printf(",\"recv_over_pipe_lq\":%.4g,\"recv_over_pipe_median\":%.4g,"
                       "\"pipe_mb_s_median\":%.5g", plq, pratio, prate);
            /* every paired panel or none: a kernel that refused one rank leaves the field out */
            double klq, kratio = column(every, rows, 3 + 2 * CMA, &klq, &got);
            double krate = column(every, rows, 4 + 2 * CMA, &unused, &got);
            if (got > 0 && got == paired)
                printf(",\"recv_over_cma_lq\":%.4g,\"recv_over_cma_median\":%.4g,"
                       "\"cma_mb_s_median\":%.5g", klq, kratio, krate);
            double rlq, rratio = column(every, rows, 3 + 2 * REPLAY, &rlq, &got);
            double rrate = column(every, rows, 4 + 2 * REPLAY, &unused, &got);
            if (got > 0 && got == paired)
                printf(",\"replay_over_cma_lq\":%.4g,\"replay_over_cma_median\":%.4g,"
                       "\"replay_mb_s_median\":%.5g", rlq, rratio, rrate);
            double qlq, qratio = column(every, rows, 3 + 2 * POSTED, &qlq, &got);
            double qrate = column(every, rows, 4 + 2 * POSTED, &unused, &got);
            if (got > 0 && got == paired)
                printf(",\"posted_over_cma_lq\":%.4g,\"posted_over_cma_median\":%.4g,"
                       "\"posted_mb_s_median\":%.5g", qlq, qratio, qrate);
        }
        printf(",\"kept_all\":%s}\n", all[1] ? "false" : "true");
        fflush(stdout);
    }
    free(every);
    free(offsets);
    free(counts);
    free(xs);
    free(fig);
    free(dst);
    free(src);
}
