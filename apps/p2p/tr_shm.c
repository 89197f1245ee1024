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
 * the shared-memory paths of MPI libraries do for large messages. The pipe
 * is common/tb_raw.h's, which su3's exchange and HPL's panel copy use too.
 *
 * The protocol is safe for a ping-pong only: a side writes the next payload
 * of its direction after the partner's reply, i.e. after the partner has
 * copied the previous one out. */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "../common/tb_raw.h"
#include "control.h"
#include "transport.h"

/* Each direction's `ready` counts every byte ever published that way
 * (tb_raw.h); a message starts where the previous one ended, so no flag is
 * ever reset. */
struct shm_state {
    void *seg;
    size_t seglen;
    struct tb_raw_lane *out, *in;
    uint64_t sent, got;
    void *buf;
    long want, last;
};

static size_t round_line(long n)
{
    return ((size_t)n + TB_RAW_LINE - 1) / TB_RAW_LINE * TB_RAW_LINE;
}

/* Rank 0 makes the segment and names it; rank 1 maps it; the name is gone
 * from /dev/shm as soon as both have it, so no run can leave one behind. */
static int shm_setup(struct tport *t, long maxsize, char *err, size_t errlen)
{
    struct shm_state *s = t->state;
    int me = ctl_rank();
    size_t area = sizeof(struct tb_raw_lane) + round_line(maxsize);
    char name[64] = "";
    int ok, partner_ok;

    s->seglen = 2 * area;
    s->seg = me == 0 ? tb_raw_segment_create("p2p", s->seglen, name, sizeof name) : NULL;
    ctl_bcast_bytes(name, (int)sizeof name);
    if (me == 1 && name[0])
        s->seg = tb_raw_segment_attach(name, s->seglen);
    ok = s->seg != NULL;
    partner_ok = ctl_exchange_int(ok);
    if (me == 0)
        tb_raw_segment_unlink(name);
    if (!ok || !partner_ok) {
        tb_raw_segment_unmap(s->seg, s->seglen);
        s->seg = NULL;
        snprintf(err, errlen, "no shared segment between the two ranks (%s)",
                 ok ? "the partner could not map it: another node?" :
                      "this rank could not map it");
        return -1;
    }
    unsigned char *base = s->seg;
    struct tb_raw_lane *d0 = (struct tb_raw_lane *)base;
    struct tb_raw_lane *d1 = (struct tb_raw_lane *)(base + area);
    s->out = me == 0 ? d0 : d1;
    s->in = me == 0 ? d1 : d0;
    if (me == 0)
        memset(base, 0, s->seglen); /* every page in before any timing */
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

/* The receiver spins with the pause hint and never yields: the two ranks
 * have a core each, and this is the floor of their latency. */
static void shm_send(struct tport *t, const void *buf, int n)
{
    struct shm_state *s = t->state;
    s->out->len = n; /* published with the first chunk (release) */
    tb_raw_pipe_write(&s->out->ready, s->out->data, buf, n, s->sent);
    s->sent += (uint64_t)(n > 0 ? n : 0);
}

static void shm_recv(struct tport *t)
{
    struct shm_state *s = t->state;
    tb_raw_pipe_read(&s->in->ready, s->in->data, s->buf, s->want, s->got, TB_SPIN_PAUSE);
    s->last = s->in->len;
    s->got += (uint64_t)s->want;
}

static long shm_received(struct tport *t) { return ((struct shm_state *)t->state)->last; }

static void shm_cleanup(struct tport *t)
{
    struct shm_state *s = t->state;
    tb_raw_segment_unmap(s->seg, s->seglen);
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
