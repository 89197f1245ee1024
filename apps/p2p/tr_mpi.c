/* p2p: the MPI transport. The eight pairs {Send, Isend, Ssend, Issend} x
 * {Recv, Irecv}; MPI-1 calls only, so that it builds on LAM/MPI 7.1.4.
 * Non-blocking sends are completed at once (the side goes on only when its
 * send buffer is free again: the thesis's 'modified' program), and every
 * receive is complete before the reply is sent (but in tr_mpi_original, the
 * thesis's flawed 'original' program, measured only when asked for). */
#include <mpi.h>
#include <stdlib.h>

#include "p2p.h"
#include "transport.h"

#define TAG_DATA 17

struct mpi_state {
    MPI_Comm comm; /* a communicator of its own: no control message matches */
    int peer, pair;
    void *buf;
    int n;
    MPI_Request req;
    MPI_Status st;
    int original; /* the thesis's 'original' program: rank 1 waits after its reply */
    int deferred; /* rank 1 of 'original': a receive left for the next send to wait on */
};

const char *const p2p_pair_names[P2P_NPAIRS] = {
    "Send-Recv",  "Send-Irecv",  "Isend-Recv",  "Isend-Irecv",
    "Ssend-Recv", "Ssend-Irecv", "Issend-Recv", "Issend-Irecv" };

int p2p_pair_has_irecv(int pair) { return pair % 2 == 1; }

static int mpi_setup(struct tport *t, long maxsize, char *err, size_t len)
{
    struct mpi_state *s = t->state;
    int me;
    (void)maxsize; (void)err; (void)len;
    MPI_Comm_dup(MPI_COMM_WORLD, &s->comm);
    MPI_Comm_rank(s->comm, &me);
    s->peer = 1 - me;
    return 0;
}

/* Blocking receives do all their work in recv(); post() only notes where. */
static void mpi_post(struct tport *t, void *buf, int n)
{
    struct mpi_state *s = t->state;
    s->buf = buf;
    s->n = n;
    if (p2p_pair_has_irecv(s->pair))
        MPI_Irecv(buf, n, MPI_BYTE, s->peer, TAG_DATA, s->comm, &s->req);
}

static void mpi_recv(struct tport *t)
{
    struct mpi_state *s = t->state;
    if (s->original && s->peer == 0 && p2p_pair_has_irecv(s->pair)) {
        s->deferred = 1; /* the flaw: no wait before the reply (mpi_send waits after it) */
        return;
    }
    if (p2p_pair_has_irecv(s->pair))
        MPI_Wait(&s->req, &s->st);
    else
        MPI_Recv(s->buf, s->n, MPI_BYTE, s->peer, TAG_DATA, s->comm, &s->st);
}

static void mpi_send(struct tport *t, const void *buf, int n)
{
    struct mpi_state *s = t->state;
    void *b = (void *)buf; /* MPI-1 prototypes take void * */
    MPI_Request r;
    MPI_Status st;
    switch (s->pair / 2) {
    case 0: MPI_Send(b, n, MPI_BYTE, s->peer, TAG_DATA, s->comm); break;
    case 1: MPI_Isend(b, n, MPI_BYTE, s->peer, TAG_DATA, s->comm, &r);
            MPI_Wait(&r, &st); break;
    case 2: MPI_Ssend(b, n, MPI_BYTE, s->peer, TAG_DATA, s->comm); break;
    default: MPI_Issend(b, n, MPI_BYTE, s->peer, TAG_DATA, s->comm, &r);
             MPI_Wait(&r, &st); break;
    }
    if (s->deferred) { /* 'original': the wait comes only after the reply has gone */
        s->deferred = 0;
        MPI_Wait(&s->req, &s->st);
    }
}

static long mpi_received(struct tport *t)
{
    struct mpi_state *s = t->state;
    int got = -1;
    MPI_Get_count(&s->st, MPI_BYTE, &got);
    return got;
}

static void mpi_cleanup(struct tport *t)
{
    struct mpi_state *s = t->state;
    if (s->comm != MPI_COMM_NULL)
        MPI_Comm_free(&s->comm);
}

/* Slots (modes.c: flood, overlap, windows): MPI_Isend and MPI_Irecv on a tag
 * of their own, so that nothing of the blocking calls above (the untimed
 * round trip, the final reply) matches a posted slot. */
#define TAG_SLOT 18
static MPI_Request slot_req[P2P_MAX_SLOTS];
static MPI_Status slot_st[P2P_MAX_SLOTS];

static void mpi_isend(struct tport *t, int slot, const void *buf, int n)
{
    struct mpi_state *s = t->state;
    MPI_Isend((void *)buf, n, MPI_BYTE, s->peer, TAG_SLOT, s->comm, &slot_req[slot]);
}

static void mpi_irecv(struct tport *t, int slot, void *buf, int n)
{
    struct mpi_state *s = t->state;
    MPI_Irecv(buf, n, MPI_BYTE, s->peer, TAG_SLOT, s->comm, &slot_req[slot]);
}

static void mpi_waitslots(struct tport *t, int first, int count)
{
    (void)t;
    MPI_Waitall(count, &slot_req[first], &slot_st[first]);
}

static long mpi_slot_received(struct tport *t, int slot)
{
    int got = -1;
    (void)t;
    MPI_Get_count(&slot_st[slot], MPI_BYTE, &got);
    return got;
}

void tr_mpi_init(struct tport *t, int pair, int preposted)
{
    static struct mpi_state st; /* one MPI channel per run */
    st.comm = MPI_COMM_NULL;
    st.pair = pair;
    st.original = st.deferred = 0;
    t->name = "mpi";
    t->pair = p2p_pair_names[pair];
    t->preposted = preposted;
    t->variant = preposted ? "preposted" : "complete";
    t->local = 0;
    t->state = &st;
    t->setup = mpi_setup;
    t->post = mpi_post;
    t->send = mpi_send;
    t->recv = mpi_recv;
    t->received = mpi_received;
    t->cleanup = mpi_cleanup;
    t->isend = mpi_isend;
    t->irecv = mpi_irecv;
    t->wait = mpi_waitslots;
    t->slot_received = mpi_slot_received;
    t->duplex = 1;
}

/* The thesis's 'original' program (seed 004, section 4.3.1): "process 2 does not wait for
 * the non-blocking receive to complete before sending the message back to process 1. It
 * does call MPI_Wait, but only after it sends the message back". On an Irecv pair rank 1
 * posts the Irecv, sends its reply, then waits; rank 0 is unchanged. The payload still
 * arrives whole (the wait comes before the driver checks it); only the timing is wrong. */
void tr_mpi_original(struct tport *t)
{
    struct mpi_state *s = t->state;
    s->original = p2p_pair_has_irecv(s->pair);
    t->variant = "original";
}
