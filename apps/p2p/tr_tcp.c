/* p2p: raw TCP, the layer MPI runs on between nodes (Turner & Chen measured
 * every library against it). One connected socket between the two ranks,
 * TCP_NODELAY, the message bytes and nothing else (no header: the receiver
 * knows the size it posted, as NetPIPE's TCP module does).
 *
 * Two ways to wait, as two transports:
 *   tcp       blocking recv(): the process sleeps until data arrives;
 *   tcp_poll  non-blocking recv() in a spin loop: no wake-up on the path,
 *             as the busy-polling progress engines of MPI libraries do.
 *
 * Where the bytes go: between two ranks of one host, loopback; between two
 * hosts, rank 0's address in a network given with --tcp-networks (a site's
 * nodes' own, from its configuration) or else in 198.18.0.0/15 (the range the
 * testbed's emulated nodes use). Nothing else is ever contacted: without such
 * an address the transport reports itself unavailable, and rank 1 refuses to
 * connect to an address outside them. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "control.h"
#include "p2p.h"
#include "transport.h"

struct tcp_state {
    int fd;
    int poll;
    void *buf;
    long want, last;
};

/* 198.18.0.0/15: 198.18.x.x and 198.19.x.x */
static int benchmark_net(struct in_addr a)
{
    unsigned long h = ntohl(a.s_addr);
    return (h >> 17) == ((198UL << 7) | (18UL >> 1));
}

/* Index of the --tcp-networks entry holding a, or -1. */
static int configured_net(struct in_addr a)
{
    unsigned long h = ntohl(a.s_addr);
    for (int k = 0; k < p2p_tcp_nnets; k++)
        if ((h & p2p_tcp_nets[k].mask) == p2p_tcp_nets[k].addr)
            return k;
    return -1;
}

static int allowed(struct in_addr a)
{
    return configured_net(a) >= 0 || benchmark_net(a);
}

/* This host's address to listen on: one in the first configured network that
 * holds one (the site named them in its order), else one in 198.18.0.0/15. */
static int local_address(struct in_addr *out)
{
    struct ifaddrs *ifa, *i;
    int best = P2P_MAX_TCP_NETS + 1;
    if (getifaddrs(&ifa) != 0)
        return 0;
    for (i = ifa; i; i = i->ifa_next)
        if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET) {
            struct in_addr a = ((struct sockaddr_in *)i->ifa_addr)->sin_addr;
            int k = configured_net(a);
            int rank = k >= 0 ? k : benchmark_net(a) ? P2P_MAX_TCP_NETS : best;
            if (rank < best) {
                *out = a;
                best = rank;
            }
        }
    freeifaddrs(ifa);
    return best <= P2P_MAX_TCP_NETS;
}

/* The networks allowed, for a refusal's message: "10.1.0.0/16, 198.18.0.0/15". */
static void allowed_text(char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int k = 0; k < p2p_tcp_nnets && used < len; k++) {
        struct in_addr a = { htonl((uint32_t)p2p_tcp_nets[k].addr) };
        char text[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, &a, text, sizeof text);
        used += (size_t)snprintf(buf + used, len - used, "%s/%d, ", text,
                                 p2p_tcp_nets[k].bits);
    }
    if (used < len)
        snprintf(buf + used, len - used, "198.18.0.0/15");
}

static int tune(int fd)
{
    int one = 1;
    return setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static int tcp_setup(struct tport *t, long maxsize, char *err, size_t errlen)
{
    struct tcp_state *s = t->state;
    int me = ctl_rank();
    char host[256] = "", other[256] = "";
    (void)maxsize;
    gethostname(host, sizeof host - 1);
    ctl_exchange_bytes(host, other, (int)sizeof host);
    other[sizeof other - 1] = '\0';
    int same_host = strcmp(host, other) == 0;

    /* Rank 0 listens and says where: {ok, address, port}. */
    struct { int ok; struct in_addr addr; unsigned short port; char why[144]; } where;
    memset(&where, 0, sizeof where);
    int lfd = -1;
    s->fd = -1;
    if (me == 0) {
        struct sockaddr_in sa;
        socklen_t len = sizeof sa;
        memset(&sa, 0, sizeof sa);
        sa.sin_family = AF_INET;
        if (same_host)
            sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        else if (!local_address(&sa.sin_addr)) {
            char nets[64];
            allowed_text(nets, sizeof nets);
            snprintf(where.why, sizeof where.why, "no address in %s on %s: raw TCP goes "
                     "to loopback or those networks only (--tcp-networks)", nets, host);
        }
        if (!where.why[0]) {
            lfd = socket(AF_INET, SOCK_STREAM, 0);
            if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
                listen(lfd, 1) != 0 || getsockname(lfd, (struct sockaddr *)&sa, &len) != 0)
                snprintf(where.why, sizeof where.why, "listen: %s", strerror(errno));
            else {
                where.ok = 1;
                where.addr = sa.sin_addr;
                where.port = sa.sin_port;
            }
        }
    }
    ctl_bcast_bytes(&where, (int)sizeof where);
    if (!where.ok) {
        if (lfd >= 0)
            close(lfd);
        snprintf(err, errlen, "%s", where.why);
        return -1;
    }
    /* Rank 1 keeps to its own options too, and says so before rank 0 waits in accept(). */
    int go = me == 0 || same_host || allowed(where.addr);
    if (!go)
        snprintf(err, errlen, "rank 0 offered %s, outside the networks allowed (--tcp-networks)",
                 inet_ntoa(where.addr));
    if (!ctl_exchange_int(go) || !go) {
        if (lfd >= 0)
            close(lfd);
        if (go)
            snprintf(err, errlen, "rank 1 refused this address (its --tcp-networks differ)");
        return -1;
    }
    int ok = 1;
    if (me == 1) {
        struct sockaddr_in sa;
        memset(&sa, 0, sizeof sa);
        sa.sin_family = AF_INET;
        sa.sin_addr = where.addr;
        sa.sin_port = where.port;
        s->fd = socket(AF_INET, SOCK_STREAM, 0);
        ok = s->fd >= 0 && connect(s->fd, (struct sockaddr *)&sa, sizeof sa) == 0 &&
             tune(s->fd) == 0;
        if (!ok)
            snprintf(err, errlen, "connect to %s:%u: %s", inet_ntoa(where.addr),
                     ntohs(where.port), strerror(errno));
    } else {
        s->fd = accept(lfd, NULL, NULL);
        ok = s->fd >= 0 && tune(s->fd) == 0;
        if (!ok)
            snprintf(err, errlen, "accept: %s", strerror(errno));
        close(lfd);
    }
    int partner_ok = ctl_exchange_int(ok);
    if (!ok || !partner_ok) {
        if (s->fd >= 0)
            close(s->fd);
        s->fd = -1;
        if (ok)
            snprintf(err, errlen, "the partner could not connect");
        return -1;
    }
    return 0;
}

