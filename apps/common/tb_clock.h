/* The clock of every program in apps/: CLOCK_MONOTONIC, read with clock_gettime.
 *
 * Why not the library's timer: MPI_Wtime differs between libraries (LAM's counts whole
 * microseconds), and PVM, the BLAS baseline and the slowdown shim have none; one clock
 * times every transport and baseline alike. A file that includes this header defines
 * _GNU_SOURCE or _POSIX_C_SOURCE >= 199309L before its first #include (clock_gettime). */
#ifndef TB_CLOCK_H
#define TB_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Seconds since an arbitrary fixed point, with the clock's ns resolution. */
static inline double tb_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The same clock in whole nanoseconds, for sums that must not round (slowdown.c). */
static inline int64_t tb_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The clock's resolution in seconds, for the run record. */
static inline double tb_clock_res_s(void)
{
    struct timespec ts;
    clock_getres(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#endif
