/*
 * su3_rmd: a proxy for MILC's pure-gauge su3_rmd (seed 004, section 4.2).
 * Refreshed molecular dynamics (no accept/reject) for SU(3) with the Wilson
 * plaquette action, on a 4D lattice split over a power-of-two rank count.
 * MPI-1 calls only, so it builds on LAM 7.1. See README.md.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include "lattice.h"
#include "tb_bind.h"
#include "tb_finalize.h"
#include "tb_median.h"
#include "tb_raw.h"
#include "tb_version.h"
#include "tb_watchdog.h"

/* Thesis Table 6: lattice and trajectory count of the five experiments. */
static const int preset_tab[5][5] = {
    { 4, 4, 4, 8, 50 }, { 6, 6, 6, 12, 75 }, { 8, 8, 8, 16, 100 },
    { 12, 12, 12, 24, 150 }, { 16, 16, 16, 32, 200 } };
#define DEF_STEPS 20
#define DEF_EPSILON 0.02

typedef struct {
    int L[4], traj, steps, preset, comm, corrupt, corrupt_exchange, bind_self, alone;
    double beta, eps;
    unsigned long long seed;
    int set_traj; /* given explicitly: overrides the preset */
} options;

static int rank, nranks;
/* Where the physics' reductions go: every rank (MPI_COMM_WORLD), or with --alone each rank
 * by itself (MPI_COMM_SELF). */
static MPI_Comm work;

static const char *usage_text =
"usage: su3_rmd [options]\n"
"  --lattice NXxNYxNZxNT   global lattice (default 4x4x4x8)\n"
"  --nx N --ny N --nz N --nt N   single extents (2..1024 each)\n"
"  --preset 1..5           thesis Table 6 size: 4^3x8/50 traj, 6^3x12/75,\n"
"                          8^3x16/100, 12^3x24/150, 16^3x32/200; explicit\n"
"                          options override it\n"
"  --beta B                gauge coupling, > 0 (default 6.0)\n"
"  --trajectories N        1..1000000 (default 10; preset: Table 6)\n"
"  --steps N               leapfrog steps per trajectory, 1..100000 (default 20)\n"
"  --epsilon E             step size, 0 < E <= 1 (default 0.02)\n"
"  --seed S                random seed, 0..2^64-1 (default 1)\n"
"  --comm isend|ssend      neighbour exchange: Irecv+Isend+Waitall (default)\n"
"                          or Irecv+Ssend+Wait (the 2002 MILC build)\n"
"  --corrupt-link          test only: spoil one link after trajectory 1 so the\n"
"                          unitarity check must fail\n"
"  --corrupt-exchange      test only: rank 0 sends one wrong value in the exchanges\n"
"                          timed after the run, so their check must count it\n"
"  --bind-self             pin rank r to the r-th CPU this process may use, for\n"
"                          launchers that cannot bind (LAM)\n"
"  --alone                 every rank evolves the whole lattice by itself, all\n"
"                          at once, no messages; each trajectory starts on all\n"
"                          ranks together and its seconds are the slowest\n"
"                          rank's: the 1-rank time with every core busy\n"
"  --help                  this text\n"
"The number of ranks must be a power of two (any number with --alone).\n";

/* Parse-time failure: rank 0 says why, everyone leaves with status 2. */
static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void fail(const char *fmt, ...)
{
    if (rank == 0) {
        va_list ap;
        va_start(ap, fmt);
        fputs("su3_rmd: ", stderr);
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
        va_end(ap);
    }
    MPI_Finalize();
    exit(2);
}

static long parse_long(const char *opt, const char *v, long lo, long hi)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (end == v || *end || errno || x < lo || x > hi)
        fail("invalid value for %s: '%s' (expected an integer in %ld..%ld)", opt, v, lo, hi);
    return x;
}

/* A number in (0, hi]: every real parameter here must be positive. */
static double parse_positive(const char *opt, const char *v, double hi)
{
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (end == v || *end || errno || !(x > 0.0 && x <= hi))
        fail("invalid value for %s: '%s' (expected a number in (0, %g])", opt, v, hi);
    return x;
}

