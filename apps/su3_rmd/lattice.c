/* Domain decomposition, neighbour gathers and MPI call profiling. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include "../common/tb_median.h"
#include "../common/tb_watchdog.h"
#include "lattice.h"

const char *prof_name[P_NCALLS] = {
    "MPI_Comm_rank", "MPI_Comm_size", "MPI_Barrier", "MPI_Irecv", "MPI_Isend",
    "MPI_Ssend", "MPI_Wait", "MPI_Waitall", "MPI_Allreduce", "MPI_Reduce" };
double prof_sec[P_NCALLS];
long prof_count[P_NCALLS];
gather_log gather_logs[GATHER_SIZES];
int gather_sizes, gather_log_full;

long gather_most_bytes(void)
{
    long most = 0;
    for (int k = 0; k < gather_sizes; k++)
        most = gather_logs[k].bytes > most ? gather_logs[k].bytes : most;
    return most;
}

static void log_gather(long bytes, double s, int d, int dir)
{
    int k = 0;
    while (k < gather_sizes && gather_logs[k].bytes != bytes)
        k++;
    if (k == GATHER_SIZES) {
        gather_log_full = 1;
        return;
    }
    gather_log *g = &gather_logs[k];
    if (k == gather_sizes) {
        *g = (gather_log){ .bytes = bytes, .d = d, .dir = dir };
        gather_sizes++;
    }
    if (g->n == g->cap) {
        int cap = g->cap ? 2 * g->cap : 1024;
        double *t = realloc(g->s, sizeof(double) * (size_t)cap);
        if (!t) {
            gather_log_full = 1;
            return;
        }
        g->s = t, g->cap = cap;
    }
    g->s[g->n++] = s;
}

static const char dim_name[4] = { 'x', 'y', 'z', 't' };

/*
 * Halve, one rank-doubling at a time, the dimension with the largest local
 * extent that is still even; ties go to t, then z, y, x (MILC-like: t is
 * the longest in the thesis's lattices and is split first).
 */
int lattice_layout(lattice *lat, int nranks, char *msg, int msglen)
{
    for (int d = 0; d < 4; d++) {
        lat->grid[d] = 1;
        lat->l[d] = lat->L[d];
    }
    for (int n = nranks; n > 1; n /= 2) {
        int best = -1;
        for (int d = 3; d >= 0; d--)
            if (lat->l[d] % 2 == 0 && (best < 0 || lat->l[d] > lat->l[best]))
                best = d;
        if (best < 0) {
            int big = 3;
            for (int d = 3; d >= 0; d--)
                if (lat->l[d] > lat->l[big])
                    big = d;
            snprintf(msg, msglen, "lattice %dx%dx%dx%d cannot be split over %d ranks: "
                     "dimension n%c has local extent %d (global %d, %d ranks along it), "
                     "which is odd, as is every other local extent", lat->L[0], lat->L[1],
                     lat->L[2], lat->L[3], nranks, dim_name[big], lat->l[big], lat->L[big],
                     lat->grid[big]);
            return -1;
        }
        lat->grid[best] *= 2;
        lat->l[best] /= 2;
    }
    long long v = (long long)lat->l[0] * lat->l[1] * lat->l[2] * lat->l[3];
    if (v > MAX_LOCAL_VOLUME) { /* keeps int indices safe; ~36 GB per rank */
        snprintf(msg, msglen, "lattice %dx%dx%dx%d is too large for %d ranks: %lld "
                 "sites per rank, at most %d", lat->L[0], lat->L[1], lat->L[2],
                 lat->L[3], nranks, v, MAX_LOCAL_VOLUME);
        return -1;
    }
    lat->vol = (int)v;
    for (int d = 0; d < 4; d++)
        lat->face[d] = lat->vol / lat->l[d];
    return 0;
}

static int rank_of(const lattice *lat, const int c[4])
{
    return ((c[3] * lat->grid[2] + c[2]) * lat->grid[1] + c[1]) * lat->grid[0] + c[0];
}

