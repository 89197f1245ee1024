/*
 * dgemm_rate: the DGEMM capacity of the cores an HPL run uses, measured with the BLAS that
 * xhpl links, in the same job just before and just after HPL, so that HPL's Gflop/s can be
 * reported as a ratio to it: an efficiency that travels between machines where Gflop/s does
 * not, and that holds when another tenant takes part of a core for a while (the baseline
 * loses the same share as HPL does).
 *
 *   dgemm_rate [--n N] [--reps R] [--cpus K]      (defaults 1500, 5, 1)
 *
 * K processes, the i-th pinned to the i-th CPU this process may use, each run one untimed
 * C = A B + C of order N (first touch, OpenBLAS's set-up), then R timed ones; every
 * repetition starts on all K at once (a barrier in shared memory), so the K DGEMMs share the
 * machine as HPL's K ranks do. Prints one record:
 *   DGEMM-RATE {"n":N,"reps":R,"cpus":[..],"cpu_gflops":[..],"capacity_gflops":..,
 *               "best_gflops":..,"check":..,"blas_core":".."}
 * cpu_gflops: each CPU's median repetition (2 N^3 / s / 1e9). capacity_gflops: the median
 * over the repetitions of K x the slowest CPU's rate in that repetition, because HPL's ranks
 * wait for the slowest (a grid runs at the pace of its slowest core). best_gflops: the fastest
 * single repetition of CPU 0 (the baseline of earlier versions). blas_core: the kernel set
 * OpenBLAS chose (OPENBLAS_CORETYPE forces one), "unknown" from another BLAS. Not an MPI
 * program.
 * Build: build.sh links it with xhpl's OpenBLAS.
 */
#define _GNU_SOURCE /* sched_setaffinity, sched_getcpu */
#include <cblas.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../common/tb_clock.h"

/* OpenBLAS's own: declared weak, so that another BLAS still links (and says "unknown"). */
extern char *openblas_get_corename(void) __attribute__((weak));

#define MAX_CPUS 256
#define MAX_REPS 1000

struct shared {             /* one page, shared by the K processes */
    int arrived, generation;
    int cpu[MAX_CPUS];
    int failed;
    double check;
    double seconds[];       /* [process * reps + repetition] */
};

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

/* All K processes leave together; they sit on CPUs of their own, so a yielding spin is cheap. */
static void barrier(struct shared *sh, int k)
{
    int gen = __atomic_load_n(&sh->generation, __ATOMIC_ACQUIRE);
    if (__atomic_add_fetch(&sh->arrived, 1, __ATOMIC_ACQ_REL) == k) {
        __atomic_store_n(&sh->arrived, 0, __ATOMIC_RELAXED);
        __atomic_add_fetch(&sh->generation, 1, __ATOMIC_RELEASE);
    } else {
        while (__atomic_load_n(&sh->generation, __ATOMIC_ACQUIRE) == gen)
            sched_yield();
    }
}

/* Process `me`: pin to `cpu`, then warm-up plus `reps` timed DGEMMs, each after a barrier. */
static int worker(struct shared *sh, int me, int cpu, int k, long n, long reps)
{
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    if (sched_setaffinity(0, sizeof one, &one) != 0) {
        fprintf(stderr, "dgemm_rate: cannot pin process %d to CPU %d\n", me, cpu);
        sh->failed = 1;
    }
    sh->cpu[me] = sched_getcpu();
    double *a = malloc(sizeof(double) * n * n), *b = malloc(sizeof(double) * n * n),
           *c = malloc(sizeof(double) * n * n);
    if (!a || !b || !c) {
        fprintf(stderr, "dgemm_rate: out of memory for three %ldx%ld matrices\n", n, n);
        sh->failed = 1;     /* still takes part in every barrier, so no one waits forever */
    } else {
        for (long i = 0; i < n * n; i++) { /* any values away from 0/denormals */
            a[i] = 1.0 + (double)(i % 7) / 7.0;
            b[i] = 1.0 - (double)(i % 5) / 11.0;
            c[i] = 0.0;
        }
    }
    for (long r = 0; r <= reps; r++) { /* r = 0: untimed warm-up */
        barrier(sh, k);
        if (!a || !b || !c)
            continue;
        double t0 = tb_now_s();
        cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)n, (int)n, 1.0,
                    a, (int)n, b, (int)n, 1.0, c, (int)n);
        if (r > 0)
            sh->seconds[me * reps + r - 1] = tb_now_s() - t0;
    }
    if (c && me == 0)
        sh->check = c[n * n - 1];
    free(a), free(b), free(c);
    return 0;
}