static void parse_args(int argc, char **argv, options *o)
{
    static const char *dims[4] = { "--nx", "--ny", "--nz", "--nt" };
    *o = (options){ .L = { 4, 4, 4, 8 }, .traj = 10, .steps = DEF_STEPS, .comm = COMM_ISEND,
                    .beta = 6.0, .eps = DEF_EPSILON, .seed = 1 };
    int setL[4] = { 0, 0, 0, 0 };
    for (int i = 1; i < argc; i++) {
        char *a = argv[i], *v = NULL, buf[64];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            if (rank == 0)
                fputs(usage_text, stdout);
            MPI_Finalize();
            exit(0);
        }
        if (!strcmp(a, "--corrupt-link")) {
            o->corrupt = 1;
            continue;
        }
        if (!strcmp(a, "--corrupt-exchange")) {
            o->corrupt_exchange = 1;
            continue;
        }
        if (!strcmp(a, "--bind-self")) {
            o->bind_self = 1;
            continue;
        }
        if (!strcmp(a, "--alone")) {
            o->alone = 1;
            continue;
        }
        char *eq = strchr(a, '=');
        if (eq && (size_t)(eq - a) < sizeof buf) { /* --opt=value */
            memcpy(buf, a, eq - a);
            buf[eq - a] = 0;
            a = buf;
            v = eq + 1;
        }
        int known = !strcmp(a, "--lattice") || !strcmp(a, "--beta")
            || !strcmp(a, "--trajectories") || !strcmp(a, "--steps")
            || !strcmp(a, "--epsilon") || !strcmp(a, "--seed") || !strcmp(a, "--comm")
            || !strcmp(a, "--preset");
        for (int d = 0; d < 4; d++)
            known |= !strcmp(a, dims[d]);
        if (!known)
            fail("unknown option '%s' (try --help)", argv[i]);
        if (!v) {
            if (i + 1 >= argc)
                fail("option %s needs a value", a);
            v = argv[++i];
        }
        if (!strcmp(a, "--lattice")) {
            int n[4], len = -1;
            if (sscanf(v, "%dx%dx%dx%d%n", &n[0], &n[1], &n[2], &n[3], &len) != 4
                || len != (int)strlen(v))
                fail("invalid value for --lattice: '%s' (expected NXxNYxNZxNT, "
                     "e.g. 4x4x4x8)", v);
            for (int d = 0; d < 4; d++) {
                if (n[d] < 2 || n[d] > 1024)
                    fail("invalid value for --lattice: '%s' (each extent must be "
                         "in 2..1024)", v);
                o->L[d] = n[d];
                setL[d] = 1;
            }
        } else if (!strcmp(a, "--beta"))
            o->beta = parse_positive(a, v, 1e6);
        else if (!strcmp(a, "--trajectories"))
            o->traj = parse_long(a, v, 1, 1000000), o->set_traj = 1;
        else if (!strcmp(a, "--steps"))
            o->steps = parse_long(a, v, 1, 100000);
        else if (!strcmp(a, "--epsilon"))
            o->eps = parse_positive(a, v, 1.0);
        else if (!strcmp(a, "--seed")) {
            char *end;
            errno = 0;
            o->seed = strtoull(v, &end, 10);
            if (end == v || *end || errno || v[0] == '-' || v[0] == '+')
                fail("invalid value for --seed: '%s' (expected an integer in "
                     "0..18446744073709551615)", v);
        } else if (!strcmp(a, "--comm")) {
            if (!strcmp(v, "isend"))
                o->comm = COMM_ISEND;
            else if (!strcmp(v, "ssend"))
                o->comm = COMM_SSEND;
            else
                fail("invalid value for --comm: '%s' (expected isend or ssend)", v);
        } else if (!strcmp(a, "--preset")) {
            char *end;
            long p = strtol(v, &end, 10);
            if (end == v || *end || p < 1 || p > 5)
                fail("unknown preset '%s' for --preset (expected 1..5)", v);
            o->preset = (int)p;
        } else {
            for (int d = 0; d < 4; d++)
                if (!strcmp(a, dims[d])) {
                    o->L[d] = parse_long(a, v, 2, 1024);
                    setL[d] = 1;
                }
        }
    }
    if (o->preset) {
        const int *p = preset_tab[o->preset - 1];
        for (int d = 0; d < 4; d++)
            if (!setL[d])
                o->L[d] = p[d];
        if (!o->set_traj)
            o->traj = p[4]; /* steps and epsilon: the defaults, see README */
    }
}

/* ---- random numbers: a pure function of (seed, global site, counter) ---- */
static uint64_t mix64(uint64_t z) /* splitmix64 finaliser */
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static double uniform(uint64_t seed, long site, uint64_t ctr)
{
    uint64_t h = mix64(seed * 0x9e3779b97f4a7c15ULL + (uint64_t)site);
    h = mix64(h + (ctr + 1) * 0xd1b54a32d192ed03ULL);
    return ((h >> 11) + 0.5) * 0x1.0p-53; /* in (0, 1), never 0 */
}

/* Momenta P = i sum_a p_a lambda_a / 2 with p_a ~ N(0,1), so the kinetic
 * energy -Tr P^2 = sum p_a^2 / 2. Each site draws 32 uniforms per refresh. */
