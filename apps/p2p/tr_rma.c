/* p2p: the MPI one-sided transport. The payload moves by MPI_Put into the
 * partner's window, or by MPI_Get from it, and a synchronisation tells the
 * receiving side that the data is there (the "completion" of the message):
 *
 *   fence  MPI_Win_fence, collective over the window: one per Put message;
 *          Get needs two (data ready, then read done).
 *   pscw   generalised active target: the receiver of a Put exposes its
 *          window (MPI_Win_post .. MPI_Win_wait), the origin accesses it
 *          (MPI_Win_start, Put, MPI_Win_complete); for Get the sender of
 *          the message exposes its send buffer and the reader accesses it.
 *   flush  passive target (MPI-3): MPI_Win_lock_all once, MPI_Put then
 *          MPI_Win_flush (the data is complete at the target), then a
 *          notification counter in a second window, see notify().
 *
 * The windows are the driver's own buffers (MPI_Win_create over the whole
 * arena; OSU's "-w create"), so the payload check reads what RMA wrote,
 * with no copy in between. A message of slot k lands at displacement k *
 * stride on the partner: both ranks walk the same ring in step, so the
 * displacement of my send slot is that of the partner's receive slot.
 *
 * send() returns only when the send buffer may be reused (as MPI_Send):
 * for Put once the Put is complete at the origin, for Get once the reader
 * said its Get is done. Without that, a Get could read the next sample's
 * pattern (the payload check caught exactly this).
 *
 * The modes of modes.c (flood, overlap, streams: several messages in flight)
 * run Put with flush only, over a window of their own: the receive slots,
 * `stride` bytes apart, and an ack slot after them. isend starts a Put into
 * the partner's slot of the same index (mod P2P_MAX_Q); a wait over send
 * slots flushes every Put started (complete at the target) and then adds
 * their number to the partner's arrival counter; a wait over receive slots
 * polls that counter for as many arrivals. The receiver grants no credits:
 * the sender owns the ring of slots, as a one-sided layer's sender owns the
 * remote buffers it writes. fence and pscw open an epoch per message or
 * batch, collective or matched, and are left to the ping-pong.
 *
 * LAM 7.1 (MPI_VERSION 1.2, with MPI-2 one-sided) has no lock_all/flush:
 * flush is compiled out under MPI_VERSION < 3 and reported unsupported. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "p2p.h"
#include "transport.h"

#if defined(MPI_VERSION) && MPI_VERSION >= 3
#define HAVE_MPI3_RMA 1
#else
#define HAVE_MPI3_RMA 0
#endif

const char *const p2p_rma_op_names[P2P_RMA_NOPS] = { "Put", "Get" };
const char *const p2p_rma_sync_names[P2P_RMA_NSYNCS] = { "fence", "pscw", "flush" };

struct rma_state {
    MPI_Comm comm;
    MPI_Win win;          /* over the receive arena (Put) or send arena (Get) */
    MPI_Group peer_grp;   /* pscw: the partner alone */
    int op, sync, me, peer;
    unsigned char *send_base, *recv_base;
    size_t len;
    void *buf;            /* the posted receive */
    int n;
#if HAVE_MPI3_RMA
    MPI_Win flag_win;     /* flush: counters[0] arrivals (Put) or "ready"
                             (Get), counters[1] "read done" (Get) */
    long *counters;       /* [2], a page of the heap: see rma_setup */
    long seen[2];         /* what this rank has waited for so far */
#endif
    /* the modes (tr_rma_modes_init): the window is their receive slots */
    size_t stride;        /* between receive slots */
    MPI_Aint ack_disp;    /* where an ack lands in the partner's window */
    const void *ack_send; /* the buffer acks are sent from */
    long pending;         /* Puts started and not yet flushed and counted */
    int slot_n[P2P_MAX_SLOTS];          /* bytes posted in a receive slot */
    unsigned char is_send[P2P_MAX_SLOTS];
};

static struct rma_state st; /* one RMA channel per run */

int tr_rma_supported(int sync, char *why, size_t len)
{
    if (sync == RMA_FLUSH && !HAVE_MPI3_RMA) {
        snprintf(why, len, "passive-target flush needs MPI-3 RMA (MPI_Win_lock_all,"
                 " MPI_Win_flush); this library is MPI %d.%d", MPI_VERSION,
                 MPI_SUBVERSION);
        return 0;
    }
    return 1;
}