static void site_coords(const lattice *lat, int i, int x[4])
{
    for (int d = 0; d < 4; d++) {
        x[d] = i % lat->l[d];
        i /= lat->l[d];
    }
}

static int site_index(const lattice *lat, const int x[4])
{
    return x[0] + lat->l[0] * (x[1] + lat->l[1] * (x[2] + lat->l[2] * x[3]));
}

/* Position of a site within the face normal to d: the site index with the
 * d coordinate dropped, so sender and receiver order faces alike. */
static int face_index(const lattice *lat, const int x[4], int d)
{
    int f = 0;
    for (int e = 3; e >= 0; e--)
        if (e != d)
            f = f * lat->l[e] + x[e];
    return f;
}

long lattice_global_index(const lattice *lat, int i)
{
    int x[4];
    long g = 0;
    site_coords(lat, i, x);
    for (int d = 3; d >= 0; d--)
        g = g * lat->L[d] + (long)lat->coord[d] * lat->l[d] + x[d];
    return g;
}

int lattice_setup(lattice *lat, int rank)
{
    int r = rank, maxface = 0;
    for (int d = 0; d < 4; d++) {
        lat->coord[d] = r % lat->grid[d];
        r /= lat->grid[d];
    }
    for (int d = 0; d < 4; d++) {
        int c[4] = { lat->coord[0], lat->coord[1], lat->coord[2], lat->coord[3] };
        c[d] = (lat->coord[d] + 1) % lat->grid[d];
        lat->nbr[d][PLUS] = rank_of(lat, c);
        c[d] = (lat->coord[d] + lat->grid[d] - 1) % lat->grid[d];
        lat->nbr[d][MINUS] = rank_of(lat, c);
        if (lat->face[d] > maxface)
            maxface = lat->face[d];
        for (int s = 0; s < 2; s++) {
            lat->nb[d][s] = malloc(sizeof(int) * lat->vol);
            lat->sendlist[d][s] = malloc(sizeof(int) * lat->face[d]);
            if (!lat->nb[d][s] || !lat->sendlist[d][s])
                return -1;
        }
    }
    lat->sendbuf = malloc(sizeof(su3) * 4 * (size_t)maxface);
    if (!lat->sendbuf)
        return -1;
    for (int i = 0; i < lat->vol; i++) {
        int x[4];
        site_coords(lat, i, x);
        for (int d = 0; d < 4; d++) {
            int split = lat->grid[d] > 1, ld = lat->l[d];
            int y[4] = { x[0], x[1], x[2], x[3] };
            /* +d: off-rank when on the high face; its data arrives from the
             * +d neighbour, which sends its low face (x_d = 0). */
            y[d] = (x[d] + 1) % ld;
            lat->nb[d][PLUS][i] = (split && x[d] == ld - 1)
                ? -(face_index(lat, x, d) + 1) : site_index(lat, y);
            y[d] = (x[d] + ld - 1) % ld;
            lat->nb[d][MINUS][i] = (split && x[d] == 0)
                ? -(face_index(lat, x, d) + 1) : site_index(lat, y);
            if (x[d] == 0)
                lat->sendlist[d][PLUS][face_index(lat, x, d)] = i;
            if (x[d] == ld - 1)
                lat->sendlist[d][MINUS][face_index(lat, x, d)] = i;
        }
    }
    return 0;
}

/* One exchange: Irecv from the -s neighbour, then Ssend (the 2002 MILC build: synchronous send
 * against a pre-posted Irecv) and Wait, or Isend and Waitall. The gathers count its calls in
 * the profile; the exchanges timed alone after the run do not (`prof` 0). */
