/* p2p: ping-pong latency and bandwidth of the eight point-to-point pairs
 * {Send, Isend, Ssend, Issend} x {Recv, Irecv} between ranks 0 and 1.
 * MPI-1 calls only, so that it builds on LAM/MPI 7.1.4. See README.md. */
#define _GNU_SOURCE /* sched_getcpu */
#include <mpi.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "p2p.h"

#define TAG_DATA 17
#define TAG_CTRL 18
#define REPS_CAP (1L << 20)  /* stop doubling round trips per sample here */
#define CALIB_TRIES 3  /* samples per calibration step */
#define HANDSHAKE_TRIPS 1000 /* 1-byte round trips before anything is timed */
#define WARMUP_SAMPLES 2
#define WARMUP_REPS 2

/* ---- the pair table: one send function per mode, one receive mode per
 * receive call; the timing core below is shared by all eight pairs ---- */

struct rx { void *buf; int n, peer; MPI_Request req; MPI_Status st; };

typedef void (*send_fn)(void *buf, int n, int peer);
struct recv_mode {
    void (*post)(struct rx *); /* start the receive (no-op if blocking) */
    void (*done)(struct rx *); /* finish it; leaves the status in rx->st */
};

static void send_std(void *b, int n, int peer)
{
    MPI_Send(b, n, MPI_BYTE, peer, TAG_DATA, MPI_COMM_WORLD);
}
static void send_sync(void *b, int n, int peer)
{
    MPI_Ssend(b, n, MPI_BYTE, peer, TAG_DATA, MPI_COMM_WORLD);
}
/* Non-blocking sends are completed at once: the side goes on only when its
 * send buffer is free again, as the thesis's modified program does. */
static void send_istd(void *b, int n, int peer)
{
    MPI_Request r;
    MPI_Status st;
    MPI_Isend(b, n, MPI_BYTE, peer, TAG_DATA, MPI_COMM_WORLD, &r);
    MPI_Wait(&r, &st);
}
static void send_isync(void *b, int n, int peer)
{
    MPI_Request r;
    MPI_Status st;
    MPI_Issend(b, n, MPI_BYTE, peer, TAG_DATA, MPI_COMM_WORLD, &r);
    MPI_Wait(&r, &st);
}

static void recv_nopost(struct rx *r) { (void)r; }
static void recv_block(struct rx *r)
{
    MPI_Recv(r->buf, r->n, MPI_BYTE, r->peer, TAG_DATA, MPI_COMM_WORLD,
             &r->st);
}
static void irecv_post(struct rx *r)
{
    MPI_Irecv(r->buf, r->n, MPI_BYTE, r->peer, TAG_DATA, MPI_COMM_WORLD,
              &r->req);
}
static void irecv_wait(struct rx *r) { MPI_Wait(&r->req, &r->st); }

static const send_fn send_modes[4] = { send_std, send_istd, send_sync,
                                       send_isync };
static const struct recv_mode recv_modes[2] = {
    { recv_nopost, recv_block }, { irecv_post, irecv_wait } };

const char *const p2p_pair_names[P2P_NPAIRS] = {
    "Send-Recv",  "Send-Irecv",  "Isend-Recv",  "Isend-Irecv",
    "Ssend-Recv", "Ssend-Irecv", "Issend-Recv", "Issend-Irecv" };

int p2p_pair_has_irecv(int pair) { return pair % 2 == 1; }

/* ---- state of one run ---- */

struct ctx {
    int rank;
    const struct options *o;
    unsigned char *sbuf, *rbuf; /* one each, reused: cache-warm */
    int pair, variant;
    struct rx rx;
};

static const char *variant_name(int v)
{
    return v == VAR_PREPOSTED ? "preposted" : "complete";
}

/* ---- the timing core, written once ---- */

/* Runs reps round trips of n bytes; returns their total time on rank 0.
 * complete:  each side finishes its receive before it sends the reply.
 * preposted: the receive for the next incoming message is already posted
 *            when the partner may send it (NetPIPE -a); every Wait is still
 *            inside the timed loop. */
