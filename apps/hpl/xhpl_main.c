/*
 * main() for a stand-alone xhpl built from the HPL 2.0 copy inside HPCC.
 *
 * Why: HPCC turned HPL's driver into a function, HPL_main(), that its own
 * main() calls between MPI_Init and MPI_Finalize; the original main() is gone
 * (and HPCC's Make.ptest no longer links xhpl). This file gives it back, with
 * two things added: HPL_main reads HPL.dat from the working directory
 * (standalone.patch) and prints its usual report. The exit status is 0 after
 * any completed run, as with HPL: whether the residual checks passed is read
 * from the report (reframe/testbed/hpl_input.py parse_hpl_output).
 *
 * Added, because this driver is the project's own: one HPL-RUN record before
 * the report (the library's version, every rank's CPU) and one HPL-END after it
 * (every rank's CPU again), so the test can name the library and see that the
 * ranks sat on distinct CPUs and did not move; HPL-PANELS after the report,
 * the panels' time inside MPI over memcpy (panel_time.c; --no-panels leaves it
 * out); --bind-self, for launchers that cannot bind (LAM): rank r pins itself
 * to the r-th allowed CPU; a time limit on MPI_Finalize
 * (../common/tb_finalize.h), which MPICH 4.0 over UCX's TCP transport sometimes
 * never leaves between two nodes; and the hang watchdog (../common/tb_watchdog.h),
 * from before MPI_Init, with a beat per panel on every rank: HPL_pdpanel_init and
 * HPL_pdmatgen (which says the N) are wrapped (build.sh links with --wrap).
 */
#include <stdio.h>
#include <string.h>
#include "hpl.h"
#include "panel_time.h"
#include "tb_bind.h"
#include "tb_finalize.h"
#include "tb_version.h"
#include "tb_watchdog.h"

int HPL_main(int argc, char **argv, HPL_RuntimeData *rdata, int *failure);

/* Each N's matrix is generated before its run is timed (and again for its residual
 * check): the watchdog's mode and size, outside HPL's timing; kept for the panel replay. */
static char hpl_mode[48], hpl_size[32];
void __real_HPL_pdmatgen(const HPL_T_grid *, const int, const int, const int, double *,
                         const int, const int);
void __wrap_HPL_pdmatgen(const HPL_T_grid *grid, const int m, const int n, const int nb,
                         double *a, const int lda, const int iseed)
{
    snprintf(hpl_mode, sizeof hpl_mode, "grid %dx%d NB %d", grid->nprow, grid->npcol, nb);
    snprintf(hpl_size, sizeof hpl_size, "N=%d", m);
    tb_watchdog_at("HPL run", hpl_mode, hpl_size, -1);
    __real_HPL_pdmatgen(grid, m, n, nb, a, lda, iseed);
}

/* Every rank sets up each panel of the factorization here: a beat per panel. */
void __real_HPL_pdpanel_init(HPL_T_grid *, HPL_T_palg *, const int, const int, const int,
                             HPL_T_pmat *, const int, const int, const int, HPL_T_panel *);
void __wrap_HPL_pdpanel_init(HPL_T_grid *grid, HPL_T_palg *algo, const int m, const int n,
                             const int jb, HPL_T_pmat *a, const int ia, const int ja,
                             const int tag, HPL_T_panel *panel)
{
    tb_watchdog_beat();
    __real_HPL_pdpanel_init(grid, algo, m, n, jb, a, ia, ja, tag, panel);
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: mpiexec -n P*Q xhpl [--bind-self] [--no-panels]\n"
            "HPL 2.0 (from Debian's hpcc source): reads HPL.dat in the current\n"
            "directory and writes the report where HPL.dat's device line says\n"
            "(6 = stdout). Write HPL.dat with reframe/testbed/hpl_input.py.\n"
            "  --bind-self  pin rank r to the r-th CPU this process may use, for\n"
            "               launchers that cannot bind (LAM)\n"
            "  --no-panels  no HPL-PANELS: the panels are still timed during the run, as\n"
            "               always (so the run is the same), but not reported nor replayed\n"
            "               after it (a second run in the same job, whose panels are not read)\n"
            "Before the report rank 0 prints HPL-RUN {\"library_version\",\"ranks\",\n"
            "\"self_bound\",\"bind_cpus\",\"cpus_start\",\"cpus_allowed\"}, after it HPL-END\n"
            "{\"cpus_end\"} (CPUs per rank, from sched_getcpu; bind_cpus -1 when not\n"
            "self-bound; cpus_allowed: how many CPUs each rank may run on), and before\n"
            "HPL-END, HPL-PANELS (the panels' time inside MPI over memcpy, panel_time.c).\n");
}

int main(int argc, char **argv)
{
    /* Options are checked before MPI_Init so a bad one never starts MPI. */
    int bind_self = 0, panels = 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        }
        if (strcmp(argv[i], "--bind-self") == 0) {
            bind_self = 1;
            continue;
        }
        if (strcmp(argv[i], "--no-panels") == 0) {
            panels = 0;
            continue;
        }
        fprintf(stderr, "xhpl: unknown argument '%s' (see --help)\n", argv[i]);
        return 2;
    }

    HPL_RuntimeData best;
    int failure = 0;
    memset(&best, 0, sizeof best); /* HPL_main keeps the best Gflops in it */

    char err[160];
    if (tb_watchdog_start("xhpl", -1, err, sizeof err)) {
        fprintf(stderr, "xhpl: %s\n", err);
        return 2;
    }
    tb_watchdog_at("MPI_Init", "", NULL, -1);
    MPI_Init(&argc, &argv);
    int rank, size, bind_cpu = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    tb_watchdog_rank(rank);
    tb_watchdog_at("set-up", "", NULL, -1);
    if (bind_self && (bind_cpu = tb_bind_self(rank)) < 0) {
        fprintf(stderr, "xhpl: --bind-self: rank %d could not pin itself to a CPU\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    char cpus[4096], bind_cpus[4096], ncpus[4096], raw[256], ver[512];
    tb_gather_json(tb_cpu(), MPI_COMM_WORLD, cpus, sizeof cpus);
    tb_gather_json(bind_cpu, MPI_COMM_WORLD, bind_cpus, sizeof bind_cpus);
    tb_gather_json(tb_allowed_cpus(), MPI_COMM_WORLD, ncpus, sizeof ncpus);
    if (rank == 0) {
        tb_library_version(raw, sizeof raw);
        tb_json_escape(raw, ver, sizeof ver);
        printf("HPL-RUN {\"library_version\":\"%s\",\"ranks\":%d,\"self_bound\":%s,"
               "\"bind_cpus\":%s,\"cpus_start\":%s,\"cpus_allowed\":%s}\n", ver, size,
               bind_self ? "true" : "false", bind_cpus, cpus, ncpus);
        fflush(stdout);
    }
    HPL_main(argc, argv, &best, &failure);
    tb_watchdog_at("panel replay", hpl_mode, hpl_size, -1);
    if (panels)
        panel_time_report(MPI_COMM_WORLD);
    tb_gather_json(tb_cpu(), MPI_COMM_WORLD, cpus, sizeof cpus);
    if (rank == 0) {
        printf("HPL-END {\"cpus_end\":%s}\n", cpus);
        fflush(stdout);
    }
    tb_watchdog_stop();
    tb_finalize_bounded();     /* see ../common/tb_finalize.h */
    return 0;
}
