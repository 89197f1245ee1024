/* libslowdown.so: test-only slowdown injection, loaded with LD_PRELOAD.
 *
 * It exists to prove that performance references bite: a chosen call is made
 * slower by a known factor f and the suite must fail. After the real call
 * returns, the caller busy-waits (f - 1) x the call's own elapsed time
 * (CLOCK_MONOTONIC; "own": see below), so the call takes f times as long.
 *
 *   TESTBED_SLOWDOWN        factor f, 1 <= f <= 100; absent, empty or 1: inactive;
 *                           or "+Nns" (1 <= N <= 1000000): a fixed wait of N ns after
 *                           each slowed call, with no clock read in the call (below)
 *   TESTBED_SLOWDOWN_CALLS  comma list of calls to slow (default: DEFAULT_CALLS);
 *                           "work" slows the process's own work outside every call
 *                           the shim wraps (below)
 *   TESTBED_SLOWDOWN_PAUSE  a path: while a file is there, a process that starts
 *                           leaves everything at full speed (a baseline in the job)
 *   TESTBED_SLOWDOWN_SENDS  "after" (default) or "before": where the sends
 *                           (MPI_Send, Ssend, Isend, Issend) are padded (below)
 *   TESTBED_SLOWDOWN_WAITS  "block" (default) or "poll": a slowed blocking
 *                           point-to-point call runs as it is, or as a loop of
 *                           MPI_Test over its nonblocking form, each test padded
 *                           (below)
 *   TESTBED_SLOWDOWN_COPY   N (0 < N <= 16): every send (MPI_Send, Ssend, Isend,
 *                           Issend) first copies its buffer N times into a scratch
 *                           buffer, a regression of the kind a library makes when
 *                           it stages a buffer it did not need to; a fraction
 *                           copies that share of the buffer's bytes (0.1: a tenth,
 *                           a graded slowdown of large messages); with or without
 *                           a factor (the factor then pads the call as usual)
 *   TESTBED_SLOWDOWN_HANG   CALL:N:RANK, e.g. MPI_Recv:200:1: rank RANK's N-th call
 *                           of CALL never returns (a deadlocked library, for the
 *                           hang watchdog's proof: apps/common/tb_watchdog.h);
 *                           with or without a factor
 *
 * No link-time MPI dependency: the library is preloaded into launchers and
 * daemons too (mpiexec, hydra proxies, prterun, lamboot/lamd), which have no
 * MPI library. The real functions are found at first use with
 * dlsym(RTLD_NEXT). Since MPI handles are ints in MPICH-derived libraries and
 * pointers in Open MPI and LAM, every MPI argument is passed through as an
 * intptr_t: on x86-64 each is an integer-class argument in a 64-bit register
 * or stack slot, so the callee reads what the caller wrote whatever its type.
 *
 * "Own" elapsed time: a blocking call's elapsed time includes the waits the
 * shim injected into the other ranks meanwhile (in a ping-pong, my Recv lasts
 * as long as my partner's padding). Padding that too compounds hop after hop:
 * the injected wait grows by 1/(2 - f) and without bound from f = 2 (seen: a
 * p2p run at f = 2 never ends). So the ranks started by one parent (hydra
 * proxy, mpirun, prterun, lamd: ranks on this node of this job) add up their
 * injected waits in a shared counter, and a call's pad is (f - 1) x (its
 * elapsed time - the others' injected waits that ended during it).
 * The effective slowdown of a figure is still not f: measure it (README.md).
 *
 * "work": an application's figure is mostly its own arithmetic, which no MPI
 * call covers (su3_rmd's loops, HPL's outside DGEMM). With it, every wrapped
 * call, slowed or not, first pads (f - 1) x the time since the thread's last
 * wrapped call returned: the work in between, padded whole, since no wait for
 * a partner is in it as long as the program waits only inside wrapped calls.
 * The calls themselves run at full speed unless listed too (cblas_dgemm is
 * work; a blocking call's time holds the partner's work, which the partner
 * pads already). So "work,cblas_dgemm,dgemm_" slows a run's computation by f
 * and leaves its communication as it was: the run slows by less than f, and
 * its figure must show it. With TESTBED_SLOWDOWN_PAUSE the job measures its
 * baselines at full speed.
 *
 * Sends padded "before": a pad after a send delays only the sender, and the
 * partner does not wait for it once the message is on its way (after a
 * synchronous send's rendezvous, or while the partner computes), so the
 * figure slows by less than f (LAM's Ssend exchange in su3_rmd: 1.07-1.13x at
 * f = 1.2). A slower library delays the message itself. With "before" a send
 * busy-waits first, (f - 1) x the own time of the thread's previous call of
 * the same function (its own time is known only when it returns; the first
 * call is not padded), so the message leaves later and the partner waits.
 *
 * Waits as polls ("poll"): a blocking call's own time is mostly waiting for
 * the partner, and a pad after it only moves that wait (su3_rmd's exchange on
 * LAM with MPI_Ssend: 1.04-1.17x at f = 1.25 to 1.5). A slower library is
 * slower in every step of its progress engine, on both ranks at once, while
 * the message moves. So MPI_Send, Ssend and Recv become their nonblocking form
 * and MPI_Wait and Waitall a loop of MPI_Test and Testall, and every test is
 * padded by (f - 1) x its own time: a test does not wait for a partner, so its
 * time is the library's work (matching, copying, acknowledging). The pads are
 * published to the shared total once per blocking call, not per test (a
 * cache line written by both ranks on every test would slow the loop itself).
 *
 * "+Nns": the factor's two clock reads per call cost tens of ns, a large share
 * of a 0.2 us latency, so no factor slows a small message by only 5 %. The
 * fixed wait is a spin loop of a count calibrated once, at MPI_Init, on the
 * rank's own core: a slowed call then costs the wrapper's few ns plus N.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "../common/tb_clock.h"
#include "../common/tb_watchdog.h"   /* tb_launcher_rank */

