/* The raw layer under every MPI library, with no library in the way: memcpy on one core, the
 * copy between two cores through a shared segment (a cache-line count of the bytes published,
 * then the bytes), and the segment itself. The kernel copy (process_vm_readv) is tb_cma.h.
 * The baselines of p2p (tr_shm.c, tr_memcpy.c), su3's exchange (shm_exchange.c, su3_rmd.c)
 * and HPL's panels (panel_time.c): their figures are ratios over these, so each program's
 * method is kept as the arguments it passes, not as a copy of the code. */
#ifndef TB_RAW_H
#define TB_RAW_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define TB_RAW_LINE 64       /* a cache line: each count has one to itself */
#define TB_RAW_CHUNK 32768L  /* the pipeline's step, as the libraries' shared-memory paths */

/* One copy of n bytes that the compiler may neither drop nor merge with the next. */
static inline void tb_raw_copy(void *dst, const void *src, size_t n)
{
    memcpy(dst, src, n);
    __asm__ __volatile__("" : : "r"(dst) : "memory");
}

/* How a memcpy baseline is timed. Samples are taken in turn on each pair of buffers. */
struct tb_copy_method {
    double warm_s;      /* untimed rounds (per_sample copies on every pair) for this long;
                           one round at 0 */
    int per_sample;     /* copies per timed sample, back and forth within a pair */
    double sample_s;    /* samples for this long, */
    int samples_min;    /* but at least this many per pair */
    int samples_max;    /*   and at most this many */
    int read_back;      /* keep each copy by reading a byte of it, not by tb_raw_copy's
                           compiler fence: su3's baseline is taken so, and the fence alone
                           timed its copies slower when both were run in turn */
};

/* Seconds per memcpy of `bytes` between bufs[2p] and bufs[2p + 1] (the first copy of a
 * sample goes from bufs[2p] to bufs[2p + 1]), for `pairs` pairs: the lower quartile of each
 * pair's samples (tb_lower_quartile), the least over the pairs. t: room for pairs *
 * samples_max samples, the caller's, so that its buffers lie where it put them. */
double tb_raw_memcpy_s(char *const *bufs, int pairs, long bytes, const struct tb_copy_method *m,
                       double *t);

/* How a side waits for its partner's count. */
enum tb_spin {
    TB_SPIN_PAUSE,  /* the CPU's pause hint between reads, never giving up the core: two
                       ranks pinned to two cores (p2p's floor) */
    TB_SPIN_YIELD   /* bare reads, sched_yield every 4096: more ranks than cores must let
                       the partner run (HPL's 1x3 grid, any run beside other jobs) */
};

/* Until *count >= at_least (acquire: the bytes published up to there are visible). */
void tb_raw_wait(_Atomic uint64_t *count, uint64_t at_least, enum tb_spin spin);

/* The writer's step: copy bytes [off, off + len) of src into data and publish them
 * (*published = base + off + len, release); base is the count before this message. */
void tb_raw_put(_Atomic uint64_t *published, unsigned char *data, const void *src, long off,
                long len, uint64_t base);
/* The reader's step: wait until bytes [off, off + len) are published, copy them to dst. */
void tb_raw_get(_Atomic uint64_t *published, const unsigned char *data, void *dst, long off,
                long len, uint64_t base, enum tb_spin spin);

/* A whole message of `bytes` in TB_RAW_CHUNK steps, each published as soon as it is in, so
 * the reader copies one chunk out while the writer copies the next in, both cores at once.
 * Nothing at 0 bytes. The caller adds `bytes` to its base afterwards. */
void tb_raw_pipe_write(_Atomic uint64_t *published, unsigned char *data, const void *src,
                       long bytes, uint64_t base);
void tb_raw_pipe_read(_Atomic uint64_t *published, const unsigned char *data, void *dst,
                      long bytes, uint64_t base, enum tb_spin spin);

/* One direction of a segment as p2p and HPL lay it out: the count and the message's length
 * on one line, the bytes from the next. */
struct tb_raw_lane {
    _Alignas(TB_RAW_LINE) _Atomic uint64_t ready;   /* bytes ever published (never reset) */
    long len;                                       /* the last message's, if the user sets it */
    _Alignas(TB_RAW_LINE) unsigned char data[];
};

/* A segment shared by two processes of one host (POSIX shared memory). The creator makes it
 * under a fresh name, "/tb-<what>-<pid>-<us>", written to name (64 bytes do), and passes
 * the name on; the partner attaches; once both have mapped it, the creator unlinks the name,
 * so no run leaves one behind. Each returns the mapping (zeroed when created), or NULL; a
 * failed create leaves name empty, and unlink does nothing with an empty name. */
void *tb_raw_segment_create(const char *what, size_t len, char *name, size_t namelen);
void *tb_raw_segment_attach(const char *name, size_t len);
void tb_raw_segment_unlink(const char *name);
void tb_raw_segment_unmap(void *seg, size_t len);

#endif