#define CALL(prof, id, call) do { if (prof) PROF(id, call); else (void)(call); } while (0)
static void exchange(lattice *lat, const void *send, void *recv, int count, int d, int s,
                     int prof)
{
    int from = lat->nbr[d][s], to = lat->nbr[d][1 - s], tag = 2 * d + s;
    MPI_Request req[2];
    MPI_Status st[2];
    CALL(prof, P_IRECV, MPI_Irecv(recv, count, MPI_DOUBLE, from, tag, MPI_COMM_WORLD, &req[0]));
    if (lat->comm == COMM_SSEND) {
        CALL(prof, P_SSEND, MPI_Ssend(send, count, MPI_DOUBLE, to, tag, MPI_COMM_WORLD));
        CALL(prof, P_WAIT, MPI_Wait(&req[0], &st[0]));
    } else {
        CALL(prof, P_ISEND, MPI_Isend(send, count, MPI_DOUBLE, to, tag, MPI_COMM_WORLD,
                                      &req[1]));
        CALL(prof, P_WAITALL, MPI_Waitall(2, req, st));
    }
}

void gather(lattice *lat, const su3 *field, int per, int d, int s, su3 *recv)
{
    if (lat->grid[d] == 1)
        return; /* neighbours wrap around on this rank */
    int count = lat->face[d] * per * 18; /* 18 doubles per matrix */
    const int *list = lat->sendlist[d][s];
    for (int f = 0; f < lat->face[d]; f++)
        for (int k = 0; k < per; k++)
            lat->sendbuf[f * per + k] = field[(long)list[f] * per + k];
    double t0 = tb_now_s();
    exchange(lat, lat->sendbuf, recv, count, d, s, 1);
    log_gather((long)count * (long)sizeof(double), tb_now_s() - t0, d, s);
}

/* The least pause after each timed exchange (below). LAM 7.1 needed 5 us. */
#define EXCHANGE_PAUSE_MIN_S 10e-6
/* Exchanges timed to calibrate each size's samples (time_exchanges). */
#define CALIBRATION_EXCHANGES 64
/* A tag no message carries (the gathers use 0-7). */
#define NO_MESSAGE_TAG 99

/* `reps` exchanges of gather log g, each timed on its own and followed by an untimed pause
 * of pause_s; seconds per exchange, pauses left out; each exchange's seconds in each[r]
 * unless each is NULL.
 * Why the pause: in the run a gather follows arithmetic, never the previous gather's last
 * call. Back to back, a rank that returns first starts the next exchange while its partner
 * still finishes the last one, and what that overlap costs is the library's answer to a
 * pattern su3 does not have: LAM 7.1 took a slow path on it, about 3x its gathers' time,
 * and slowing its calls made it faster (docs/verification.md, '2026-11-26: su3's exchange,
 * from a pause to the kernel copy'). Every rank pauses for the same time: a pause as long as
 * the rank's own last exchange would hand each rank's wait for the other on to the next
 * exchange, and the ranks' skew would grow without bound (seen: exchanges of ms).
 * The pause ends in an MPI_Iprobe that matches nothing: the slowdown shim (apps/slowdown)
 * counts time outside MPI as computation and pads it at the next call, which is then this
 * untimed one rather than the next timed exchange. */
static double exchanges(lattice *lat, const gather_log *g, double *recv, int reps,
                        double pause_s, double *each)
{
    int count = (int)(g->bytes / (long)sizeof(double)), flag;
    MPI_Status st;
    double sum = 0.0;
    for (int r = 0; r < reps; r++) {
        double t0 = tb_now_s();
        exchange(lat, lat->sendbuf, recv, count, g->d, g->dir, 0);
        double t1 = tb_now_s();
        sum += t1 - t0;
        if (each)
            each[r] = t1 - t0;
        while (tb_now_s() - t1 < pause_s)
            ;
        MPI_Iprobe(MPI_ANY_SOURCE, NO_MESSAGE_TAG, MPI_COMM_WORLD, &flag, &st);
    }
    return sum / reps;
}

/* The payload a rank sends in sample j of the exchanges timed alone. */
static double payload(int rank, int j, long i) { return rank * 1e9 + j * 1e6 + (double)i; }

/* 1 if recv's m values are not what rank `from` sent in sample j, else 0. */
static int wrong_payload(const double *recv, int from, int j, long m)
{
    for (long i = 0; i < m; i++)
        if (recv[i] != payload(from, j, i))
            return 1;
    return 0;
}