static void refresh_momenta(const lattice *lat, su3 *P, uint64_t seed, int traj)
{
    const double r3 = 1.0 / sqrt(3.0), pi2 = 8.0 * atan(1.0);
    for (int i = 0; i < lat->vol; i++) {
        long g = lattice_global_index(lat, i);
        uint64_t ctr = (uint64_t)traj * 32;
        for (int mu = 0; mu < 4; mu++) {
            double p[8];
            for (int a = 0; a < 8; a += 2) { /* Box-Muller */
                double u1 = uniform(seed, g, ctr++), u2 = uniform(seed, g, ctr++);
                double r = sqrt(-2.0 * log(u1));
                p[a] = r * cos(pi2 * u2);
                p[a + 1] = r * sin(pi2 * u2);
            }
            double complex h01 = 0.5 * (p[0] - I * p[1]), h02 = 0.5 * (p[3] - I * p[4]),
                           h12 = 0.5 * (p[5] - I * p[6]);
            su3 *m = &P[4 * i + mu];
            m->e[0][0] = I * (0.5 * p[2] + 0.5 * r3 * p[7]);
            m->e[1][1] = I * (-0.5 * p[2] + 0.5 * r3 * p[7]);
            m->e[2][2] = I * (-r3 * p[7]);
            m->e[0][1] = I * h01, m->e[1][0] = I * conj(h01);
            m->e[0][2] = I * h02, m->e[2][0] = I * conj(h02);
            m->e[1][2] = I * h12, m->e[2][1] = I * conj(h12);
        }
    }
}

/* ---- gauge field ---- */
static su3 *U, *P, *V, *W, *recvU[4], *recvW;

/* Average over all plaquettes of Re Tr U_p (cold start = 3 exactly). */
#define FLOPS_PLAQ (6 * (2 * FLOPS_MATMUL + FLOPS_RETRACE_NA + 1))
static double plaquette(lattice *lat)
{
    double loc = 0.0, sum;
    for (int d = 0; d < 4; d++)
        gather(lat, U, 4, d, PLUS, recvU[d]);
    for (int i = 0; i < lat->vol; i++)
        for (int mu = 0; mu < 4; mu++)
            for (int nu = mu + 1; nu < 4; nu++) {
                const su3 *xpmu = nbr_site(lat, U, recvU[mu], 4, mu, PLUS, i);
                const su3 *xpnu = nbr_site(lat, U, recvU[nu], 4, nu, PLUS, i);
                su3 a, b;
                su3_mul_nn(&U[4 * i + mu], &xpmu[nu], &a);
                su3_mul_nn(&U[4 * i + nu], &xpnu[mu], &b);
                loc += su3_retrace_na(&a, &b);
            }
    PROF(P_ALLREDUCE, MPI_Allreduce(&loc, &sum, 1, MPI_DOUBLE, MPI_SUM, work));
    return sum / (6.0 * lat->L[0] * lat->L[1] * lat->L[2] * lat->L[3]);
}

/*
 * P -= dt * (beta/6) * TA(U_mu(x) V_mu(x)), V = sum of the 6 staples, so that
 * H = -sum Tr P^2 + S is conserved. Upper staple: U_nu(x+mu) U_mu(x+nu)^+
 * U_nu(x)^+. Lower staple W(x-nu) with W(y) = U_nu(y+mu)^+ U_mu(y)^+ U_nu(y),
 * built where its links live and gathered from -nu: no diagonal neighbour.
 */
#define FLOPS_FORCE (12 * (2 * FLOPS_MATMUL + FLOPS_MATADD) + 12 * 2 * FLOPS_MATMUL \
                     + 12 * FLOPS_MATADD + 4 * (FLOPS_MATMUL + FLOPS_TA_UPDATE))
static void force_update(lattice *lat, double dt, double beta)
{
    for (int d = 0; d < 4; d++)
        gather(lat, U, 4, d, PLUS, recvU[d]);
    for (int i = 0; i < 4 * lat->vol; i++)
        su3_zero(&V[i]);
    for (int i = 0; i < lat->vol; i++)
        for (int mu = 0; mu < 4; mu++)
            for (int nu = 0; nu < 4; nu++) {
                if (nu == mu)
                    continue;
                const su3 *xpmu = nbr_site(lat, U, recvU[mu], 4, mu, PLUS, i);
                const su3 *xpnu = nbr_site(lat, U, recvU[nu], 4, nu, PLUS, i);
                su3 t, s;
                su3_mul_na(&xpmu[nu], &xpnu[mu], &t);
                su3_mul_na(&t, &U[4 * i + nu], &s);
                su3_add(&V[4 * i + mu], &s);
            }
    for (int nu = 0; nu < 4; nu++) {
        for (int i = 0; i < lat->vol; i++)
            for (int mu = 0, k = 0; mu < 4; mu++) {
                if (mu == nu)
                    continue;
                const su3 *ypmu = nbr_site(lat, U, recvU[mu], 4, mu, PLUS, i);
                su3 t;
                su3_mul_nn(&U[4 * i + mu], &ypmu[nu], &t);
                su3_mul_an(&t, &U[4 * i + nu], &W[3 * i + k++]);
            }
        gather(lat, W, 3, nu, MINUS, recvW);
        for (int i = 0; i < lat->vol; i++) {
            const su3 *w = nbr_site(lat, W, recvW, 3, nu, MINUS, i);
            for (int mu = 0, k = 0; mu < 4; mu++)
                if (mu != nu)
                    su3_add(&V[4 * i + mu], &w[k++]);
        }
    }
    double c = dt * beta / 6.0;
    for (int i = 0; i < 4 * lat->vol; i++) {
        su3 m;
        su3_mul_nn(&U[i], &V[i], &m);
        su3_sub_ta(&P[i], c, &m);
    }
}

