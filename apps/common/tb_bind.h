/* Ranks pinning themselves where the launcher cannot bind (LAM's mpirun), and
 * every rank's CPU for the programs' records. */
#ifndef TB_BIND_H
#define TB_BIND_H
#include <stddef.h>
#ifndef TB_PVM          /* PVM programs (p2p-pvm) have no MPI: no gather */
#include <mpi.h>
#endif

/* Pin the calling process to the (rank mod n)-th CPU of its allowed set (n
 * CPUs), as a launcher's "bind to core" would. Returns that CPU, or -1. Call it
 * right after MPI_Init, before any work. */
int tb_bind_self(int rank);

/* The CPU this process runs on now (sched_getcpu), -1 where unknown. */
int tb_cpu(void);

/* How many CPUs this process may run on (its affinity mask), -1 where unknown:
 * 1 for a rank bound to a core, so that a record shows a rank left unbound even
 * when it happened not to move. */
int tb_allowed_cpus(void);

/* Every rank's `value` as a JSON array ("[0,1]") at rank 0 of `comm`; other
 * ranks get "". Collective: every rank must call it. */
#ifndef TB_PVM
void tb_gather_json(int value, MPI_Comm comm, char *out, size_t len);
#endif

#endif