#if HAVE_MPI3_RMA
/* The flush notification. The origin first makes the payload complete at
 * the target (MPI_Win_flush on the data window), and only then adds 1 to a
 * counter in the target's flag window, with MPI_Accumulate (atomic with
 * respect to other accumulates) and flushes that. The target polls its own
 * counter with MPI_Win_sync (which, in the unified memory model that setup
 * requires, makes remote updates visible to local loads) and an atomic load;
 * between polls an MPI_Iprobe drives progress for libraries whose RMA needs
 * the target to enter MPI. (Reading it with MPI_Fetch_and_op to self was
 * tried first: MPICH 4.0 over UCX livelocked in its self active messages.)
 * Seeing count n means message n arrived; MPI_Win_sync on the data window
 * then makes the payload visible to the plain loads of the payload check. */
static void notify_n(struct rma_state *s, int which, long n)
{
    MPI_Accumulate(&n, 1, MPI_LONG, s->peer, which, 1, MPI_LONG, MPI_SUM,
                   s->flag_win);
    MPI_Win_flush(s->peer, s->flag_win);
}

static void notify(struct rma_state *s, int which) { notify_n(s, which, 1); }

/* Until counter `which` shows n more arrivals than this rank waited for. */
static void await_n(struct rma_state *s, int which, long n)
{
    long want = s->seen[which] += n;
    int flag;
    for (;;) {
        MPI_Win_sync(s->flag_win);
        if (__atomic_load_n(&s->counters[which], __ATOMIC_ACQUIRE) >= want)
            break;
        MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, s->comm, &flag, MPI_STATUS_IGNORE);
        MPI_Win_flush(s->peer, s->flag_win); /* progress on this window */
    }
    MPI_Win_sync(s->win);
}

static void await(struct rma_state *s, int which) { await_n(s, which, 1); }
#endif

static int rma_setup(struct tport *t, long maxsize, char *err, size_t len)
{
    struct rma_state *s = t->state;
    MPI_Group all;
    (void)maxsize;
    if (!tr_rma_supported(s->sync, err, len))
        return -1;
    MPI_Comm_dup(MPI_COMM_WORLD, &s->comm);
    MPI_Comm_rank(s->comm, &s->me);
    s->peer = 1 - s->me;
    /* A library without one-sided on this path fails MPI_Win_create (Open MPI 4.1
     * between nodes over TCP): said as a transport that cannot run, not an abort. */
    MPI_Comm_set_errhandler(s->comm, MPI_ERRORS_RETURN);
    void *base = s->op == RMA_PUT ? s->recv_base : s->send_base;
    int rc = MPI_Win_create(base, (MPI_Aint)s->len, 1, MPI_INFO_NULL, s->comm, &s->win);
    if (rc != MPI_SUCCESS) {
        char why[MPI_MAX_ERROR_STRING];
        int n = 0;
        MPI_Error_string(rc, why, &n);
        snprintf(err, len, "MPI_Win_create over %zu bytes failed: %.*s", s->len, n, why);
        MPI_Comm_free(&s->comm);
        return -1;
    }
    MPI_Comm_group(s->comm, &all);
    MPI_Group_incl(all, 1, &s->peer, &s->peer_grp);
    MPI_Group_free(&all);
    if (s->sync == RMA_FENCE)
        MPI_Win_fence(0, s->win);           /* opens the first epoch */
#if HAVE_MPI3_RMA
    if (s->sync == RMA_FLUSH) {
        /* On the heap, not in this file's static data: there MPICH 4.0.2 over UCX
         * added the partner's notifications somewhere else (a Get of the counter
         * read garbage) and both ranks waited forever (docs/one-sided.md). */
        s->counters = aligned_alloc(4096, 4096);
        if (!s->counters) {
            snprintf(err, len, "flush: out of memory for the notification counters");
            return -1;
        }
        s->counters[0] = s->counters[1] = 0;
        s->seen[0] = s->seen[1] = 0;
        MPI_Win_create(s->counters, (MPI_Aint)(2 * sizeof *s->counters), sizeof(long),
                       MPI_INFO_NULL, s->comm, &s->flag_win);
        int *model, found = 0;
        MPI_Win_get_attr(s->flag_win, MPI_WIN_MODEL, &model, &found);
        if (!found || *model != MPI_WIN_UNIFIED) {
            snprintf(err, len, "flush: the window is not in the unified memory"
                     " model, which the notification's polling needs");
            MPI_Win_free(&s->flag_win);
            free(s->counters);
            MPI_Win_free(&s->win);
            MPI_Group_free(&s->peer_grp);
            MPI_Comm_free(&s->comm);
            return -1;
        }
        MPI_Win_lock_all(0, s->win);
        MPI_Win_lock_all(0, s->flag_win);
    }
#endif
    return 0;
}