int time_exchanges(lattice *lat, int samples, double *t, int *reps, double *pause, int *bad,
                   shm_pair *shm, double *shm_t, int *shm_bad, double *cma_t, int *cma_bad)
{
    int rank;
    long most = gather_most_bytes();
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    /* recv takes the timed messages, spare the untimed ones; sendbuf holds the largest
     * gather and is free now (the run's scratch) */
    long n = most / (long)sizeof(double);
    double *recv = malloc(2 * (size_t)most + 1), *spare = recv + n, *send = (double *)lat->sendbuf;
    int ok = recv != NULL, all_ok;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all_ok) {
        free(recv);
        return -1;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    /* Calibration, per size: CALIBRATION_EXCHANGES exchanges (after one untimed, as every
     * sample starts), the median of their times, the largest over the ranks. Exchanges per
     * sample: as many as make 1 ms at that median. The samples' pause: that median, at least
     * EXCHANGE_PAUSE_MIN_S, the same on every rank (see exchanges). A median, not the total
     * of a round: one stall in the calibration would otherwise set few exchanges per sample
     * and long pauses, and the size's exchange would read far slower than usual
     * (docs/verification.md, '2026-11-26: su3's exchange, from a pause to the kernel copy'). */
    double each[CALIBRATION_EXCHANGES];
    for (int k = 0; k < gather_sizes; k++) {
        double med, slowest;
        bad[k] = 0;
        shm_bad[k] = 0;
        cma_bad[k] = 0;
        exchanges(lat, &gather_logs[k], spare, 1, EXCHANGE_PAUSE_MIN_S, NULL);
        exchanges(lat, &gather_logs[k], recv, CALIBRATION_EXCHANGES, EXCHANGE_PAUSE_MIN_S, each);
        med = tb_median(each, CALIBRATION_EXCHANGES);
        MPI_Allreduce(&med, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        double want = slowest > 0 ? ceil(1e-3 / slowest) : 1.0;
        reps[k] = want < 1 ? 1 : want > (1 << 20) ? (1 << 20) : (int)want;
        pause[k] = slowest > EXCHANGE_PAUSE_MIN_S ? slowest : EXCHANGE_PAUSE_MIN_S;
    }
    /* Passes over the sizes, so that a burst of noise touches every size a little. Each
     * sample sends its own payload, written before and checked after the timing; its first
     * exchange is untimed (into spare): it absorbs the ranks' skew. */
    for (int j = 0; j < samples; j++)
        for (int k = 0; k < gather_sizes; k++) {
            const gather_log *g = &gather_logs[k];
            long m = g->bytes / (long)sizeof(double);
            tb_watchdog_beat();                 /* one per sample, before its timing */
            for (long i = 0; i < m; i++)
                send[i] = payload(rank, j, i);
            if (lat->corrupt_exchange && rank == 0 && j == samples / 2)
                send[m / 2] = -1.0;
            exchanges(lat, g, spare, 1, pause[k], NULL);
            t[k * samples + j] = exchanges(lat, g, recv, reps[k], pause[k], NULL);
            int from = lat->nbr[g->d][g->dir];
            bad[k] += wrong_payload(recv, from, j, m);
            if (!shm)
                continue;
            /* the same bytes through shared memory, at once: the machine in the same state */
            shm_pair_exchanges(shm, send, spare, g->bytes, 1, pause[k]);
            shm_t[k * samples + j] = shm_pair_exchanges(shm, send, recv, g->bytes, reps[k],
                                                        pause[k]);
            shm_bad[k] += wrong_payload(recv, from, j, m);
            /* and through the kernel, as the libraries move these messages */
            shm_pair_kernel_exchanges(shm, send, spare, g->bytes, 1, pause[k]);
            cma_t[k * samples + j] = shm_pair_kernel_exchanges(shm, send, recv, g->bytes,
                                                               reps[k], pause[k]);
            cma_bad[k] += wrong_payload(recv, from, j, m);
        }
    free(recv);
    return 0;
}