typedef intptr_t I;

/* Every call the shim can slow; the index is its bit in `slowed`. */
enum { SEND, SSEND, ISEND, ISSEND, RECV, IRECV, WAIT, WAITALL, ALLREDUCE,
       REDUCE, BARRIER, BCAST, IPROBE, CBLAS_DGEMM, DGEMM, PVM_SEND, PVM_RECV, NCALLS,
       INIT = NCALLS, TEST, TESTALL, TYPE_SIZE, NREAL };   /* after NCALLS: never slowed */
static const char *const names[NREAL] = {
    "MPI_Send", "MPI_Ssend", "MPI_Isend", "MPI_Issend", "MPI_Recv", "MPI_Irecv",
    "MPI_Wait", "MPI_Waitall", "MPI_Allreduce", "MPI_Reduce", "MPI_Barrier",
    "MPI_Bcast", "MPI_Iprobe", "cblas_dgemm", "dgemm_", "pvm_send", "pvm_recv", "MPI_Init",
    "MPI_Test",
    "MPI_Testall", "MPI_Type_size",
};
/* What p2p, su3_rmd and HPL spend their timed regions in, and p2p-pvm (PVM's
 * pvm_send and pvm_recv, which an MPI program never calls). Not by default:
 * MPI_Barrier and MPI_Bcast (set-up and sample boundaries, outside the timed
 * regions; slowing them would carry a ping-pong's compounding from one sample
 * to the next) and MPI_Iprobe (HPL's polling loop: its elapsed time is spin). */
#define DEFAULT_CALLS "MPI_Send,MPI_Ssend,MPI_Isend,MPI_Issend,MPI_Recv," \
    "MPI_Irecv,MPI_Wait,MPI_Waitall,MPI_Allreduce,MPI_Reduce,cblas_dgemm,dgemm_," \
    "pvm_send,pvm_recv"

static double extra;            /* f - 1; 0 when inactive */
static long fixed_ns;           /* "+Nns": N; 0 in factor mode */
static volatile uint64_t spins_per_call; /* fixed_ns as spin-loop turns, set at MPI_Init */
static unsigned slowed;         /* bit i: names[i] is slowed */
static void *real[NREAL];
static __thread int depth;      /* a slowed call made inside a slowed call is not slowed again */
static int slow_work;           /* "work" is in the list */
static __thread int64_t last_exit; /* when the thread's last wrapped call returned; 0: none yet */
static int sends_before;        /* TESTBED_SLOWDOWN_SENDS=before */
static __thread int64_t last_own[NCALLS]; /* a call's own time, ns, at its last return */
static int polls;               /* TESTBED_SLOWDOWN_WAITS=poll */
static double copies;           /* TESTBED_SLOWDOWN_COPY: extra copies of each send buffer */