/* Where the partner's copy of my slot is: the same offset in its arena. */
static MPI_Aint disp_of(const unsigned char *p, const unsigned char *base)
{
    return (MPI_Aint)(p - base);
}

static void rma_post(struct tport *t, void *buf, int n)
{
    struct rma_state *s = t->state;
    s->buf = buf;
    s->n = n;
    /* Put under pscw: expose my window to the partner for this message. */
    if (s->op == RMA_PUT && s->sync == RMA_PSCW)
        MPI_Win_post(s->peer_grp, 0, s->win);
}

static void rma_send(struct tport *t, const void *buf, int n)
{
    struct rma_state *s = t->state;
    void *b = (void *)buf;
    MPI_Aint d = disp_of(buf, s->send_base);
    if (s->op == RMA_PUT) {
        switch (s->sync) {
        case RMA_FENCE:
            MPI_Put(b, n, MPI_BYTE, s->peer, d, n, MPI_BYTE, s->win);
            MPI_Win_fence(0, s->win);
            break;
        case RMA_PSCW:
            MPI_Win_start(s->peer_grp, 0, s->win);
            MPI_Put(b, n, MPI_BYTE, s->peer, d, n, MPI_BYTE, s->win);
            MPI_Win_complete(s->win);
            break;
#if HAVE_MPI3_RMA
        default:
            MPI_Put(b, n, MPI_BYTE, s->peer, d, n, MPI_BYTE, s->win);
            MPI_Win_flush(s->peer, s->win);  /* complete at the target ... */
            notify(s, 0);                    /* ... before it is told */
            break;
#endif
        }
        return;
    }
    /* Get: my send buffer is in the window; the reader fetches it. */
    switch (s->sync) {
    case RMA_FENCE:
        MPI_Win_fence(0, s->win);            /* ready: the reader may Get */
        MPI_Win_fence(0, s->win);            /* its Get is done */
        break;
    case RMA_PSCW:
        MPI_Win_post(s->peer_grp, 0, s->win);
        MPI_Win_wait(s->win);
        break;
#if HAVE_MPI3_RMA
    default:
        MPI_Win_sync(s->win);                /* my stores into the public copy */
        notify(s, 0);                        /* ready */
        await(s, 1);                         /* read done: buffer free again */
        break;
#endif
    }
}

static void rma_recv(struct tport *t)
{
    struct rma_state *s = t->state;
    MPI_Aint d = disp_of(s->buf, s->recv_base);
    if (s->op == RMA_PUT) {
        switch (s->sync) {
        case RMA_FENCE: MPI_Win_fence(0, s->win); break;
        case RMA_PSCW:  MPI_Win_wait(s->win); break;
#if HAVE_MPI3_RMA
        default:        await(s, 0); break;
#endif
        }
        return;
    }
    switch (s->sync) {
    case RMA_FENCE:
        MPI_Win_fence(0, s->win);
        MPI_Get(s->buf, s->n, MPI_BYTE, s->peer, d, s->n, MPI_BYTE, s->win);
        MPI_Win_fence(0, s->win);
        break;
    case RMA_PSCW:
        MPI_Win_start(s->peer_grp, 0, s->win);
        MPI_Get(s->buf, s->n, MPI_BYTE, s->peer, d, s->n, MPI_BYTE, s->win);
        MPI_Win_complete(s->win);
        break;
#if HAVE_MPI3_RMA
    default:
        await(s, 0);
        MPI_Get(s->buf, s->n, MPI_BYTE, s->peer, d, s->n, MPI_BYTE, s->win);
        MPI_Win_flush(s->peer, s->win);      /* the data is in my buffer */
        notify(s, 1);
        break;
#endif
    }
}

/* One-sided has no message envelope: the target learns no length. What it
 * posted is what the check expects; the byte-by-byte payload check is what
 * proves the data arrived (it fails if a synchronisation is missing). */
static long rma_received(struct tport *t)
{
    return ((struct rma_state *)t->state)->n;
}