static double round_trips(struct ctx *c, int n, long reps)
{
    send_fn send = send_modes[c->pair / 2];
    const struct recv_mode *rm = &recv_modes[c->pair % 2];
    int pre = c->variant == VAR_PREPOSTED;
    struct rx *rx = &c->rx;

    rx->n = n;
    if (c->rank == 1 && pre)
        rm->post(rx); /* message 0 may come right after the barrier */
    MPI_Barrier(MPI_COMM_WORLD);
    if (c->rank == 0) {
        double t0 = MPI_Wtime();
        for (long i = 0; i < reps; i++) {
            if (pre)
                rm->post(rx);
            send(c->sbuf, n, 1);
            if (!pre)
                rm->post(rx);
            rm->done(rx);
        }
        return MPI_Wtime() - t0;
    }
    for (long i = 0; i < reps; i++) {
        if (!pre)
            rm->post(rx);
        rm->done(rx);
        if (pre && i + 1 < reps)
            rm->post(rx);
        send(c->sbuf, n, 0);
    }
    return 0.0;
}

/* ---- payload pattern and check, all outside the timed region ---- */

static uint32_t pattern_seed(int rank, long size, unsigned idx)
{
    uint32_t h = 0x5a17u ^ ((uint32_t)rank * 0x9E3779B9u);
    h = (h ^ (uint32_t)size) * 0x85EBCA6Bu;
    h = (h ^ idx) * 0xC2B2AE35u;
    return h ^ (h >> 16);
}

static unsigned char pattern_byte(uint32_t seed, size_t j)
{
    return (unsigned char)((seed + (uint32_t)j * 2654435761u) >> 24);
}

static void fail(const struct ctx *c, long size, const char *what)
{
    fflush(stdout);
    fprintf(stderr, "p2p: payload check failed: pair %s variant %s size %ld"
            " bytes: %s\n", p2p_pair_names[c->pair], variant_name(c->variant),
            size, what);
    fflush(stderr);
    /* Some launchers (Open MPI 5's prterun) tear down on abort before they
     * have forwarded the rank's stderr; give the line time to get out. */
    struct timespec pause = { 1, 0 };
    nanosleep(&pause, NULL);
    MPI_Abort(MPI_COMM_WORLD, 3);
    exit(3); /* not reached */
}

/* One sample: fresh pattern (depends on rank, size, sample index) in the
 * send buffer, the receive buffer set to the complement of what must arrive
 * (so every byte has to be written), the timed round trips, then a check of
 * every byte of the last message and of its length. */
static double sample(struct ctx *c, long size, unsigned idx, long reps)
{
    int n = (int)size, partner = 1 - c->rank;
    uint32_t mine = pattern_seed(c->rank, size, idx);
    uint32_t theirs = pattern_seed(partner, size, idx);
    for (int j = 0; j < n; j++) {
        c->sbuf[j] = pattern_byte(mine, (size_t)j);
        c->rbuf[j] = (unsigned char)~pattern_byte(theirs, (size_t)j);
    }
    if (c->rank == 1 && c->o->corrupt_at == size)
        c->sbuf[n / 2] ^= 0xA5; /* test switch: the check must bite */

    double t = round_trips(c, n, reps);

    char what[96];
    int got = -1;
    MPI_Get_count(&c->rx.st, MPI_BYTE, &got);
    if (got != n) {
        snprintf(what, sizeof what, "received %d bytes, expected %d", got, n);
        fail(c, size, what);
    }
    for (int j = 0; j < n; j++) {
        unsigned char want = pattern_byte(theirs, (size_t)j);
        if (c->rbuf[j] != want) {
            snprintf(what, sizeof what, "byte %d is 0x%02x, expected 0x%02x",
                     j, c->rbuf[j], want);
            fail(c, size, what);
        }
    }
    return t;
}

/* Rank 0 doubles the round trips per sample from 1 until a sample lasts at
 * least 100 timer ticks and one timer call is under 0.5% of it (or the cap);
 * each new count goes to rank 1 by broadcast, outside the timed region. */
