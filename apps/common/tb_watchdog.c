/* The hang watchdog of apps/ (tb_watchdog.h says what it does and why). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <link.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tb_watchdog.h"

unsigned long tb_watchdog_beats;

#define MAX_FRAMES 48
#define SHOWN_FRAMES 12

static struct {
    const char *program;
    int rank;
    double bound_s;
    pthread_t rank_thread;
    int stack_signal;   /* 0: none free, the record names the phase only */
    int running, stopped;
    char host[64];
} wd = { "", -1, 0.0, 0, 0, 0, 0, "" };

/* What the rank is in now, behind a sequence count (odd while the rank writes it), so that
 * the watchdog never reads a half-written state. */
static struct {
    unsigned seq;
    char phase[48], mode[96], size[48];
    long size_bytes;
} at;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void copy(char *dst, size_t len, const char *src)
{
    size_t n = src ? strnlen(src, len - 1) : 0;
    memcpy(dst, src ? src : "", n);
    dst[n] = '\0';
}

void tb_watchdog_at(const char *phase, const char *mode, const char *size, long size_bytes)
{
    unsigned s = at.seq;
    __atomic_store_n(&at.seq, s + 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    copy(at.phase, sizeof at.phase, phase);
    copy(at.mode, sizeof at.mode, mode);
    copy(at.size, sizeof at.size, size);
    at.size_bytes = size_bytes;
    __atomic_store_n(&at.seq, s + 2, __ATOMIC_RELEASE);
    tb_watchdog_beat();
}

void tb_watchdog_rank(int rank)
{
    __atomic_store_n(&wd.rank, rank, __ATOMIC_RELAXED);
}

void tb_watchdog_stop(void)
{
    __atomic_store_n(&wd.stopped, 1, __ATOMIC_RELEASE);
}

/* ---- the rank's stack, taken in its own thread by a signal ---- */

static void *frames[MAX_FRAMES];
static int nframes = -1, released;

/* The rank's thread stays here until the record is out: the signal may have ended the call
 * it was stuck in (EINTR), and it must not go on and exit before the record is written. */
static void on_stack_signal(int sig)
{
    int saved = errno;
    (void)sig;
    int n = backtrace(frames, MAX_FRAMES);  /* primed at start: no loading here */
    __atomic_store_n(&nframes, n, __ATOMIC_RELEASE);
    while (!__atomic_load_n(&released, __ATOMIC_ACQUIRE)) {
        struct timespec ms10 = { 0, 10000000 };
        nanosleep(&ms10, NULL);
    }
    errno = saved;
}

/* A real-time signal nobody handles (MPI libraries and launchers use the classic ones). */
static int free_signal(void)
{
    for (int sig = SIGRTMAX - 2; sig > SIGRTMIN + 2; sig--) {
        struct sigaction old;
        if (sigaction(sig, NULL, &old) == 0 && old.sa_handler == SIG_DFL &&
            !(old.sa_flags & SA_SIGINFO))
            return sig;
    }
    return 0;
}

/* Return address `addr` as the function it is in ("MPI_Recv"), or object+offset
 * ("p2p+0x2b10") where the object does not export it; 1 if it is a call into MPI or PVM. */
static int frame_name(void *addr, char *out, size_t len)
{
    Dl_info info;
    const ElfW(Sym) *sym = NULL;
    uintptr_t pc = (uintptr_t)addr - 1;    /* inside the call instruction's function */
    memset(&info, 0, sizeof info);
    if (!dladdr1((void *)pc, &info, (void **)&sym, RTLD_DL_SYMENT)) {
        snprintf(out, len, "%p", addr);
        return 0;
    }
    if (info.dli_sname && sym &&
        (sym->st_size == 0 || pc < (uintptr_t)info.dli_saddr + sym->st_size)) {
        const char *name = info.dli_sname;
        int mpi = !strncmp(name, "MPI_", 4) || !strncmp(name, "PMPI_", 5);
        if (!strncmp(name, "PMPI_", 5))
            name++;                          /* the profiling alias: the call made */
        snprintf(out, len, "%s", name);
        return (mpi && name[4] >= 'A' && name[4] <= 'Z') ||
               (!strncmp(name, "pvm_", 4) && name[4] >= 'a' && name[4] <= 'z');
    }
    const char *base = info.dli_fname ? strrchr(info.dli_fname, '/') : NULL;
    base = base ? base + 1 : info.dli_fname ? info.dli_fname : "?";
    snprintf(out, len, "%s+0x%lx", base, (unsigned long)(pc + 1 - (uintptr_t)info.dli_fbase));
    return 0;
}

/* ---- the record ---- */

/* `s` as a JSON string body into out (quotes and control characters escaped). */
static void json_text(const char *s, char *out, size_t len)
{
    size_t o = 0;
    for (; *s && o + 7 < len; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            out[o++] = '\\';
            out[o++] = (char)c;
        } else if (c < 0x20) {
            o += (size_t)snprintf(out + o, len - o, "\\u%04x", c);
        } else {
            out[o++] = (char)c;
        }
    }
    out[o] = '\0';
}