static void tcp_post(struct tport *t, void *buf, int n)
{
    struct tcp_state *s = t->state;
    s->buf = buf;
    s->want = n;
}

static void die(const char *what)
{
    fprintf(stderr, "p2p: tcp: %s: %s\n", what, errno ? strerror(errno) : "peer closed");
    ctl_abort(3);
}

static void tcp_send(struct tport *t, const void *buf, int n)
{
    struct tcp_state *s = t->state;
    const char *p = buf;
    long off = 0;
    while (off < n) {
        ssize_t k = send(s->fd, p + off, (size_t)(n - off), MSG_NOSIGNAL);
        if (k > 0)
            off += k;
        else if (k < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        else
            die("send");
    }
}

static void tcp_recv(struct tport *t)
{
    struct tcp_state *s = t->state;
    char *p = s->buf;
    long off = 0;
    int flags = s->poll ? MSG_DONTWAIT : 0;
    while (off < s->want) {
        ssize_t k = recv(s->fd, p + off, (size_t)(s->want - off), flags);
        if (k > 0)
            off += k;
        else if (k < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
            continue;
        else {
            if (k == 0)
                errno = 0;
            die("recv");
        }
    }
    s->last = off;
}

static long tcp_received(struct tport *t) { return ((struct tcp_state *)t->state)->last; }

static void tcp_cleanup(struct tport *t)
{
    struct tcp_state *s = t->state;
    if (s->fd >= 0)
        close(s->fd);
    s->fd = -1;
}

/* Slots (modes.c): a send goes out at once, blocking until the socket has
 * taken every byte (the kernel's buffer is the only queue); a receive notes
 * its buffer and is read in its wait, in the order posted, as the byte stream
 * delivers them. So messages stay outstanding in one direction (flood,
 * overlap, window) but not both at once: two ranks blocked in send() on full
 * buffers would wait for each other (duplex 0: no bidirectional window). */
static struct { void *buf; long want, got; } tcp_slot[P2P_MAX_SLOTS];

static void tcp_isend(struct tport *t, int slot, const void *buf, int n)
{
    tcp_slot[slot].got = 0;                 /* a send: nothing to read in a wait */
    tcp_send(t, buf, n);
}

static void tcp_irecv(struct tport *t, int slot, void *buf, int n)
{
    (void)t;
    tcp_slot[slot].buf = buf;
    tcp_slot[slot].want = n;
    tcp_slot[slot].got = -1;
}

static void tcp_waitslots(struct tport *t, int first, int count)
{
    struct tcp_state *s = t->state;
    for (int k = first; k < first + count; k++)
        if (tcp_slot[k].got < 0) {          /* a receive still pending */
            s->buf = tcp_slot[k].buf;
            s->want = tcp_slot[k].want;
            tcp_recv(t);
            tcp_slot[k].got = s->last;
        }
}

static long tcp_slot_received(struct tport *t, int slot)
{
    (void)t;
    return tcp_slot[slot].got;
}

void tr_tcp_init(struct tport *t, int poll)
{
    static struct tcp_state st[2];
    struct tcp_state *s = &st[poll ? 1 : 0];
    memset(s, 0, sizeof *s);
    s->fd = -1;
    s->poll = poll;
    t->name = poll ? "tcp_poll" : "tcp";
    t->pair = "socket";
    t->variant = "complete";
    t->preposted = 0;
    t->local = 0;
    t->state = s;
    t->setup = tcp_setup;
    t->post = tcp_post;
    t->send = tcp_send;
    t->recv = tcp_recv;
    t->received = tcp_received;
    t->cleanup = tcp_cleanup;
    t->isend = tcp_isend;
    t->irecv = tcp_irecv;
    t->wait = tcp_waitslots;
    t->slot_received = tcp_slot_received;
    t->duplex = 0;
}