/* U <- exp(eps P) U, then back onto SU(3). */
#define FLOPS_LINK (4 * (FLOPS_MATSCALE + FLOPS_EXP + FLOPS_MATMUL + FLOPS_REUNIT))
static void link_update(const lattice *lat, double eps)
{
    for (int i = 0; i < 4 * lat->vol; i++) {
        su3 a, r, u = U[i];
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 3; k++)
                a.e[j][k] = eps * P[i].e[j][k];
        su3_exp(&a, &r);
        su3_mul_nn(&r, &u, &U[i]);
        su3_reunit(&U[i]);
    }
}

static double max_unitarity_dev(const lattice *lat)
{
    double loc = 0.0, glob;
    for (int i = 0; i < 4 * lat->vol; i++) {
        double d = su3_unitarity_dev(&U[i]);
        if (d > loc)
            loc = d;
    }
    PROF(P_ALLREDUCE, MPI_Allreduce(&loc, &glob, 1, MPI_DOUBLE, MPI_MAX, work));
    return glob;
}

/* Kinetic energy -Tr P^2 of this rank's links: P is anti-hermitian, so it is
 * the sum of |P_jk|^2 (= sum p_a^2 / 2 for the Gell-Mann components). */
static double kinetic(const lattice *lat)
{
    double k = 0.0;
    for (int i = 0; i < 4 * lat->vol; i++)
        for (int j = 0; j < 3; j++)
            for (int l = 0; l < 3; l++) {
                double complex z = P[i].e[j][l];
                k += creal(z) * creal(z) + cimag(z) * cimag(z);
            }
    return k;
}

static double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + 1e-6 * ru.ru_utime.tv_usec
         + ru.ru_stime.tv_sec + 1e-6 * ru.ru_stime.tv_usec;
}

/* JSON number that keeps a decimal point (3.0, not 3) and full precision. */
static const char *num(double x, char *buf)
{
    sprintf(buf, "%.17g", x);
    if (!strpbrk(buf, ".eEn"))
        strcat(buf, ".0");
    return buf;
}

/* The same bytes copied by memcpy on this rank, warm (two buffers reused, as the gathers
 * reuse theirs), seconds per copy: after COPY_METHOD.warm_s of untimed copies, samples of 16
 * copies taken in turn on COPY_PAIRS pairs of buffers for COPY_METHOD.sample_s (at least
 * samples_min per pair, at most samples_max); the lower quartile of each pair's, the fastest
 * pair's (tb_raw_memcpy_s). The baseline of the test's gather_over_memcpy and
 * exchange_over_memcpy: what moving the bytes costs this core with no library in the way.
 * -1 if no buffers could be had.
 * Why the warm-up, the pairs and the 20 ms: a core copying without pause is faster for its
 * first few ms than for as long as it goes on, now and then one pair of buffers copies slower
 * than another for as long as it is timed, and a burst can slow all of a rank's copies for a
 * ms or two, so the baseline is taken in the lasting state, on the fastest of three pairs,
 * over longer than a burst (docs/verification.md, '2026-11-26: su3's exchange, from a pause to
 * the kernel copy'). */
#define COPY_PAIRS 3
static const struct tb_copy_method COPY_METHOD = {
    .warm_s = 20e-3, .per_sample = 16, .sample_s = 20e-3, .samples_min = 101,
    .samples_max = 4096, .read_back = 1
};