static void write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        p += w;
        n -= (size_t)w;
    }
}

static void fire(double stalled, double expected)
{
    char phase[sizeof at.phase], mode[sizeof at.mode], size[sizeof at.size];
    long size_bytes = -1;
    for (int tries = 0; tries < 1000; tries++) {
        unsigned s1 = __atomic_load_n(&at.seq, __ATOMIC_ACQUIRE);
        memcpy(phase, at.phase, sizeof phase);
        memcpy(mode, at.mode, sizeof mode);
        memcpy(size, at.size, sizeof size);
        size_bytes = at.size_bytes;
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (!(s1 & 1) && s1 == __atomic_load_n(&at.seq, __ATOMIC_RELAXED))
            break;
    }
    phase[sizeof phase - 1] = mode[sizeof mode - 1] = size[sizeof size - 1] = '\0';
    if (!size[0] && size_bytes >= 0)
        snprintf(size, sizeof size, "%ld B", size_bytes);

    /* The rank's stack: its handler records the return addresses; a rank whose thread does
     * not take the signal within a second is named by its phase alone. */
    int n = -1;
    int sig = __atomic_load_n(&wd.stack_signal, __ATOMIC_ACQUIRE);
    if (sig && pthread_kill(wd.rank_thread, sig) == 0)
        for (int k = 0; k < 100 && (n = __atomic_load_n(&nframes, __ATOMIC_ACQUIRE)) < 0; k++) {
            struct timespec ms10 = { 0, 10000000 };
            nanosleep(&ms10, NULL);
        }
    char call[64] = "", stack[1024] = "", name[128], esc[256];
    size_t o = 0;
    int shown = 0;
    /* frames[0] is the handler, frames[1] the kernel's signal return: skip both */
    for (int i = n - 1; i >= 2; i--)          /* the outermost call into the library */
        if (frame_name(frames[i], name, sizeof name) && !call[0])
            snprintf(call, sizeof call, "%.63s", name);
    for (int i = 2; i < n && shown < SHOWN_FRAMES && o + 80 < sizeof stack; i++, shown++) {
        frame_name(frames[i], name, sizeof name);
        json_text(name, esc, sizeof esc);
        o += (size_t)snprintf(stack + o, sizeof stack - o, "%s\"%.60s\"", shown ? "," : "", esc);
    }

    char line[4096], e_prog[128], e_phase[128], e_mode[256], e_size[128], e_call[128],
        e_host[160];
    json_text(wd.program, e_prog, sizeof e_prog);
    json_text(phase, e_phase, sizeof e_phase);
    json_text(mode, e_mode, sizeof e_mode);
    json_text(size, e_size, sizeof e_size);
    json_text(call[0] ? call : phase, e_call, sizeof e_call);
    json_text(wd.host, e_host, sizeof e_host);
    char bytes[40] = "";
    if (size_bytes >= 0)
        snprintf(bytes, sizeof bytes, ",\"size_bytes\":%ld", size_bytes);
    int len = snprintf(line, sizeof line,
                       "TB-HUNG {\"program\":\"%s\",\"rank\":%d,\"pid\":%d,\"host\":\"%s\","
                       "\"call\":\"%s\",\"call_from\":\"%s\",\"phase\":\"%s\",\"mode\":\"%s\","
                       "\"size\":\"%s\"%s,\"stalled_s\":%.1f,\"timeout_s\":%g,"
                       "\"expected_s\":%.1f,\"beats\":%lu,\"stack\":[%s]}\n",
                       e_prog, __atomic_load_n(&wd.rank, __ATOMIC_RELAXED), (int)getpid(),
                       e_host, e_call, call[0] ? "stack" : "program", e_phase, e_mode, e_size,
                       bytes, stalled, wd.bound_s, expected,
                       __atomic_load_n(&tb_watchdog_beats, __ATOMIC_RELAXED), stack);
    if (len < 0 || len >= (int)sizeof line)
        len = (int)strlen(line);
    write_all(1, line, (size_t)len);
    write_all(2, line, (size_t)len);
    /* Some launchers tear the job down before they forward what a rank wrote last. */
    struct timespec pause = { 1, 0 };
    nanosleep(&pause, NULL);
    if (!__atomic_load_n(&wd.stopped, __ATOMIC_ACQUIRE))
        _exit(TB_WATCHDOG_EXIT);
    __atomic_store_n(&released, 1, __ATOMIC_RELEASE);
}