static void rma_cleanup(struct tport *t)
{
    struct rma_state *s = t->state;
#if HAVE_MPI3_RMA
    if (s->sync == RMA_FLUSH) {
        MPI_Win_unlock_all(s->flag_win);
        MPI_Win_unlock_all(s->win);
        MPI_Win_free(&s->flag_win);
        free(s->counters);
    }
#endif
    if (s->sync == RMA_FENCE)
        MPI_Win_fence(0, s->win);            /* closes the last epoch */
    MPI_Win_free(&s->win);
    MPI_Group_free(&s->peer_grp);
    MPI_Comm_free(&s->comm);
}

#if HAVE_MPI3_RMA
/* ---- the modes: Put with flush, several in flight (modes.c) ---- */

/* Every Put started is complete at the target, and the target is told. */
static void flush_and_tell(struct rma_state *s, long extra)
{
    MPI_Win_flush(s->peer, s->win);
    notify_n(s, 0, s->pending + extra);
    s->pending = 0;
}

static void modes_isend(struct tport *t, int slot, const void *buf, int n)
{
    struct rma_state *s = t->state;
    MPI_Aint d = (MPI_Aint)(slot % P2P_MAX_Q) * (MPI_Aint)s->stride;
    MPI_Put((void *)buf, n, MPI_BYTE, s->peer, d, n, MPI_BYTE, s->win);
    s->pending++;
    s->is_send[slot] = 1;
}

static void modes_irecv(struct tport *t, int slot, void *buf, int n)
{
    struct rma_state *s = t->state;
    if ((unsigned char *)buf != s->recv_base + (size_t)(slot % P2P_MAX_Q) * s->stride) {
        fprintf(stderr, "p2p: rma: receive slot %d posted outside its place in the"
                " window\n", slot);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    s->is_send[slot] = 0;
    s->slot_n[slot] = n;
}

/* Sends first (a bidirectional window waits for both; the partner's
 * receives complete only once this rank has told it), then receives. */
static void modes_wait(struct tport *t, int first, int count)
{
    struct rma_state *s = t->state;
    int sends = 0;
    for (int k = first; k < first + count; k++)
        sends += s->is_send[k];
    if (sends && s->pending)
        flush_and_tell(s, 0);
    if (count - sends)
        await_n(s, 0, count - sends);
}

static long modes_slot_received(struct tport *t, int slot)
{
    return ((struct rma_state *)t->state)->slot_n[slot];
}

/* The blocking calls carry the acks and the stream: an ack lands in the
 * partner's ack slot, anything else in its slot 0 (where the stream's
 * receiver posts). Puts still pending go with it, counted before it. */
static void modes_send(struct tport *t, const void *buf, int n)
{
    struct rma_state *s = t->state;
    MPI_Aint d = buf == s->ack_send ? s->ack_disp : 0;
    MPI_Put((void *)buf, n, MPI_BYTE, s->peer, d, n, MPI_BYTE, s->win);
    flush_and_tell(s, 1);
}

static void modes_recv(struct tport *t)
{
    await((struct rma_state *)t->state, 0);
}
#endif

void tr_rma_modes_init(struct tport *t, void *slots, size_t stride, size_t len,
                       size_t ack_offset, const void *ack_send)
{
    tr_rma_init(t, RMA_PUT, RMA_FLUSH, NULL, slots, len);
#if HAVE_MPI3_RMA
    st.stride = stride;
    st.ack_disp = (MPI_Aint)ack_offset;
    st.ack_send = ack_send;
    t->send = modes_send;
    t->recv = modes_recv;
    t->isend = modes_isend;
    t->irecv = modes_irecv;
    t->wait = modes_wait;
    t->slot_received = modes_slot_received;
    t->duplex = 1;
#else
    (void)stride;
    (void)ack_offset;
    (void)ack_send;
#endif
}

void tr_rma_init(struct tport *t, int op, int sync, void *send_base,
                 void *recv_base, size_t len)
{
    memset(&st, 0, sizeof st);
    st.op = op;
    st.sync = sync;
    st.send_base = send_base;
    st.recv_base = recv_base;
    st.len = len;
    t->name = "rma";
    t->pair = p2p_rma_op_names[op];
    t->variant = p2p_rma_sync_names[sync];
    t->preposted = 0;
    t->local = 0;
    t->state = &st;
    t->setup = rma_setup;
    t->post = rma_post;
    t->send = rma_send;
    t->recv = rma_recv;
    t->received = rma_received;
    t->cleanup = rma_cleanup;
}