static double memcpy_seconds(long bytes)
{
    char *buf[2 * COPY_PAIRS];
    double *t = malloc(sizeof(double) * COPY_PAIRS * COPY_METHOD.samples_max), best = -1.0;
    int pairs = 0;
    /* every pair is allocated before any is freed: each gets memory of its own */
    for (int p = 0; p < COPY_PAIRS; p++) {
        buf[2 * pairs] = malloc((size_t)bytes);
        buf[2 * pairs + 1] = malloc((size_t)bytes);
        if (buf[2 * pairs] && buf[2 * pairs + 1]) {
            memset(buf[2 * pairs], 1, (size_t)bytes);
            memset(buf[2 * pairs + 1], 2, (size_t)bytes);
            pairs++;
        } else {
            free(buf[2 * pairs]);
            free(buf[2 * pairs + 1]);
        }
    }
    if (t && pairs)
        best = tb_raw_memcpy_s(buf, pairs, bytes, &COPY_METHOD, t);
    for (int p = 0; p < 2 * pairs; p++)
        free(buf[p]);
    free(t);
    return best;
}

/* One SU3-GATHER record per message size on rank 0: the gathers' count, the lower quartile
 * and median of their seconds inside MPI, the same of the size's exchange timed alone
 * (time_exchanges in lattice.c: the gather's calls in step, no wait for a partner still
 * computing) with the samples whose message arrived wrong, its least sample through shared
 * memory and through the kernel (two ranks on one host: shm_exchange.h) and the memcpy
 * baseline, each the largest over the ranks (the slowest rank sets the pace). Collective; nothing where no
 * gather crossed ranks (one rank, --alone). Outside every timing. */
