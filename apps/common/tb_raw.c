/* The raw layer (tb_raw.h). */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>
#include "tb_clock.h"
#include "tb_median.h"
#include "tb_raw.h"

volatile unsigned char tb_raw_sink; /* read_back's byte of each copy goes here */

/* `copies` copies back and forth between a and b, the first from a to b. */
static void back_and_forth(char *a, char *b, long bytes, int copies, int read_back)
{
    if (!read_back) {
        for (int c = 0; c < copies; c++)
            tb_raw_copy(c % 2 ? a : b, c % 2 ? b : a, (size_t)bytes);
        return;
    }
    for (int c = 0; c < copies; c++) {
        memcpy(c % 2 ? a : b, c % 2 ? b : a, (size_t)bytes);
        tb_raw_sink = (unsigned char)(c % 2 ? a : b)[bytes / 2];
    }
}

double tb_raw_memcpy_s(char *const *bufs, int pairs, long bytes, const struct tb_copy_method *m,
                       double *t)
{
    double best = -1.0, t0 = tb_now_s();
    do
        for (int p = 0; p < pairs; p++)
            back_and_forth(bufs[2 * p], bufs[2 * p + 1], bytes, m->per_sample, m->read_back);
    while (tb_now_s() - t0 < m->warm_s);
    int n = 0;
    for (double start = tb_now_s(); n < m->samples_max &&
         (n < m->samples_min || tb_now_s() - start < m->sample_s); n++)
        for (int p = 0; p < pairs; p++) {
            double s0 = tb_now_s();
            back_and_forth(bufs[2 * p], bufs[2 * p + 1], bytes, m->per_sample, m->read_back);
            t[p * m->samples_max + n] = (tb_now_s() - s0) / m->per_sample;
        }
    for (int p = 0; p < pairs; p++) {
        double q = tb_lower_quartile(t + p * m->samples_max, n);
        if (best < 0 || q < best)
            best = q;
    }
    return best;
}

void tb_raw_wait(_Atomic uint64_t *count, uint64_t at_least, enum tb_spin spin)
{
    if (spin == TB_SPIN_PAUSE) {
        while (atomic_load_explicit(count, memory_order_acquire) < at_least) {
#if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();
#endif
        }
        return;
    }
    for (long spins = 1; atomic_load_explicit(count, memory_order_acquire) < at_least; spins++)
        if (spins % 4096 == 0)
            sched_yield();
}

void tb_raw_put(_Atomic uint64_t *published, unsigned char *data, const void *src, long off,
                long len, uint64_t base)
{
    memcpy(data + off, (const unsigned char *)src + off, (size_t)len);
    atomic_store_explicit(published, base + (uint64_t)(off + len), memory_order_release);
}

void tb_raw_get(_Atomic uint64_t *published, const unsigned char *data, void *dst, long off,
                long len, uint64_t base, enum tb_spin spin)
{
    tb_raw_wait(published, base + (uint64_t)(off + len), spin);
    memcpy((unsigned char *)dst + off, data + off, (size_t)len);
}

void tb_raw_pipe_write(_Atomic uint64_t *published, unsigned char *data, const void *src,
                       long bytes, uint64_t base)
{
    for (long off = 0; off < bytes; off += TB_RAW_CHUNK)
        tb_raw_put(published, data, src, off,
                   bytes - off < TB_RAW_CHUNK ? bytes - off : TB_RAW_CHUNK, base);
}

void tb_raw_pipe_read(_Atomic uint64_t *published, const unsigned char *data, void *dst,
                      long bytes, uint64_t base, enum tb_spin spin)
{
    for (long off = 0; off < bytes; off += TB_RAW_CHUNK)
        tb_raw_get(published, data, dst, off,
                   bytes - off < TB_RAW_CHUNK ? bytes - off : TB_RAW_CHUNK, base, spin);
}

/* The name's last part: microseconds, so that a pid reused after a killed run whose name
 * was never unlinked does not collide with it. */
void *tb_raw_segment_create(const char *what, size_t len, char *name, size_t namelen)
{
    snprintf(name, namelen, "/tb-%s-%ld-%ld", what, (long)getpid(),
             (long)(tb_now_s() * 1e6) % 1000000L);
    int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) {
        name[0] = '\0';   /* not ours (EEXIST: another's): never unlinked */
        return NULL;
    }
    void *seg = MAP_FAILED;
    if (ftruncate(fd, (off_t)len) == 0)
        seg = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (seg != MAP_FAILED)
        return seg;
    shm_unlink(name);
    name[0] = '\0';
    return NULL;
}

void *tb_raw_segment_attach(const char *name, size_t len)
{
    int fd = shm_open(name, O_RDWR, 0600);
    if (fd < 0)
        return NULL;
    void *seg = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    return seg == MAP_FAILED ? NULL : seg;
}

void tb_raw_segment_unlink(const char *name)
{
    if (name[0])
        shm_unlink(name);
}

void tb_raw_segment_unmap(void *seg, size_t len)
{
    if (seg)
        munmap(seg, len);
}
