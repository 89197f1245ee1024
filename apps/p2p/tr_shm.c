/* p2p: the shared-memory floor. Two processes, one shared segment; each
 * direction is a cache-line flag (a sequence number) and a payload area. A
 * message is copied in by the sender, the flag is released, the receiver
 * spins on it and copies the payload out: the work an eager shared-memory
 * transport cannot avoid, with nothing else. At 8 bytes it is the cache-line
 * flag ping-pong between the two pinned cores (the floor of any shared-memory
 * latency); at large sizes it moves the payload between the same two cores
 * the way an MPI library's copy-in/copy-out path does, so it sees how the two
 * cores share their caches, which memcpy on one core cannot.
 *
 * Copies are pipelined in chunks: the sender publishes each chunk as soon as
 * it is in (a running count of bytes published), and the receiver copies a
 * chunk out while the next is copied in, so the two cores work at once, as
 * the shared-memory paths of MPI libraries do for large messages.
 *
 * The protocol is safe for a ping-pong only: a side writes the next payload
 * of its direction after the partner's reply, i.e. after the partner has
 * copied the previous one out. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../common/tb_clock.h"
#include "control.h"
#include "transport.h"

#define LINE 64
#define CHUNK 32768L

/* `ready` counts every byte ever published in this direction; a message
 * starts where the previous one ended, so no flag is ever reset. */
struct dir_hdr {
    _Alignas(LINE) _Atomic uint64_t ready;
    long len;
    char pad[LINE - sizeof(uint64_t) - sizeof(long)];
};

struct shm_state {
    void *seg;
    size_t seglen;
    struct dir_hdr *out, *in;
    unsigned char *out_data, *in_data;
    uint64_t sent, got;
    void *buf;
    long want, last;
};

static inline void relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static size_t round_line(long n) { return ((size_t)n + LINE - 1) / LINE * LINE; }

/* Rank 0 makes the segment and names it; rank 1 maps it; the name is gone
 * from /dev/shm as soon as both have it, so no run can leave one behind. */
static int shm_setup(struct tport *t, long maxsize, char *err, size_t errlen)
{
    struct shm_state *s = t->state;
    int me = ctl_rank();
    size_t area = sizeof(struct dir_hdr) + round_line(maxsize);
    char name[64] = "";
    int fd = -1, ok, partner_ok;

    s->seglen = 2 * area;
    if (me == 0) {
        snprintf(name, sizeof name, "/tb-p2p-%ld-%ld", (long)getpid(),
                 (long)(tb_now_s() * 1e6) % 1000000L);
        fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
        if (fd >= 0 && ftruncate(fd, (off_t)s->seglen) != 0) {
            close(fd);
            fd = -1;
        }
    }
    ctl_bcast_bytes(name, (int)sizeof name);
    if (me == 1)
        fd = shm_open(name, O_RDWR, 0600);
    s->seg = fd < 0 ? MAP_FAILED : mmap(NULL, s->seglen, PROT_READ | PROT_WRITE,
                                        MAP_SHARED, fd, 0);
    if (fd >= 0)
        close(fd);
    ok = s->seg != MAP_FAILED;
    partner_ok = ctl_exchange_int(ok);
    if (me == 0 && name[1])
        shm_unlink(name);
    if (!ok || !partner_ok) {
        if (ok)
            munmap(s->seg, s->seglen);
        s->seg = NULL;
        snprintf(err, errlen, "no shared segment between the two ranks (%s)",
                 ok ? "the partner could not map it: another node?" :
                      "this rank could not map it");
        return -1;
    }
    unsigned char *base = s->seg;
    struct dir_hdr *d0 = (struct dir_hdr *)base;
    struct dir_hdr *d1 = (struct dir_hdr *)(base + area);
    s->out = me == 0 ? d0 : d1;
    s->in = me == 0 ? d1 : d0;
    s->out_data = (unsigned char *)(s->out + 1);
    s->in_data = (unsigned char *)(s->in + 1);
    if (me == 0)
        memset(base, 0, s->seglen);
    ctl_barrier(); /* the zeroed flags are seen before anyone sends */
    s->sent = s->got = 0; /* bytes published / consumed so far */
    return 0;
}

static void shm_post(struct tport *t, void *buf, int n)
{
    struct shm_state *s = t->state;
    s->buf = buf;
    s->want = n;
}

static void shm_send(struct tport *t, const void *buf, int n)
{
    struct shm_state *s = t->state;
    const unsigned char *src = buf;
    s->out->len = n; /* published with the first chunk (release) */
    long off = 0;
    do {
        long len = n - off < CHUNK ? n - off : CHUNK;
        memcpy(s->out_data + off, src + off, (size_t)len);
        off += len;
        atomic_store_explicit(&s->out->ready, s->sent + (uint64_t)off,
                              memory_order_release);
    } while (off < n);
    s->sent += (uint64_t)(n > 0 ? n : 0);
}

static void shm_recv(struct tport *t)
{
    struct shm_state *s = t->state;
    unsigned char *dst = s->buf;
    long n = s->want, off = 0;
    do {
        long len = n - off < CHUNK ? n - off : CHUNK;
        uint64_t need = s->got + (uint64_t)(off + len);
        while (atomic_load_explicit(&s->in->ready, memory_order_acquire) < need)
            relax();
        memcpy(dst + off, s->in_data + off, (size_t)len);
        off += len;
    } while (off < n);
    s->last = s->in->len;
    s->got += (uint64_t)n;
}

static long shm_received(struct tport *t) { return ((struct shm_state *)t->state)->last; }

static void shm_cleanup(struct tport *t)
{
    struct shm_state *s = t->state;
    if (s->seg)
        munmap(s->seg, s->seglen);
    s->seg = NULL;
}

void tr_shm_init(struct tport *t)
{
    static struct shm_state st;
    memset(&st, 0, sizeof st);
    t->name = "shm";
    t->pair = "copy";
    t->variant = "complete";
    t->preposted = 0;
    t->local = 0;
    t->state = &st;
    t->setup = shm_setup;
    t->post = shm_post;
    t->send = shm_send;
    t->recv = shm_recv;
    t->received = shm_received;
    t->cleanup = shm_cleanup;
}