static void bad(const char *var, const char *val, const char *why)
{
    fprintf(stderr, "slowdown: %s='%s': %s\n", var, val, why);
    _exit(2);
}

/* The index in names of call `name` of setting var='val', which stops the process when the
 * shim cannot slow it; `more`: the other words the setting takes. */
static int call_index(const char *var, const char *val, const char *name, const char *more)
{
    int i = 0;
    while (i < NCALLS && strcmp(name, names[i]))
        i++;
    if (i == NCALLS) {
        char why[512];
        snprintf(why, sizeof why, "unknown call '%s'; known: " DEFAULT_CALLS
                 ",MPI_Barrier,MPI_Bcast,MPI_Iprobe%s", name, more);
        bad(var, val, why);
    }
    return i;
}

/* TESTBED_SLOWDOWN_HANG: the call (index into names), its count and the rank; -1: off. */
static int hang_call = -1;
static long hang_nth, hang_count;
static int hang_rank, my_rank = -1;
static char hang_setting[128];

static void configure_hang(const char *v)
{
    char call[64];
    long nth = 0, rank = -1;
    int used = 0;
    if (strlen(v) >= sizeof hang_setting ||
        sscanf(v, "%63[^:]:%ld:%ld%n", call, &nth, &rank, &used) != 3 || v[used] ||
        nth < 1 || rank < 0 || rank > 1000000)
        bad("TESTBED_SLOWDOWN_HANG", v, "expected CALL:N:RANK, e.g. MPI_Recv:200:1 (rank 1's "
            "200th MPI_Recv never returns), N from 1, RANK from 0");
    hang_call = call_index("TESTBED_SLOWDOWN_HANG", v, call, "");
    strcpy(hang_setting, v);
    hang_nth = nth;
    hang_rank = (int)rank;
    my_rank = tb_launcher_rank();       /* -1 in launchers and daemons: never hung */
}

/* At every call of the hung one: the N-th on the rank named never returns (pause() keeps
 * the process asleep and killable: the launcher's teardown and the watchdog's signal). */
static void hang_point(void)
{
    if (my_rank != hang_rank || __atomic_add_fetch(&hang_count, 1, __ATOMIC_RELAXED) != hang_nth)
        return;
    fprintf(stderr, "slowdown: hang: rank %d pid %d: %s call %ld never returns "
            "(TESTBED_SLOWDOWN_HANG)\n", my_rank, (int)getpid(), names[hang_call], hang_nth);
    for (;;)
        pause();
}

/* Runs in every process that loads the library, launchers included: a bad
 * setting stops the first of them, before any rank starts. */