/* ---- the watchdog's thread ---- */

static void *watch(void *arg)
{
    (void)arg;
    /* Set up here rather than in tb_watchdog_start: loading the unwinder costs a few hundred
     * microseconds, which the rank's thread would spend before MPI_Init (startup times it). */
    gethostname(wd.host, sizeof wd.host - 1);
    void *prime[2];
    backtrace(prime, 2);          /* loads the unwinder now, not in the signal handler */
    int sig = free_signal();
    if (sig) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_stack_signal;
        sa.sa_flags = SA_RESTART;
        sigemptyset(&sa.sa_mask);
        if (sigaction(sig, &sa, NULL) == 0)
            __atomic_store_n(&wd.stack_signal, sig, __ATOMIC_RELEASE);
    }
    /* A tick of a tenth of the bound, at most a second: a few microseconds of this thread
     * a second, next to the rank's own core or on it. */
    double tick = wd.bound_s / 10 < 1.0 ? wd.bound_s / 10 : 1.0;
    if (tick < 0.01)
        tick = 0.01;
    struct timespec ts = { (time_t)tick, (long)((tick - (double)(time_t)tick) * 1e9) };
    unsigned long seen = __atomic_load_n(&tb_watchdog_beats, __ATOMIC_RELAXED);
    double since = now_s(), longest = 0.0;
    for (;;) {
        while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, NULL) == EINTR)
            ;
        if (__atomic_load_n(&wd.stopped, __ATOMIC_ACQUIRE))
            return NULL;
        unsigned long b = __atomic_load_n(&tb_watchdog_beats, __ATOMIC_RELAXED);
        double t = now_s();
        if (b != seen) {
            /* the longest gap between beats seen so far is the step to expect */
            if (t - since > longest)
                longest = t - since;
            seen = b;
            since = t;
        } else if (t - since > wd.bound_s + longest) {
            fire(t - since, longest);
        }
    }
}

int tb_watchdog_start(const char *program, int rank, char *err, size_t errlen)
{
    const char *v = getenv("TESTBED_HANG_TIMEOUT_S");
    double bound = TB_WATCHDOG_DEFAULT_S;
    if (v && *v) {
        char *end;
        errno = 0;
        bound = strtod(v, &end);
        if (end == v || *end || errno || !isfinite(bound) || bound < 0 ||
            bound > TB_WATCHDOG_MAX_S) {
            snprintf(err, errlen, "TESTBED_HANG_TIMEOUT_S='%s': expected seconds from 0 "
                     "(no watchdog) to %.0f, e.g. 30", v, TB_WATCHDOG_MAX_S);
            return 2;
        }
    }
    wd.program = program;
    tb_watchdog_rank(rank >= 0 ? rank : tb_launcher_rank());
    if (bound == 0 || wd.running)
        return 0;
    wd.bound_s = bound;
    wd.rank_thread = pthread_self();
    /* Every signal blocked in the watchdog's thread: the process's signals (the launcher's,
     * tb_finalize.h's alarm) stay the rank's. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_t attr;
    pthread_t t;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    int rc = pthread_create(&t, &attr, watch, NULL);
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc) {
        fprintf(stderr, "%s: no hang watchdog (pthread_create: %s): a hang waits for the "
                "job's time limit\n", program, strerror(rc));
        return 0;
    }
    wd.running = 1;
    return 0;
}