static void report_gathers(lattice *lat)
{
    /* One reduction for the checks: MAX of -sizes is -(fewest sizes). */
    int mine_k[3] = { -gather_sizes, gather_sizes, gather_log_full }, most_k[3];
    MPI_Allreduce(mine_k, most_k, 3, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (-most_k[0] != most_k[1] || most_k[2]) {
        if (rank == 0)
            fprintf(stderr, "su3_rmd: gather times not reported: %s\n", most_k[2]
                    ? "a rank could not keep them all" : "ranks saw different message sizes");
        return;
    }
    enum { SAMPLES = 51 };
    /* the MPI exchange's samples, then through shared memory, then through the kernel */
    double *ex = malloc(sizeof(double) * SAMPLES * GATHER_SIZES * 3),
           *shm_t = ex ? ex + SAMPLES * GATHER_SIZES : NULL,
           *cma_t = ex ? ex + 2 * SAMPLES * GATHER_SIZES : NULL;
    int reps[GATHER_SIZES], bad[GATHER_SIZES], shm_bad[GATHER_SIZES], cma_bad[GATHER_SIZES],
        have_ex = ex != NULL, all_ex;
    double pause[GATHER_SIZES];
    MPI_Allreduce(&have_ex, &all_ex, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    /* two ranks on one host: the exchange through shared memory and through the kernel too
     * (exchange_over_shm, exchange_over_cma) */
    shm_pair *shm = all_ex ? shm_pair_open(gather_most_bytes()) : NULL;
    int have_shm = shm != NULL;
    if (all_ex && time_exchanges(lat, SAMPLES, ex, reps, pause, bad, shm, shm_t, shm_bad, cma_t,
                                 cma_bad) != 0)
        all_ex = 0;
    int kernel_errno = shm_pair_kernel_errno(shm);
    if (kernel_errno)
        fprintf(stderr, "su3_rmd: rank %d: the exchange through the kernel not reported: "
                "process_vm_readv: %s\n", rank, strerror(kernel_errno));
    shm_pair_close(shm);
    if (!all_ex && rank == 0)
        fprintf(stderr, "su3_rmd: exchanges not timed: no memory\n");
    MPI_Barrier(MPI_COMM_WORLD); /* every rank copies at once, as every rank gathered */
    for (int k = 0; k < gather_sizes; k++) {
        gather_log *g = &gather_logs[k];
        double lq = tb_lower_quartile(g->s, g->n), med = tb_median(g->s, g->n),
               copy_s = memcpy_seconds(g->bytes), bytes = (double)g->bytes, xlq = -1.0,
               xmed = -1.0, xmin = -1.0, smin = -1.0, cmin = -1.0;
        if (all_ex) {
            xlq = tb_lower_quartile(ex + k * SAMPLES, SAMPLES); /* sorts them */
            xmed = tb_median(ex + k * SAMPLES, SAMPLES);
            xmin = ex[k * SAMPLES];
        }
        if (all_ex && have_shm) {
            tb_median(shm_t + k * SAMPLES, SAMPLES);         /* sorts them */
            smin = shm_t[k * SAMPLES];
            tb_median(cma_t + k * SAMPLES, SAMPLES);
            cmin = kernel_errno ? -1.0 : cma_t[k * SAMPLES];
        }
        /* One reduction: the largest of each, and (negated) the smallest memcpy time (-1 on
         * a rank without the buffers: no baseline), the smallest message size and the
         * smallest kernel time (-1 on a rank where process_vm_readv failed). */
        double mine[15] = { lq, med, copy_s, bytes, -copy_s, -bytes, xlq, xmed,
                            all_ex ? bad[k] : 0, xmin, smin,
                            all_ex && have_shm ? shm_bad[k] : 0, cmin, -cmin,
                            all_ex && have_shm ? cma_bad[k] : 0 }, most[15];
        MPI_Reduce(mine, most, 15, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        free(g->s);
        if (rank != 0)
            continue;
        if (-most[5] != most[3]) {
            fprintf(stderr, "su3_rmd: gather %d: ranks sent different sizes (%.0f, %.0f "
                    "bytes); not reported\n", k, -most[5], most[3]);
            continue;
        }
        char copy[32] = "null", xch[480] = "";
        if (-most[4] > 0.0)
            snprintf(copy, sizeof copy, "%.9f", most[2]);
        if (all_ex)
            snprintf(xch, sizeof xch, ",\"exchange_min_s\":%.9f,\"exchange_lq_s\":%.9f,"
                     "\"exchange_median_s\":%.9f,\"exchange_reps\":%d,\"exchange_pause_s\":%.9f,"
                     "\"exchange_samples\":%d,\"exchange_bad\":%.0f", most[9], most[6], most[7],
                     reps[k], pause[k], SAMPLES, most[8]);
        if (all_ex && have_shm)
            snprintf(xch + strlen(xch), sizeof xch - strlen(xch),
                     ",\"shm_exchange_min_s\":%.9f,\"shm_exchange_bad\":%.0f", most[10],
                     most[11]);
        if (all_ex && have_shm && -most[13] > 0.0)   /* every rank read through the kernel */
            snprintf(xch + strlen(xch), sizeof xch - strlen(xch),
                     ",\"cma_exchange_min_s\":%.9f,\"cma_exchange_bad\":%.0f", most[12],
                     most[14]);
        printf("SU3-GATHER {\"bytes\":%ld,\"gathers\":%d,\"lq_s\":%.9f,"
               "\"median_s\":%.9f,\"memcpy_lq_s\":%s%s}\n", g->bytes, g->n, most[0], most[1],
               copy, xch);
    }
    free(ex);
}

int main(int argc, char **argv)
{
    options o;
    lattice lat;
    char msg[512], b1[32], b2[32];

    MPI_Init(&argc, &argv);
    PROF(P_COMM_RANK, MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    PROF(P_COMM_SIZE, MPI_Comm_size(MPI_COMM_WORLD, &nranks));
    parse_args(argc, argv, &o);
    if (tb_watchdog_start("su3_rmd", rank, msg, sizeof msg))
        fail("%s", msg);
    tb_watchdog_at("set-up", "", NULL, -1);
    work = o.alone ? MPI_COMM_SELF : MPI_COMM_WORLD;
    int lat_ranks = o.alone ? 1 : nranks, lat_rank = o.alone ? 0 : rank;
    if (lat_ranks & (lat_ranks - 1))
        fail("number of ranks %d is not a power of two", nranks);
    memcpy(lat.L, o.L, sizeof lat.L);
    lat.comm = o.comm;
    lat.corrupt_exchange = o.corrupt_exchange;
    if (lattice_layout(&lat, lat_ranks, msg, sizeof msg))
        fail("%s", msg);
    /* Pinned before any allocation, so memory is first touched where the rank
     * runs; every rank's CPU goes into SU3-RUN and SU3-END, so a test can see
     * that ranks sat on distinct CPUs and did not move. */
    int bind_cpu = -1;
    if (o.bind_self && (bind_cpu = tb_bind_self(rank)) < 0) {
        fprintf(stderr, "su3_rmd: --bind-self: rank %d could not pin itself to a CPU\n",
                rank);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    char cpus_start[4096], bind_cpus[4096], cpus_end[4096], cpus_allowed[4096];
    tb_gather_json(tb_cpu(), MPI_COMM_WORLD, cpus_start, sizeof cpus_start);
    tb_gather_json(bind_cpu, MPI_COMM_WORLD, bind_cpus, sizeof bind_cpus);
    tb_gather_json(tb_allowed_cpus(), MPI_COMM_WORLD, cpus_allowed, sizeof cpus_allowed);
    size_t n = (size_t)lat.vol;
    U = malloc(sizeof(su3) * 4 * n);
    P = malloc(sizeof(su3) * 4 * n);
    V = malloc(sizeof(su3) * 4 * n);
    W = malloc(sizeof(su3) * 3 * n);
    int maxface = 0, bad = !U || !P || !V || !W || lattice_setup(&lat, lat_rank);
    for (int d = 0; d < 4; d++) {
        recvU[d] = malloc(sizeof(su3) * 4 * lat.face[d]);
        bad |= !recvU[d];
        if (lat.face[d] > maxface)
            maxface = lat.face[d];
    }
    recvW = malloc(sizeof(su3) * 3 * maxface);
    if (bad || !recvW) {
        fprintf(stderr, "su3_rmd: rank %d: out of memory for local volume %d\n",
                rank, lat.vol);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (size_t i = 0; i < 4 * n; i++)
        su3_unit(&U[i]); /* cold start */

    if (rank == 0) {
        char raw[256], ver[512];
        long fb[4];
        tb_library_version(raw, sizeof raw);
        tb_json_escape(raw, ver, sizeof ver);
        for (int d = 0; d < 4; d++)
            fb[d] = lat.grid[d] > 1 ? (long)lat.face[d] * 4 * (long)sizeof(su3) : 0;
        printf("SU3-RUN {\"lattice\":[%d,%d,%d,%d],\"ranks\":%d,\"grid\":[%d,%d,%d,%d],"
               "\"preset\":%d,\"beta\":%s,\"trajectories\":%d,\"steps\":%d,\"epsilon\":%s,"
               "\"seed\":%llu,\"comm\":\"%s\",\"corrupt_link\":%s,\"library_version\":\"%s\","
               "\"local_volume\":%d,\"local_lattice\":[%d,%d,%d,%d],"
               "\"face_bytes\":[%ld,%ld,%ld,%ld],\"staple_face_bytes\":[%ld,%ld,%ld,%ld],"
               "\"self_bound\":%s,\"bind_cpus\":%s,\"cpus_start\":%s,\"cpus_allowed\":%s,"
               "\"alone\":%s}\n",
               o.L[0], o.L[1], o.L[2], o.L[3], nranks, lat.grid[0], lat.grid[1],
               lat.grid[2], lat.grid[3], o.preset, num(o.beta, b1), o.traj, o.steps,
               num(o.eps, b2), o.seed, o.comm == COMM_SSEND ? "ssend" : "isend",
               o.corrupt ? "true" : "false", ver, lat.vol, lat.l[0], lat.l[1], lat.l[2],
               lat.l[3], fb[0], fb[1], fb[2], fb[3], fb[0] * 3 / 4, fb[1] * 3 / 4,
               fb[2] * 3 / 4, fb[3] * 3 / 4, o.bind_self ? "true" : "false", bind_cpus,
               cpus_start, cpus_allowed, o.alone ? "true" : "false");
        fflush(stdout);
    }

    /* what the hang watchdog names: the exchange, the lattice; a beat per trajectory */
    char wmode[64], wsize[64];
    snprintf(wmode, sizeof wmode, "%s exchange%s", o.comm == COMM_SSEND ? "ssend" : "isend",
             o.alone ? ", alone" : "");
    snprintf(wsize, sizeof wsize, "lattice %dx%dx%dx%d", o.L[0], o.L[1], o.L[2], o.L[3]);
    tb_watchdog_at("trajectory", wmode, wsize, -1);
    PROF(P_BARRIER, MPI_Barrier(MPI_COMM_WORLD));
    double t_start = MPI_Wtime(), cpu_start = cpu_seconds(), t_loop = 0.0;
    double sites = (double)o.L[0] * o.L[1] * o.L[2] * o.L[3], plaq_prev = 0.0;
    /* Each trajectory's time: SU3-END gives their median beside the mean, because a burst of
     * another tenant's load on a shared machine lengthens a few trajectories and moves the mean
     * (seen: a 0.3 s CPU hog in a 1 s run moved the mean-based speedup by 13%, the median-based
     * one by under 1%), while a slower library lengthens them all. The test's speedup takes the
     * lower quartile of the SU3-TRAJ times (reframe/tests/su3_rmd.py says why). */
    double *traj_s = malloc(sizeof(double) * (size_t)(o.traj > 0 ? o.traj : 1));
    for (int traj = 0; traj <= o.traj; traj++) {
        double t0 = MPI_Wtime(), kin[2] = { 0.0, 0.0 }, dH = 0.0;
        if (traj > 0) { /* leapfrog: half kick, (drift, kick) x steps, last kick half */
            refresh_momenta(&lat, P, o.seed, traj);
            kin[0] = kinetic(&lat);
            force_update(&lat, 0.5 * o.eps, o.beta);
            for (int s = 1; s <= o.steps; s++) {
                link_update(&lat, o.eps);
                force_update(&lat, s < o.steps ? o.eps : 0.5 * o.eps, o.beta);
            }
            if (traj == 1 && o.corrupt && rank == 0)
                for (int j = 0; j < 3; j++)
                    for (int k = 0; k < 3; k++)
                        U[0].e[j][k] *= 1.001; /* after reunitarisation */
            kin[1] = kinetic(&lat);
        }
        double plaq = plaquette(&lat), dev = max_unitarity_dev(&lat);
        if (traj > 0) {
            /* Energy violation of this trajectory, H = -sum Tr P^2 + S with
             * S = -(beta/3) sum_p Re Tr U_p + const and sum_p = plaquette x 6 sites. */
            double k[2];
            PROF(P_ALLREDUCE, MPI_Allreduce(kin, k, 2, MPI_DOUBLE, MPI_SUM, work));
            dH = k[1] - k[0] - o.beta / 3.0 * 6.0 * sites * (plaq - plaq_prev);
        }
        plaq_prev = plaq;
        double dt = MPI_Wtime() - t0;
        tb_watchdog_beat();
        if (o.alone) { /* outside the timing: the slowest rank's time and deviation; every
                        * rank then starts the next trajectory together */
            double mine[2] = { dt, dev }, most[2];
            MPI_Allreduce(mine, most, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            dt = most[0], dev = most[1];
        }
        if (traj > 0) {
            t_loop += dt;
            traj_s[traj - 1] = dt;
        }
        if (rank == 0) {
            char dh[32] = "null"; /* no dynamics at the cold start */
            if (traj > 0)
                snprintf(dh, sizeof dh, "%.6e", dH);
            printf("SU3-TRAJ {\"traj\":%d,\"plaquette\":%s,\"max_unitarity_dev\":%.3e,"
                   "\"dH\":%s,\"seconds\":%.6f}\n", traj, num(plaq, b1), dev, dh, dt);
            fflush(stdout);
        }
        /* Every rank holds the same reduced value, so all leave together through
         * MPI_Finalize. Not MPI_Abort: MPICH 4.0's hydra sometimes tore the job
         * down before it had forwarded rank 0's stderr line (1 run in 30). */
        if (dev > 1e-10) {
            if (rank == 0)
                fprintf(stderr, "su3_rmd: unitarity check failed at trajectory %d: "
                        "deviation %.3e > 1e-10\n", traj, dev);
            free(traj_s);
            tb_watchdog_stop();
            tb_finalize_bounded();
            return 3;
        }
    }
    double wall = MPI_Wtime() - t_start, cpu = cpu_seconds() - cpu_start;
    tb_watchdog_at("exchanges timed alone", wmode, wsize, -1);
    tb_gather_json(tb_cpu(), MPI_COMM_WORLD, cpus_end, sizeof cpus_end);
    report_gathers(&lat);
    tb_watchdog_at("records", wmode, wsize, -1);

    /* Totals over ranks; these reductions are outside the profile. */
    double mine[3] = { cpu, cpu, 0.0 }, tot[3], csum[P_NCALLS], smax[P_NCALLS],
           ssum[P_NCALLS], cnt[P_NCALLS];
    for (int k = 0; k < P_NCALLS; k++) {
        mine[2] += prof_sec[k];
        cnt[k] = (double)prof_count[k];
    }
    MPI_Reduce(&mine[0], &tot[0], 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&mine[1], &tot[1], 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(&mine[2], &tot[2], 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(cnt, csum, P_NCALLS, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(prof_sec, ssum, P_NCALLS, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(prof_sec, smax, P_NCALLS, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        double per_traj = o.steps * (double)FLOPS_LINK + (o.steps + 1.0) * FLOPS_FORCE
                        + FLOPS_PLAQ;
        double flops = sites * (o.traj * per_traj + FLOPS_PLAQ);
        printf("SU3-END {\"wall_s\":%.6f,\"cpu_s\":%.6f,\"cpu_s_sum\":%.6f,\"mpi_s\":%.6f,"
               "\"comm_share\":%.4f,\"cpu_share\":%.4f,\"s_per_traj\":%.6f,"
               "\"s_per_traj_median\":%.6f,"
               "\"flops_per_site_step\":%d,\"flops\":%.0f,\"gflops\":%.4f,"
               "\"cpus_end\":%s}\n",
               wall, tot[0], tot[1], tot[2], tot[2] / wall, tot[0] / wall,
               t_loop / o.traj, tb_median(traj_s, o.traj), FLOPS_LINK + FLOPS_FORCE, flops, flops / wall * 1e-9,
               cpus_end);
        for (int k = 0; k < P_NCALLS; k++)
            if (csum[k] > 0)
                printf("SU3-MPI {\"call\":\"%s\",\"count\":%.0f,\"seconds\":%.6f,"
                       "\"seconds_max_rank\":%.6f}\n", prof_name[k], csum[k], ssum[k],
                       smax[k]);
        printf("# %d trajectories in %.3f s wall, %.1f%% of it in MPI calls\n",
               o.traj, wall, 100.0 * tot[2] / wall);
    }
    free(traj_s);
    tb_watchdog_stop();
    tb_finalize_bounded();     /* see ../common/tb_finalize.h */
    return 0;
}
