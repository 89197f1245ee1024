/*
 * dgemm_rate: the single-core DGEMM rate of the BLAS that xhpl links, measured
 * in the same job as HPL, so that HPL's Gflop/s can be reported as a ratio to
 * it (an efficiency that travels between machines, unlike Gflop/s).
 *
 *   dgemm_rate [--n N] [--reps R]     (defaults 1500 and 5)
 *
 * Pins itself to the first CPU it may use, runs one untimed C = A B + C of
 * order N (first touch, OpenBLAS's set-up), then R timed ones, and prints
 *   DGEMM-RATE {"n":N,"reps":R,"cpu":C,"best_s":..,"gflops":..}
 * with gflops = 2 N^3 / best_s / 1e9 (the best repetition: the least disturbed).
 * Not an MPI program. Build: build.sh links it with xhpl's OpenBLAS.
 */
#define _GNU_SOURCE /* sched_setaffinity, sched_getcpu */
#include <cblas.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static long arg(const char *opt, const char *v, long lo, long hi)
{
    char *end;
    long x = v ? strtol(v, &end, 10) : 0;
    if (!v || end == v || *end || x < lo || x > hi) {
        fprintf(stderr, "dgemm_rate: %s needs an integer in %ld..%ld\n", opt, lo, hi);
        exit(2);
    }
    return x;
}

int main(int argc, char **argv)
{
    long n = 1500, reps = 5;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--n"))
            n = arg("--n", argv[++i < argc ? i : 0], 16, 20000);
        else if (!strcmp(argv[i], "--reps"))
            reps = arg("--reps", argv[++i < argc ? i : 0], 1, 1000);
        else {
            fprintf(stderr, "dgemm_rate: unknown option '%s' (--n N, --reps R)\n", argv[i]);
            return 2;
        }
    }
    cpu_set_t allowed, one;
    if (sched_getaffinity(0, sizeof allowed, &allowed) == 0) {
        for (int c = 0; c < CPU_SETSIZE; c++)
            if (CPU_ISSET(c, &allowed)) {
                CPU_ZERO(&one);
                CPU_SET(c, &one);
                sched_setaffinity(0, sizeof one, &one);
                break;
            }
    }
    double *a = malloc(sizeof(double) * n * n), *b = malloc(sizeof(double) * n * n),
           *c = malloc(sizeof(double) * n * n);
    if (!a || !b || !c) {
        fprintf(stderr, "dgemm_rate: out of memory for three %ldx%ld matrices\n", n, n);
        return 1;
    }
    for (long i = 0; i < n * n; i++) { /* any values away from 0/denormals */
        a[i] = 1.0 + (double)(i % 7) / 7.0;
        b[i] = 1.0 - (double)(i % 5) / 11.0;
        c[i] = 0.0;
    }
    double best = 0.0;
    for (long r = 0; r <= reps; r++) { /* r = 0: untimed warm-up */
        double t0 = now();
        cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)n, (int)n, 1.0,
                    a, (int)n, b, (int)n, 1.0, c, (int)n);
        double t = now() - t0;
        if (r > 0 && (best == 0.0 || t < best))
            best = t;
    }
    printf("DGEMM-RATE {\"n\":%ld,\"reps\":%ld,\"cpu\":%d,\"best_s\":%.6f,\"gflops\":%.4f,"
           "\"check\":%.6g}\n", n, reps, sched_getcpu(), best, 2.0 * n * n * n / best * 1e-9,
           c[n * n - 1]);
    free(a), free(b), free(c);
    return 0;
}