static long calibrate(struct ctx *c, long size, double wtick, double tcost)
{
    long reps = 1, msg;
    for (;;) {
        msg = reps;
        MPI_Bcast(&msg, 1, MPI_LONG, 0, MPI_COMM_WORLD);
        if (msg < 0)
            return -msg; /* negative = final count, both agree on it */
        reps = msg; /* rank 1 learns the count here */
        /* Judge the shortest of a few samples, so that one sample slowed
         * by noise does not stop the doubling too early. */
        double t = sample(c, size, 0, reps);
        for (int k = 1; k < CALIB_TRIES; k++) {
            double u = sample(c, size, 0, reps);
            t = u < t ? u : t;
        }
        if (c->rank == 0) {
            if ((t >= 100.0 * wtick && tcost < 0.005 * t) || reps >= REPS_CAP)
                reps = -reps;
            else
                reps *= 2;
        }
    }
}

/* ---- statistics and output ---- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

struct stats { double min, median, mean, p95; };

/* Sorts v in place. Median: middle value, mean of the two middle ones for
 * an even count. p95: nearest rank, the ceil(0.95 N)-th smallest. */
static struct stats summarise(double *v, int n)
{
    struct stats s;
    double sum = 0;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    for (int i = 0; i < n; i++)
        sum += v[i];
    s.min = v[0];
    s.median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    s.mean = sum / n;
    int r = (95 * n + 99) / 100; /* ceil(0.95 n), exact in integers */
    s.p95 = v[r - 1];
    return s;
}

/* JSON string: quotes, backslashes and control characters escaped. */
static void json_str(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            printf("\\%c", ch);
        else if (ch < 0x20)
            printf("\\u%04x", ch);
        else
            putchar(ch);
    }
    putchar('"');
}

/* Library version text with runs of white space made single spaces. */
static void library_version(char *out, size_t len)
{
#if defined(LAM_VERSION)
    snprintf(out, len, "LAM/MPI %s", LAM_VERSION);
#elif MPI_VERSION >= 3
    char raw[MPI_MAX_LIBRARY_VERSION_STRING];
    int rlen = 0;
    size_t k = 0;
    MPI_Get_library_version(raw, &rlen);
    /* The first line names the library and version; MPICH goes on with its
     * whole configure line, which belongs in no table. */
    for (int i = 0; i < rlen && raw[i] && raw[i] != '\n' && k + 1 < len; i++) {
        int space = raw[i] == ' ' || raw[i] == '\t' || raw[i] == '\n' ||
                    raw[i] == '\r';
        if (!space)
            out[k++] = raw[i];
        else if (k > 0 && out[k - 1] != ' ')
            out[k++] = ' ';
    }
    while (k > 0 && out[k - 1] == ' ')
        k--;
    out[k] = '\0';
#else
    snprintf(out, len, "unknown");
#endif
}

/* Pin this rank to the (rank mod n)-th CPU of its allowed set, as a launcher's
 * "bind to core" would; returns 0, or -1 where it cannot. */
static int bind_self(int rank)
{
#ifdef __linux__
    cpu_set_t allowed, one;
    if (sched_getaffinity(0, sizeof allowed, &allowed))
        return -1;
    int n = CPU_COUNT(&allowed), want = rank % (n > 0 ? n : 1);
    for (int cpu = 0, seen = 0; cpu < CPU_SETSIZE; cpu++) {
        if (!CPU_ISSET(cpu, &allowed))
            continue;
        if (seen++ == want) {
            CPU_ZERO(&one);
            CPU_SET(cpu, &one);
            return sched_setaffinity(0, sizeof one, &one);
        }
    }
#else
    (void)rank;
#endif
    return -1;
}

static int current_cpu(void)
{
#ifdef __linux__
    return sched_getcpu();
#else
    return -1;
#endif
}

/* Rank 1's CPU (and host) reach rank 0 by a plain message. */
static int partner_cpu(int rank, int cpu, char *host, int hostlen)
{
    MPI_Status st;
    if (rank == 1) {
        MPI_Send(&cpu, 1, MPI_INT, 0, TAG_CTRL, MPI_COMM_WORLD);
        if (host)
            MPI_Send(host, hostlen, MPI_CHAR, 0, TAG_CTRL, MPI_COMM_WORLD);
        return cpu;
    }
    int other;
    MPI_Recv(&other, 1, MPI_INT, 1, TAG_CTRL, MPI_COMM_WORLD, &st);
    if (host)
        MPI_Recv(host, hostlen, MPI_CHAR, 1, TAG_CTRL, MPI_COMM_WORLD, &st);
    return other;
}

