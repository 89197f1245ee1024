/* A hang watchdog for the programs of apps/: a rank that makes no progress for a bounded
 * time ends its launch with one record saying where it stopped, rather than leaving the job
 * to its test's time limit (a deadlocked library once cost a P2PMatrix case 616 s and named
 * nothing).
 *
 * The rank says what it is in now (tb_watchdog_at: phase, mode, size) and beats on progress
 * (tb_watchdog_beat: per sample, per trajectory, per panel; never inside a timed region).
 * A thread of its own, which makes no MPI or PVM call, wakes every second at most; when no
 * beat has come for the bound past the longest gap between beats it has seen so far (the
 * expected step: a sample, a trajectory), it takes the rank's stack (a signal to the rank's
 * thread, whose handler only records return addresses), names the outermost MPI or PVM call
 * on it, writes one line to stdout and to stderr with write(2):
 *   TB-HUNG {"program":"p2p","rank":1,"pid":..,"host":"..","call":"MPI_Recv",
 *            "call_from":"stack","phase":"handshake","mode":"mpi Send-Recv/complete",
 *            "size":"1 B","size_bytes":1,"stalled_s":30.2,"timeout_s":30,"expected_s":1.0,
 *            "beats":..,"stack":["pause","MPI_Recv","p2p+0x2b10",..]}
 * and leaves with TB_WATCHDOG_EXIT, so that the launcher tears the job down
 * ("call_from":"program" and the phase's own name where no MPI or PVM frame was found).
 *
 * The bound: TESTBED_HANG_TIMEOUT_S in seconds (default TB_WATCHDOG_DEFAULT_S; 0: no
 * watchdog). Call tb_watchdog_stop() before MPI_Finalize, which has a limit of its own
 * (tb_finalize.h). */
#ifndef TB_WATCHDOG_H
#define TB_WATCHDOG_H
#include <stddef.h>
#include <stdlib.h>

#define TB_WATCHDOG_EXIT 124        /* exit status of a rank the watchdog ended (as timeout(1)) */
#define TB_WATCHDOG_DEFAULT_S 30.0  /* the longest healthy step here is a few seconds */
#define TB_WATCHDOG_MAX_S 86400.0

/* Counts the rank's progress; only the rank's own thread writes it. */
extern unsigned long tb_watchdog_beats;

/* Reads TESTBED_HANG_TIMEOUT_S and, unless it is 0, starts the watchdog for `program`
 * (its records' name) on the calling thread, which must be the one that makes the MPI
 * calls. rank < 0: not known yet (before MPI_Init), taken from the launcher's environment
 * until tb_watchdog_rank says it. Returns 0, or 2 with one line in err (without the
 * program's name) for a bad value: the program stops as for a bad option. */
int tb_watchdog_start(const char *program, int rank, char *err, size_t errlen);

/* The rank, once MPI_Init has told it. */
void tb_watchdog_rank(int rank);

/* What the rank is in now, copied: phase (e.g. "sample"), mode (e.g. "mpi Send-Recv/
 * complete"), size as text (e.g. "N=7200"; NULL: size_bytes as "1024 B"), size_bytes (-1
 * where the size is not a message's). Counts as a beat. Outside timed regions only. */
void tb_watchdog_at(const char *phase, const char *mode, const char *size, long size_bytes);

/* One step of progress: a store, nothing else. */
static inline void tb_watchdog_beat(void)
{
    __atomic_store_n(&tb_watchdog_beats, tb_watchdog_beats + 1, __ATOMIC_RELAXED);
}

/* No record after this (before MPI_Finalize, or an exit of the program's own). */
void tb_watchdog_stop(void);

/* The rank the launcher gave this process, read before MPI_Init from the variables the
 * registry's launchers set (Hydra, PMIx, Open MPI, LAM, Slurm, MVAPICH2); -1 where none is
 * (a launcher, a daemon, a singleton). The slowdown shim uses it too. */
static inline int tb_launcher_rank(void)
{
    static const char *const vars[] = { "PMI_RANK", "PMIX_RANK", "OMPI_COMM_WORLD_RANK",
                                        "LAMRANK", "SLURM_PROCID", "MV2_COMM_WORLD_RANK" };
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v)
            return atoi(v);
    }
    return -1;
}

#endif