__attribute__((constructor)) static void configure(void)
{
    const char *h = getenv("TESTBED_SLOWDOWN_HANG");
    if (h && *h)
        configure_hang(h);
    const char *pause = getenv("TESTBED_SLOWDOWN_PAUSE");
    if (pause && *pause && access(pause, F_OK) == 0)
        return;                 /* a baseline of the job: full speed */
    char *end;
    errno = 0;
    const char *c = getenv("TESTBED_SLOWDOWN_COPY");
    if (c && *c) {
        double n = strtod(c, &end);
        if (end == c || *end || errno || !(n > 0.0 && n <= 16.0))
            bad("TESTBED_SLOWDOWN_COPY", c,
                "expected a number of extra copies above 0 and at most 16 (0.1: a tenth)");
        copies = n;
    }
    const char *f = getenv("TESTBED_SLOWDOWN");
    if (!f || !*f)
        return;
    double v;
    if (*f == '+') {            /* "+Nns" */
        long n = strtol(f + 1, &end, 10);
        if (end == f + 1 || strcmp(end, "ns") || errno || n < 1 || n > 1000000)
            bad("TESTBED_SLOWDOWN", f, "expected a factor from 1 to 100, e.g. 1.2, or a "
                "fixed wait from +1ns to +1000000ns, e.g. +20ns");
        fixed_ns = n;
        v = 2.0;                /* active; the factor itself is not used */
    } else {
        v = strtod(f, &end);
        if (end == f || *end || errno || !isfinite(v) || v < 1.0 || v > 100.0)
            bad("TESTBED_SLOWDOWN", f, "expected a factor from 1 to 100, e.g. 1.2, or a "
                "fixed wait from +1ns to +1000000ns, e.g. +20ns");
        if (v == 1.0)
            return;
    }
    const char *where = getenv("TESTBED_SLOWDOWN_SENDS");
    if (where && *where && strcmp(where, "after")) {
        if (strcmp(where, "before"))
            bad("TESTBED_SLOWDOWN_SENDS", where, "expected after (the default) or before");
        sends_before = 1;
    }
    const char *waits = getenv("TESTBED_SLOWDOWN_WAITS");
    if (waits && *waits && strcmp(waits, "block")) {
        if (strcmp(waits, "poll"))
            bad("TESTBED_SLOWDOWN_WAITS", waits, "expected block (the default) or poll");
        if (sends_before || fixed_ns)
            bad("TESTBED_SLOWDOWN_WAITS", waits, "poll pads every test by the factor: it takes "
                "neither a fixed wait nor TESTBED_SLOWDOWN_SENDS=before");
        polls = 1;
    }
    const char *list = getenv("TESTBED_SLOWDOWN_CALLS");
    if (!list)
        list = DEFAULT_CALLS;
    char buf[1024];
    if (!*list || strlen(list) >= sizeof buf)
        bad("TESTBED_SLOWDOWN_CALLS", list, "expected a comma list of call names");
    strcpy(buf, list);
    for (char *save, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (!strcmp(tok, "work")) {
            slow_work = 1;
            continue;
        }
        slowed |= 1u << call_index("TESTBED_SLOWDOWN_CALLS", list, tok, ",work");
    }
    if (slow_work && fixed_ns)
        bad("TESTBED_SLOWDOWN_CALLS", list, "'work' needs a factor, not a fixed wait");
    extra = v - 1.0;
}

static void *resolve(int i)
{
    void *fn = __atomic_load_n(&real[i], __ATOMIC_RELAXED);
    if (!fn) {
        fn = dlsym(RTLD_NEXT, names[i]);
        if (!fn) {
            fprintf(stderr, "slowdown: %s not found in the libraries after the shim\n", names[i]);
            abort();
        }
        __atomic_store_n(&real[i], fn, __ATOMIC_RELAXED);
    }
    return fn;
}

/* Total of the waits injected by the ranks of this node and job (see top):
 * a page in /dev/shm named after the parent process, mapped at the first
 * slowed call (launchers and daemons never make one). Without it (no
 * /dev/shm) a private counter: calls are then padded on their full time. */
static int64_t private_total, *total;
static char shm_path[64];

