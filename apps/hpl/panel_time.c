/* xhpl: the time inside MPI of every panel this rank receives, over memcpy of the same bytes.
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
 * MPI_Recv passes through untimed. After HPL, panel_time_report() times memcpy of each
 * received size on this rank (warm, the lower quartile of 9 copies) and rank 0 prints
 *   HPL-PANELS {"messages":n,"bytes_min":..,"bytes_max":..,"recv_over_memcpy_lq":..,
 *               "recv_over_memcpy_median":..,"recv_mb_s_median":..,
 *               "memcpy_mb_s_median":..,"kept_all":true|false}
 * over every panel of every rank (n = 0 on one rank: no broadcast); the two rates, in
 * MB/s = 10^6 bytes per second, say which side of the ratio moved. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <mpi.h>
#include "../common/tb_clock.h"
#include "../common/tb_median.h"
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

/* Warm memcpy of `bytes` (buffers touched by the first copy), the lower quartile of 9. */
static double memcpy_s(char *dst, const char *src, long bytes)
{
    enum { COPIES = 9 };
    double t[COPIES];
    memcpy(dst, src, (size_t)bytes);
    for (int k = 0; k < COPIES; k++) {
        double t0 = tb_now_s();
        memcpy(dst, src, (size_t)bytes);
        t[k] = tb_now_s() - t0;
        __asm__ __volatile__("" : : "r"(dst) : "memory"); /* the copy is not dead code */
    }
    tb_median(t, COPIES);                                  /* sorts t */
    return t[COPIES / 4];
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
    /* per panel: [0] recv over memcpy, [1] recv MB/s, [2] memcpy MB/s */
    double *fig = malloc(sizeof(double) * 3 * (n_panels > 0 ? n_panels : 1));
    int ok = src && dst && fig;
    if (ok) {
        memset(src, 0x5a, (size_t)most);
        for (int i = 0; i < n_panels; i++) {
            double copy = memcpy_s(dst, src, panels[i].bytes);
            fig[3 * i] = panels[i].s / copy;
            fig[3 * i + 1] = 1e-6 * (double)panels[i].bytes / panels[i].s;
            fig[3 * i + 2] = 1e-6 * (double)panels[i].bytes / copy;
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
    int n = 3 * (int)mine[0];
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
        int panels_all = total / 3;
        printf("HPL-PANELS {\"messages\":%d", panels_all);
        if (panels_all > 0) {
            /* each column of the table, sorted in turn */
            double *col = malloc(sizeof(double) * panels_all), med[3], lq = 0;
            for (int c = 0; c < 3 && col; c++) {
                for (int i = 0; i < panels_all; i++)
                    col[i] = every[3 * i + c];
                med[c] = tb_median(col, panels_all);      /* sorts col */
                if (c == 0)
                    lq = col[panels_all / 4];
            }
            if (col)
                printf(",\"bytes_min\":%ld,\"bytes_max\":%ld,\"recv_over_memcpy_lq\":%.4g,"
                       "\"recv_over_memcpy_median\":%.4g,\"recv_mb_s_median\":%.5g,"
                       "\"memcpy_mb_s_median\":%.5g", -all[2], all[3], lq, med[0], med[1],
                       med[2]);
            free(col);
        }
        printf(",\"kept_all\":%s}\n", all[1] ? "false" : "true");
        fflush(stdout);
    }
    free(every);
    free(offsets);
    free(counts);
    free(fig);
    free(dst);
    free(src);
}