static int by_value(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static double median(double *v, long m)
{
    qsort(v, m, sizeof *v, by_value);
    return m % 2 ? v[m / 2] : 0.5 * (v[m / 2 - 1] + v[m / 2]);
}

int main(int argc, char **argv)
{
    long n = 1500, reps = 5, k = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--n"))
            n = arg("--n", argv[++i < argc ? i : 0], 16, 20000);
        else if (!strcmp(argv[i], "--reps"))
            reps = arg("--reps", argv[++i < argc ? i : 0], 1, MAX_REPS);
        else if (!strcmp(argv[i], "--cpus"))
            k = arg("--cpus", argv[++i < argc ? i : 0], 1, MAX_CPUS);
        else {
            fprintf(stderr, "dgemm_rate: unknown option '%s' (--n N, --reps R, --cpus K)\n",
                    argv[i]);
            return 2;
        }
    }
    cpu_set_t allowed;
    int cpus[MAX_CPUS], found = 0;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) {
        perror("dgemm_rate: sched_getaffinity");
        return 1;
    }
    for (int c = 0; c < CPU_SETSIZE && found < k; c++)
        if (CPU_ISSET(c, &allowed))
            cpus[found++] = c;
    if (found < k) {
        fprintf(stderr, "dgemm_rate: --cpus %ld, but this process may use %d CPUs\n", k, found);
        return 2;
    }
    size_t bytes = sizeof(struct shared) + sizeof(double) * k * reps;
    struct shared *sh = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                             -1, 0);
    if (sh == MAP_FAILED) {
        perror("dgemm_rate: mmap");
        return 1;
    }
    memset(sh, 0, bytes);
    fflush(stdout);
    for (int i = 1; i < k; i++) {
        pid_t pid = fork();
        if (pid < 0) {
            perror("dgemm_rate: fork"); /* the others would wait at the barrier: stop all */
            kill(0, SIGTERM);
            return 1;
        }
        if (pid == 0)
            _exit(worker(sh, i, cpus[i], (int)k, n, reps));
    }
    worker(sh, 0, cpus[0], (int)k, n, reps);
    int status, bad = 0;
    while (wait(&status) > 0)
        bad |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
    if (bad || sh->failed) {
        fprintf(stderr, "dgemm_rate: a measuring process failed\n");
        return 1;
    }
    double flop = 2.0 * n * n * n, tmp[MAX_REPS], pace[MAX_REPS], best = 0.0;
    printf("DGEMM-RATE {\"n\":%ld,\"reps\":%ld,\"cpus\":[", n, reps);
    for (int i = 0; i < k; i++)
        printf("%s%d", i ? "," : "", sh->cpu[i]);
    printf("],\"cpu_gflops\":[");
    for (long r = 0; r < reps; r++) {
        double slowest = 0.0;
        for (int i = 0; i < k; i++)
            if (sh->seconds[i * reps + r] > slowest)
                slowest = sh->seconds[i * reps + r];
        pace[r] = k * flop / slowest * 1e-9;
        if (best == 0.0 || sh->seconds[r] < best)
            best = sh->seconds[r];
    }
    for (int i = 0; i < k; i++) {
        memcpy(tmp, sh->seconds + i * reps, sizeof(double) * reps);
        printf("%s%.4f", i ? "," : "", flop / median(tmp, reps) * 1e-9);
    }
    const char *core = openblas_get_corename ? openblas_get_corename() : NULL;
    printf("],\"capacity_gflops\":%.4f,\"best_gflops\":%.4f,\"check\":%.6g,"
           "\"blas_core\":\"%s\"}\n", median(pace, reps), flop / best * 1e-9, sh->check,
           core && !strpbrk(core, "\"\\") ? core : "unknown");
    return 0;
}