static int64_t *shared_total(void)
{
    if (total)
        return total;
    snprintf(shm_path, sizeof shm_path, "/dev/shm/testbed-slowdown.%d.%d",
             (int)getuid(), (int)getppid());
    int fd = open(shm_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    void *p = MAP_FAILED;
    if (fd >= 0 && ftruncate(fd, 4096) == 0)
        p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (fd >= 0)
        close(fd);
    total = p == MAP_FAILED ? &private_total : p;
    return total;
}


static int64_t others(void)
{
    return __atomic_load_n(shared_total(), __ATOMIC_RELAXED);
}

/* Busy-wait, not sleep: a sleep's wake-up latency (tens of us) would swamp
 * the sub-microsecond calls of a shared-memory ping-pong. The wait is added
 * to the shared total when it ends, so a partner blocked on it sees it. */
/* This process's own account, printed at exit (see account()): how many calls
 * it padded, their own time, and the wait it injected. */
static int64_t n_padded, own_ns, injected_ns, work_ns, n_before, n_polls;

/* Busy-waits (f - 1) x `own` ns from t1 (now) and counts it in the account;
 * returns the ns waited. */
static int64_t spin_pad(int64_t t1, int64_t own)
{
    int64_t until = t1 + (int64_t)(extra * (double)own), t;
    while ((t = tb_now_ns()) < until)
        ;
    __atomic_add_fetch(&n_padded, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&own_ns, own, __ATOMIC_RELAXED);
    __atomic_add_fetch(&injected_ns, t - t1, __ATOMIC_RELAXED);
    return t - t1;
}

/* spin_pad, the wait added to the shared total at once. */
static void wait_for(int64_t t1, int64_t own)
{
    if (own > 0)
        __atomic_add_fetch(shared_total(), spin_pad(t1, own), __ATOMIC_RELAXED);
}

/* After a slowed call that began at t0, when the others' total was `before`. */
static void pad(int64_t t0, int64_t before)
{
    int64_t t1 = tb_now_ns();
    wait_for(t1, (t1 - t0) - (others() - before));
}

/* Whether a wrapped call starting now bounds the thread's own work: "work" is
 * listed and no other wrapped call is under way. */
static int bounds_work(void)
{
    return slow_work && !depth;
}

/* Before a wrapped call that bounds_work: pads the thread's own work since the
 * last one returned; says whether it is such a call, for work_leave. */
static int work_enter(void)
{
    if (!bounds_work())
        return 0;
    int64_t t1 = tb_now_ns();
    if (last_exit) {
        wait_for(t1, t1 - last_exit);
        __atomic_add_fetch(&work_ns, t1 - last_exit, __ATOMIC_RELAXED);
    }
    return 1;
}

/* After it: the work that follows starts now. */
static void work_leave(int work)
{
    if (work)
        last_exit = tb_now_ns();
}

static void spin(uint64_t n)
{
    for (volatile uint64_t i = 0; i < n; i++)
        ;
}

/* Turns of spin() per fixed_ns: the fastest of five timed runs of 2^20 turns
 * (a run that was preempted is slower, never faster). */
static void calibrate(void)
{
    double best = 1e30;
    for (int r = 0; r < 5; r++) {
        int64_t t0 = tb_now_ns();
        spin(1u << 20);
        double ns_per_turn = (double)(tb_now_ns() - t0) / (1u << 20);
        if (ns_per_turn < best)
            best = ns_per_turn;
    }
    spins_per_call = (uint64_t)(fixed_ns / best + 0.5);
    if (!spins_per_call)
        spins_per_call = 1;
}

/* The fixed wait after a slowed call; calibrated at the first one, which comes
 * after MPI_Init (or MPI_Init_thread) has bound the rank to its core. */
static void wait_fixed(void)
{
    if (!spins_per_call)
        calibrate();
    spin(spins_per_call);
    n_padded++;
}

/* The account's notes: the work outside the calls, whose time is in own, and
 * how many of the padded calls were sends padded before they ran. */
static const char *notes(void)
{
    static char note[128];
    note[0] = 0;
    if (slow_work)
        snprintf(note, sizeof note, " (work %lld ns)", (long long)work_ns);
    if (sends_before)
        snprintf(note + strlen(note), sizeof note - strlen(note), " (sends before: %lld)",
                 (long long)n_before);
    if (polls)
        snprintf(note + strlen(note), sizeof note - strlen(note), " (polls: %lld)",
                 (long long)n_polls);
    return note;
}

/* Whether call i is a send padded before it runs. */
static int pads_before(int i)
{
    return sends_before && i <= ISSEND;
}

/* At exit: every rank removes the shared page's name (ranks still running keep
 * their mapping), and a rank that padded says by how much, so that a test can
 * check the mechanism without timing anything (injected >= (f - 1) x own). */
__attribute__((destructor)) static void account(void)
{
    if (total && total != &private_total)
        unlink(shm_path);
    if (n_padded && fixed_ns)
        fprintf(stderr, "slowdown: pid %d padded %lld calls by %ld ns each (%llu spin turns)\n",
                (int)getpid(), (long long)n_padded, fixed_ns,
                (unsigned long long)spins_per_call);
    else if (n_padded)
        fprintf(stderr, "slowdown: pid %d padded %lld calls: own %lld ns, injected %lld ns%s\n",
                (int)getpid(), (long long)n_padded, (long long)own_ns, (long long)injected_ns,
                notes());
}

#define ACTIVE(i) ((slowed >> (i)) & 1u && !depth)

/* "poll" (see top): the pads of this thread's tests since its blocking call
 * began, published to the shared total when the call returns. */
static __thread int64_t poll_pending;

/* spin_pad after one test or one nonblocking start inside a polled call, the
 * wait kept for polled() to publish. */
static void poll_pad(int64_t t1, int64_t own)
{
    poll_pending += spin_pad(t1, own);
    __atomic_add_fetch(&n_polls, 1, __ATOMIC_RELAXED);
}

/* MPI_Test on `req` (all = 0) or MPI_Testall on `count` of them (all = 1)
 * until done, each test padded by (f - 1) x its own time. `count` is an int
 * passed on as it came (the upper half of its register is not looked at). */
static int poll_until_done(int all, I count, I req, I status)
{
    typedef int (*test_t)(I, I, I);
    typedef int (*testall_t)(I, I, I, I);
    int flag = 0, rc;
    do {
        int64_t t0 = tb_now_ns();
        rc = !all ? ((test_t)resolve(TEST))(req, (I)&flag, status)
                       : ((testall_t)resolve(TESTALL))(count, req, (I)&flag, status);
        int64_t t1 = tb_now_ns();
        poll_pad(t1, t1 - t0);
    } while (!rc && !flag);
    return rc;
}

/* A blocking point-to-point call as its nonblocking form `start` (whose last
 * argument is the request) and a poll: MPI_Send, Ssend and Recv. */
typedef int (*start_t)(I, I, I, I, I, I, I);
static int poll_p2p(int start, I a, I b, I c, I d, I e, I f, I status)
{
    I req = 0, ignored[32] = {0};   /* big enough for any library's MPI_Status */
    int64_t t0 = tb_now_ns();
    int rc = ((start_t)resolve(start))(a, b, c, d, e, f, (I)&req);
    int64_t t1 = tb_now_ns();
    poll_pad(t1, t1 - t0);
    return rc ? rc : poll_until_done(0, 0, (I)&req, status ? status : (I)ignored);
}

/* The end of a polled call: its pads join the shared total (see top). */
static int polled(int rc)
{
    __atomic_add_fetch(shared_total(), poll_pending, __ATOMIC_RELAXED);
    poll_pending = 0;
    return rc;
}

/* TESTBED_SLOWDOWN_COPY: `copies` copies of a send's buffer (count x the type's size,
 * MPI_Type_size found like the real calls) into a scratch buffer of the thread's. */
static __thread char *scratch;
static __thread size_t scratch_len;

static void copy_send_buffer(I buf, I count, I type)
{
    int size = 0;
    if (((int (*)(I, int *))resolve(TYPE_SIZE))(type, &size) || size <= 0 || count <= 0)
        return;
    size_t len = (size_t)size * (size_t)count;
    if (len > scratch_len) {
        free(scratch);
        scratch = malloc(len);
        scratch_len = scratch ? len : 0;
        if (!scratch)
            return;
    }
    double left = copies;
    for (; left > 0.0; left -= 1.0) {
        size_t part = left >= 1.0 ? len : (size_t)(left * (double)len);
        memcpy(scratch, (const void *)buf, part);
        __asm__ __volatile__("" : : "r"(scratch) : "memory");   /* the copy stays */
    }
}

#define IS_SEND(i) ((i) == SEND || (i) == SSEND || (i) == ISEND || (i) == ISSEND)
/* A call's first three arguments (buffer, count, type for a send), padded for calls
 * with fewer, which never copy. */
#define FIRST3(...) FIRST3_(__VA_ARGS__, 0, 0, 0)
#define FIRST3_(a, b, c, ...) a, b, c

/* One wrapper for a call returning int; PARAMS names the arguments, ARGS passes them.
 * WRAP_POLLED: a blocking call that "poll" runs as POLL, an int expression (CAN: 1). */
#define WRAP(i, name, PARAMS, ARGS) WRAP_POLLED(i, name, PARAMS, ARGS, 0, 0)
#define WRAP_POLLED(i, name, PARAMS, ARGS, CAN, POLL)                \
    int name PARAMS                                                  \
    {                                                                \
        typedef int (*fn_t) PARAMS;                                  \
        fn_t fn = (fn_t)resolve(i);                                  \
        if (hang_call == (i))                                        \
            hang_point();                                            \
        if (copies && IS_SEND(i) && !depth)                          \
            copy_send_buffer(FIRST3 ARGS);                           \
        int slow = ACTIVE(i);                                        \
        if (!slow && !bounds_work())                                 \
            return fn ARGS;                                          \
        if (fixed_ns) {         /* never with "work" */              \
            if (pads_before(i))                                      \
                wait_fixed();                                        \
            int rc = fn ARGS;                                        \
            if (!pads_before(i))                                     \
                wait_fixed();                                        \
            return rc;                                               \
        }                                                            \
        int work = work_enter();                                     \
        depth++;                                                     \
        if ((CAN) && slow && polls) {                                \
            int rc = polled(POLL);                                   \
            depth--;                                                 \
            work_leave(work);                                        \
            return rc;                                               \
        }                                                            \
        int pre = slow && pads_before(i);                            \
        if (pre && last_own[i] > 0) {                                \
            wait_for(tb_now_ns(), last_own[i]);                      \
            __atomic_add_fetch(&n_before, 1, __ATOMIC_RELAXED);      \
        }                                                            \
        int64_t before = slow ? others() : 0;                        \
        int64_t t0 = slow ? tb_now_ns() : 0;                         \
        int rc = fn ARGS;                                            \
        if (pre)                                                     \
            last_own[i] = (tb_now_ns() - t0) - (others() - before);  \
        else if (slow)                                               \
            pad(t0, before);                                         \
        depth--;                                                     \
        work_leave(work);                                            \
        return rc;                                                   \
    }

WRAP_POLLED(SEND, MPI_Send, (I a, I b, I c, I d, I e, I f), (a, b, c, d, e, f),
            1, poll_p2p(ISEND, a, b, c, d, e, f, 0))
WRAP_POLLED(SSEND, MPI_Ssend, (I a, I b, I c, I d, I e, I f), (a, b, c, d, e, f),
            1, poll_p2p(ISSEND, a, b, c, d, e, f, 0))
WRAP(ISEND, MPI_Isend, (I a, I b, I c, I d, I e, I f, I g), (a, b, c, d, e, f, g))
WRAP(ISSEND, MPI_Issend, (I a, I b, I c, I d, I e, I f, I g), (a, b, c, d, e, f, g))
WRAP_POLLED(RECV, MPI_Recv, (I a, I b, I c, I d, I e, I f, I g), (a, b, c, d, e, f, g),
            1, poll_p2p(IRECV, a, b, c, d, e, f, g))
WRAP(IRECV, MPI_Irecv, (I a, I b, I c, I d, I e, I f, I g), (a, b, c, d, e, f, g))
WRAP_POLLED(WAIT, MPI_Wait, (I a, I b), (a, b), 1, poll_until_done(0, 0, a, b))
WRAP_POLLED(WAITALL, MPI_Waitall, (I a, I b, I c), (a, b, c), 1, poll_until_done(1, a, b, c))
WRAP(ALLREDUCE, MPI_Allreduce, (I a, I b, I c, I d, I e, I f), (a, b, c, d, e, f))
WRAP(REDUCE, MPI_Reduce, (I a, I b, I c, I d, I e, I f, I g), (a, b, c, d, e, f, g))
WRAP(BARRIER, MPI_Barrier, (I a), (a))
WRAP(BCAST, MPI_Bcast, (I a, I b, I c, I d, I e), (a, b, c, d, e))
WRAP(IPROBE, MPI_Iprobe, (I a, I b, I c, I d, I e), (a, b, c, d, e))

/* The BLAS calls return nothing and cblas_dgemm passes alpha and beta in
 * floating-point registers, so they get their real prototypes. HPL calls
 * cblas_dgemm: on a 1x1 grid it is the only place a slowdown can show. */
void cblas_dgemm(int order, int ta, int tb, int m, int n, int k, double alpha,
                 const double *a, int lda, const double *b, int ldb, double beta,
                 double *c, int ldc)
{
    typedef void (*fn_t)(int, int, int, int, int, int, double, const double *, int,
                         const double *, int, double, double *, int);
    fn_t fn = (fn_t)resolve(CBLAS_DGEMM);
    if (hang_call == CBLAS_DGEMM)
        hang_point();
    int on = ACTIVE(CBLAS_DGEMM), work = work_enter();
    int64_t before = on ? others() : 0, t0 = on ? tb_now_ns() : 0;
    depth += on || work;
    fn(order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    depth -= on || work;
    if (on && fixed_ns)
        wait_fixed();
    else if (on)
        pad(t0, before);
    work_leave(work);
}

/* Fortran dgemm_: 13 pointers, then gfortran's two hidden lengths of the
 * TRANS strings (integer class too). */
void dgemm_(I a, I b, I c, I d, I e, I f, I g, I h, I i, I j, I k, I l, I m, I n, I o)
{
    typedef void (*fn_t)(I, I, I, I, I, I, I, I, I, I, I, I, I, I, I);
    fn_t fn = (fn_t)resolve(DGEMM);
    if (hang_call == DGEMM)
        hang_point();
    int on = ACTIVE(DGEMM), work = work_enter();
    int64_t before = on ? others() : 0, t0 = on ? tb_now_ns() : 0;
    depth += on || work;
    fn(a, b, c, d, e, f, g, h, i, j, k, l, m, n, o);
    depth -= on || work;
    if (on && fixed_ns)
        wait_fixed();
    else if (on)
        pad(t0, before);
    work_leave(work);
}

/* Says, once per process, that the shim is active in it: at MPI_Init, or for a PVM task
 * (which has none) at its first pvm_send or pvm_recv. */
static void announce(void)
{
    static int done;
    if (__atomic_exchange_n(&done, 1, __ATOMIC_RELAXED))
        return;
    if (copies)
        fprintf(stderr, "slowdown: active copy x%g of every send buffer (pid %d)\n", copies,
                (int)getpid());
    if (extra > 0.0) {
        char list[512] = "";
        for (int i = 0; i < NCALLS; i++)
            if ((slowed >> i) & 1u)
                snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s",
                         *list ? "," : "", names[i]);
        if (fixed_ns)
            fprintf(stderr, "slowdown: active fixed +%ldns on %s%s (pid %d)\n", fixed_ns, list,
                    sends_before ? ", sends padded before" : "", (int)getpid());
        else
            fprintf(stderr, "slowdown: active factor %g on %s%s%s%s%s (pid %d)\n", extra + 1.0,
                    list, *list && slow_work ? "," : "", slow_work ? "work" : "",
                    sends_before ? ", sends padded before" : "",
                    polls ? ", waits polled" : "", (int)getpid());
    }
}

/* Not slowed: says, once per rank, that the shim reached it. */
int MPI_Init(I argc, I argv)
{
    int rc = ((int (*)(I, I))resolve(INIT))(argc, argv);
    if (hang_call >= 0 && my_rank < 0)
        bad("TESTBED_SLOWDOWN_HANG", hang_setting, "this rank's launcher set none of PMI_RANK, "
            "PMIX_RANK, OMPI_COMM_WORLD_RANK, LAMRANK, SLURM_PROCID, MV2_COMM_WORLD_RANK: "
            "no rank to hang");
    if (hang_call >= 0 && my_rank == hang_rank)
        fprintf(stderr, "slowdown: hang armed: %s call %ld on rank %d (pid %d)\n",
                names[hang_call], hang_nth, hang_rank, (int)getpid());
    announce();
    return rc;
}

/* PVM's blocking send and receive (int tid, int msgtag), as p2p-pvm's pvm_send/pvm_recv
 * cases call them; a PVM task says the shim is active at its first one. */
#define WRAP_PVM(i, name)                                            \
    WRAP(i, name##_slowed, (I a, I b), (a, b))                       \
    int name(I a, I b)                                               \
    {                                                                \
        announce();                                                  \
        return name##_slowed(a, b);                                  \
    }

WRAP_PVM(PVM_SEND, pvm_send)
WRAP_PVM(PVM_RECV, pvm_recv)
