/* MPI_Finalize with a time limit, for programs whose every record is printed
 * before it.
 *
 * Why: Debian's MPICH 4.0.2 over UCX's TCP transport (the emulated cluster's
 * path between nodes) sometimes never returns from MPI_Finalize: one rank
 * closes its endpoint and waits in the PMI barrier while the other waits for
 * that endpoint's flush, which needs the first rank's progress (UCX's TCP
 * transport stops progress too early at cleanup, openucx/ucx#8738; the runs:
 * docs/cluster.md, 'MPI_Finalize that never returns').
 * Without a limit the job waits for ReFrame's time limit. With one, each rank
 * says so on stderr and leaves with TB_FINALIZE_HUNG, and the test reports a
 * library that hangs at exit, apart from the figures it measured before. */
#ifndef TB_FINALIZE_H
#define TB_FINALIZE_H
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TB_FINALIZE_HUNG 75    /* exit status: MPI_Finalize did not return in time */
#define TB_FINALIZE_LIMIT_S 10 /* a healthy finalize takes milliseconds, and a hung one
                                  costs the whole limit in every run it hits (why not 30 s:
                                  docs/cluster.md, 'MPI_Finalize that never returns'); the
                                  environment's TESTBED_FINALIZE_LIMIT_S (1 to 3600)
                                  overrides it: tests */

static void tb_finalize_hung(int sig)
{
    static const char msg[] = "FINALIZE-HUNG: MPI_Finalize did not return within the limit; "
                              "every record above was complete\n";
    (void)sig;
    (void)!write(2, msg, sizeof msg - 1); /* async-signal-safe */
    _exit(TB_FINALIZE_HUNG);
}

static inline int tb_finalize_bounded(void)
{
    const char *env = getenv("TESTBED_FINALIZE_LIMIT_S");
    int limit = env ? atoi(env) : TB_FINALIZE_LIMIT_S;
    fflush(NULL);   /* the records: a hung finalize leaves by _exit, which drops buffers */
    signal(SIGALRM, tb_finalize_hung);
    alarm(limit >= 1 && limit <= 3600 ? (unsigned)limit : TB_FINALIZE_LIMIT_S);
    int rc = MPI_Finalize();
    alarm(0);
    return rc;
}
#endif
