/* p2p: the clock of every control plane (ctl_mpi.c, ctl_pvm.c). CLOCK_MONOTONIC, not the
 * library's timer (MPI_Wtime), so that transports of different libraries are timed alike. */
#include <time.h>

#include "control.h"

double ctl_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double ctl_clock_resolution(void)
{
    struct timespec ts;
    clock_getres(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