/* Calibrates every size, then runs the interleaved passes (pass p takes
 * one sample of each size in turn), then prints records and a table. */
static void run_one(struct ctx *c, double wtick, double tcost, double *t,
                    long *reps)
{
    const struct options *o = c->o;
    for (int s = 0; s < o->nsizes; s++) {
        for (int w = 0; w < WARMUP_SAMPLES; w++)
            sample(c, o->sizes[s], 0, WARMUP_REPS);
        reps[s] = calibrate(c, o->sizes[s], wtick, tcost);
    }
    for (int p = 0; p < o->samples; p++)
        for (int s = 0; s < o->nsizes; s++) {
            double dt = sample(c, o->sizes[s], (unsigned)p + 1, reps[s]);
            /* half round trip, in microseconds */
            t[(size_t)s * o->samples + p] = dt / reps[s] / 2.0 * 1e6;
        }
    if (c->rank != 0)
        return;

    const char *pn = p2p_pair_names[c->pair], *vn = variant_name(c->variant);
    struct stats *st = malloc((size_t)o->nsizes * sizeof *st);
    if (!st) {
        fprintf(stderr, "p2p: out of memory for statistics\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (int s = 0; s < o->nsizes; s++) {
        st[s] = summarise(&t[(size_t)s * o->samples], o->samples);
        printf("P2P {\"stack\":");
        json_str(o->stack);
        printf(",\"pair\":\"%s\",\"variant\":\"%s\",\"size_bytes\":%ld,"
               "\"samples\":%d,\"reps_per_sample\":%ld,\"min_us\":%.6g,"
               "\"median_us\":%.6g,\"mean_us\":%.6g,\"p95_us\":%.6g,"
               "\"bandwidth_MBps\":", pn, vn, o->sizes[s], o->samples,
               reps[s], st[s].min, st[s].median, st[s].mean, st[s].p95);
        /* size / median seconds / 1e6 = size / median_us */
        if (st[s].median > 0)
            printf("%.6g", (double)o->sizes[s] / st[s].median);
        else
            printf("null"); /* timer too coarse even at the cap */
        printf(",\"payload_checked\":true}\n");
    }
    printf("# %s, variant %s: half round trip in us (microseconds), "
           "bandwidth in MB/s (10^6 bytes/s) from the median; cache-warm\n"
           "# %12s %8s %7s %11s %11s %11s %11s %11s\n", pn, vn, "size_bytes",
           "reps", "samples", "min_us", "median_us", "mean_us", "p95_us",
           "MB/s");
    for (int s = 0; s < o->nsizes; s++)
        printf("# %12ld %8ld %7d %11.3f %11.3f %11.3f %11.3f %11.2f\n",
               o->sizes[s], reps[s], o->samples, st[s].min, st[s].median,
               st[s].mean, st[s].p95,
               st[s].median > 0 ? o->sizes[s] / st[s].median : 0.0);
    fflush(stdout);
    free(st);
}

int main(int argc, char **argv)
{
    struct options o;
    char err[512] = "";
    int rank, nranks;

    MPI_Init(&argc, &argv);
    double wall0 = MPI_Wtime();
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);

    /* Every rank parses the same argv, so all take the same way out. */
    int rc = p2p_parse_args(argc, argv, &o, err, sizeof err);
    if (rc || o.help || nranks != 2) {
        if (rank == 0) {
            if (rc)
                fprintf(stderr, "%s\n", err);
            else if (o.help)
                p2p_usage();
            else
                fprintf(stderr, "p2p: needs exactly 2 ranks, got %d\n",
                        nranks);
        }
        free(o.sizes);
        rc = rc || o.help ? rc : 2;
#ifdef LAM_VERSION
        /* LAM's mpirun returns 0 for any rank that called MPI_Finalize, so
         * a failing run leaves without it, once rank 0 has printed. */
        if (rc) {
            fflush(stderr);
            MPI_Barrier(MPI_COMM_WORLD);
            exit(rc);
        }
#endif
        MPI_Finalize();
        return rc;
    }

    if (o.bind_self && bind_self(rank) != 0) {
        fprintf(stderr, "p2p: --bind-self: rank %d could not pin itself to a CPU\n",
                rank);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int cpu0 = current_cpu(), cpu1;
    char host[MPI_MAX_PROCESSOR_NAME + 1] = "", host1[sizeof host] = "";
    int hl = 0;
    MPI_Get_processor_name(host, &hl);
    memcpy(host1, host, sizeof host);
    cpu1 = partner_cpu(rank, cpu0, host1, (int)sizeof host1);
    host1[sizeof host1 - 1] = '\0';

    /* Timer resolution and the cost of one MPI_Wtime call. */
    const int ncalls = 100000;
    double wtick = MPI_Wtick();
    volatile double sink = 0;
    double t0 = MPI_Wtime();
    for (int i = 0; i < ncalls; i++)
        sink += MPI_Wtime();
    double tcost = (MPI_Wtime() - t0) / ncalls;
    (void)sink;

    long maxsize = o.sizes[o.nsizes - 1];
    struct ctx c;
    c.rank = rank;
    c.o = &o;
    c.sbuf = malloc((size_t)maxsize);
    c.rbuf = malloc((size_t)maxsize);
    double *t = malloc((size_t)o.nsizes * (size_t)o.samples * sizeof *t);
    long *reps = malloc((size_t)o.nsizes * sizeof *reps);
    if (!c.sbuf || !c.rbuf || !t || !reps) {
        fprintf(stderr, "p2p: rank %d: out of memory for two %ld-byte buffers"
                " and %d x %d samples\n", rank, maxsize, o.nsizes, o.samples);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    c.rx.buf = c.rbuf;
    c.rx.peer = 1 - rank;

    /* Handshake: both ranks are up and the path is open before timing. */
    MPI_Barrier(MPI_COMM_WORLD);
    c.pair = 0;
    c.variant = VAR_COMPLETE;
    round_trips(&c, 1, HANDSHAKE_TRIPS);

    if (rank == 0) {
        char ver[1024];
        library_version(ver, sizeof ver);
        printf("P2P-RUN {\"stack\":");
        json_str(o.stack);
        printf(",\"library_version\":");
        json_str(ver);
        printf(",\"mpi_standard\":\"%d.%d\",\"host\":", MPI_VERSION,
               MPI_SUBVERSION);
        json_str(host);
        printf(",\"host_rank1\":");
        json_str(host1);
        printf(",\"ranks\":2,\"cpu_rank0_start\":%d,\"cpu_rank1_start\":%d,"
               "\"self_bound\":%s,"
               "\"wtick_s\":%.6g,\"timer_cost_ns\":%.4g,\"samples\":%d,"
               "\"cache\":\"warm\",\"sizes\":", cpu0, cpu1,
               o.bind_self ? "true" : "false", wtick, tcost * 1e9, o.samples);
        json_str(o.sizes_arg);
        printf("}\n");
        fflush(stdout);
    }

    for (int p = 0; p < P2P_NPAIRS; p++) {
        if (o.pair >= 0 && o.pair != p)
            continue;
        for (int v = VAR_COMPLETE; v <= VAR_PREPOSTED; v <<= 1) {
            if (!(o.variant & v) ||
                (v == VAR_PREPOSTED && !p2p_pair_has_irecv(p)))
                continue;
            c.pair = p;
            c.variant = v;
            run_one(&c, wtick, tcost, t, reps);
        }
    }

    cpu0 = current_cpu();
    cpu1 = partner_cpu(rank, cpu0, NULL, 0);
    if (rank == 0) {
        printf("P2P-END {\"stack\":");
        json_str(o.stack);
        printf(",\"cpu_rank0_end\":%d,\"cpu_rank1_end\":%d,\"wall_s\":%.6g}\n",
               cpu0, cpu1, MPI_Wtime() - wall0);
        fflush(stdout);
    }
    free(c.sbuf);
    free(c.rbuf);
    free(t);
    free(reps);
    free(o.sizes);
    MPI_Finalize();
    return 0;
}
