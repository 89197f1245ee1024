/*
 * knobs: what value of chosen control variables is in force in every rank.
 *
 * A stack's knobs travel to the ranks as environment variables its library reads
 * (site/stacks.toml); this program asks the library itself, through the MPI tool
 * interface (MPI_T, MPI 3.0), which value each rank runs with, so a test can
 * tell a knob that reached the ranks from one a launcher dropped on the way.
 *
 *   knobs NAME...      NAME: an MPI_T control variable (MPICH: MPIR_CVAR_...,
 *                      Open MPI: the MCA parameter, e.g. btl_tcp_eager_limit)
 * Rank 0 prints one line per rank and name:
 *   KNOB {"rank":r,"name":"...","found":true|false,"value":"..."}
 * A library without MPI_T (MPI-1, LAM 7.1) prints KNOB-UNSUPPORTED and exits 0.
 */
#include <mpi.h>
#include "../common/tb_finalize.h"
#include "../common/tb_watchdog.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VALUE_LEN 128

#if MPI_VERSION >= 3
/* The value of control variable `name` as text; 0 when the library has none. */
static int read_cvar(const char *name, char *out)
{
    int n = 0;
    if (MPI_T_cvar_get_num(&n) != MPI_SUCCESS)
        return 0;
    for (int i = 0; i < n; i++) {
        char cname[256], desc[8];
        int clen = sizeof cname, dlen = sizeof desc, verb, bind, scope, count;
        MPI_Datatype dt;
        MPI_T_enum en;
        if (MPI_T_cvar_get_info(i, cname, &clen, &verb, &dt, &en, desc, &dlen, &bind,
                                &scope) != MPI_SUCCESS || strcmp(cname, name))
            continue;
        MPI_T_cvar_handle h;
        if (MPI_T_cvar_handle_alloc(i, NULL, &h, &count) != MPI_SUCCESS)
            return 0;
        /* count elements of dt: room for the largest scalar type, or count chars */
        size_t room = (size_t)(count > 0 ? count : 1) * sizeof(unsigned long long) + 1;
        char *buf = calloc(1, room);
        int ok = buf && (count <= 1 || dt == MPI_CHAR) &&
                 MPI_T_cvar_read(h, buf) == MPI_SUCCESS;
        MPI_T_cvar_handle_free(&h);
        if (!ok)
            snprintf(out, VALUE_LEN, "(unreadable)");
        else if (dt == MPI_INT)
            snprintf(out, VALUE_LEN, "%d", *(int *)buf);
        else if (dt == MPI_UNSIGNED)
            snprintf(out, VALUE_LEN, "%u", *(unsigned *)buf);
        else if (dt == MPI_UNSIGNED_LONG)
            snprintf(out, VALUE_LEN, "%lu", *(unsigned long *)buf);
        else if (dt == MPI_UNSIGNED_LONG_LONG || dt == MPI_COUNT)
            snprintf(out, VALUE_LEN, "%llu", *(unsigned long long *)buf);
        else if (dt == MPI_DOUBLE)
            snprintf(out, VALUE_LEN, "%g", *(double *)buf);
        else if (dt == MPI_CHAR)
            snprintf(out, VALUE_LEN, "%.*s", VALUE_LEN - 1, buf);
        else
            snprintf(out, VALUE_LEN, "(type not shown)");
        free(buf);
        return 1;
    }
    return 0;
}
#endif

int main(int argc, char **argv)
{
    int rank, size;
    char err[160];
    if (tb_watchdog_start("knobs", -1, err, sizeof err)) {
        fprintf(stderr, "knobs: %s\n", err);
        return 2;
    }
    tb_watchdog_at("MPI_Init", "", NULL, -1);
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    tb_watchdog_rank(rank);
    tb_watchdog_at("control variables", "", NULL, -1);
#if MPI_VERSION >= 3
    int provided;
    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    int names = argc - 1;
    /* per name: found flag then the value text */
    size_t per = 1 + VALUE_LEN, len = per * (size_t)(names > 0 ? names : 1);
    char *mine = calloc(1, len), *all = rank == 0 ? calloc((size_t)size, len) : NULL;
    for (int k = 0; k < names; k++)
        mine[per * k] = (char)read_cvar(argv[k + 1], mine + per * k + 1);
    MPI_Gather(mine, (int)len, MPI_CHAR, all, (int)len, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (rank == 0)
        for (int r = 0; r < size; r++)
            for (int k = 0; k < names; k++) {
                const char *e = all + len * r + per * k;
                printf("KNOB {\"rank\":%d,\"name\":\"%s\",\"found\":%s,\"value\":\"%s\"}\n", r,
                       argv[k + 1], e[0] ? "true" : "false", e[0] ? e + 1 : "");
            }
    free(mine);
    free(all);
    MPI_T_finalize();
#else
    (void)size;
    if (rank == 0)
        printf("KNOB-UNSUPPORTED {\"reason\":\"MPI-%d.%d library: no MPI_T\"}\n", MPI_VERSION,
               MPI_SUBVERSION);
#endif
    fflush(stdout);
    tb_watchdog_stop();
    tb_finalize_bounded();     /* see ../common/tb_finalize.h */
    return 0;
}
