/* Domain decomposition, neighbour gathers and MPI call profiling. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include "lattice.h"

const char *prof_name[P_NCALLS] = {
    "MPI_Comm_rank", "MPI_Comm_size", "MPI_Barrier", "MPI_Irecv", "MPI_Isend",
    "MPI_Ssend", "MPI_Wait", "MPI_Waitall", "MPI_Allreduce", "MPI_Reduce" };
double prof_sec[P_NCALLS];
long prof_count[P_NCALLS];
gather_log gather_logs[GATHER_SIZES];
int gather_sizes, gather_log_full;

static void log_gather(long bytes, double s)
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
        *g = (gather_log){ .bytes = bytes };
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

void gather(lattice *lat, const su3 *field, int per, int d, int s, su3 *recv)
{
    if (lat->grid[d] == 1)
        return; /* neighbours wrap around on this rank */
    int n = lat->face[d] * per, from = lat->nbr[d][s], to = lat->nbr[d][1 - s];
    int count = n * 18, tag = 2 * d + s; /* 18 doubles per matrix */
    const int *list = lat->sendlist[d][s];
    for (int f = 0; f < lat->face[d]; f++)
        for (int k = 0; k < per; k++)
            lat->sendbuf[f * per + k] = field[(long)list[f] * per + k];
    MPI_Request req[2];
    MPI_Status st[2];
    double t0 = tb_now_s();
    PROF(P_IRECV, MPI_Irecv(recv, count, MPI_DOUBLE, from, tag, MPI_COMM_WORLD, &req[0]));
    if (lat->comm == COMM_SSEND) {
        /* the 2002 MILC build: synchronous send against a pre-posted Irecv */
        PROF(P_SSEND, MPI_Ssend(lat->sendbuf, count, MPI_DOUBLE, to, tag, MPI_COMM_WORLD));
        PROF(P_WAIT, MPI_Wait(&req[0], &st[0]));
    } else {
        PROF(P_ISEND, MPI_Isend(lat->sendbuf, count, MPI_DOUBLE, to, tag,
                                MPI_COMM_WORLD, &req[1]));
        PROF(P_WAITALL, MPI_Waitall(2, req, st));
    }
    log_gather((long)count * (long)sizeof(double), tb_now_s() - t0);
}
