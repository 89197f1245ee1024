/* p2p: the seam between the timing core (driver.c) and a transport.
 *
 * The driver owns everything but moving bytes: size schedule, synchronisation,
 * calibration, sampling, payload checks, statistics and records. A transport
 * moves one message at a time with the few calls below, so that two
 * transports measured by the same driver differ in nothing but the transport
 * (NetPIPE's shape). Raw TCP is tr_tcp.c; PVM plugs in here as a further file.
 *
 * Round trip, as the driver runs it (rank 0 starts, rank 1 answers):
 *   rank 0: [post] send [post] recv      rank 1: [post] recv [post] send
 * A transport with `local` set runs on rank 0 alone (memcpy): its "message"
 * goes from the send buffer into the posted receive buffer inside send().
 */
#ifndef P2P_TRANSPORT_H
#define P2P_TRANSPORT_H

#include <stddef.h>

struct tport {
    const char *name;    /* mpi | shm | memcpy: the "transport" of every record */
    const char *pair;    /* e.g. Ssend-Irecv; "copy" for the raw layers */
    const char *variant; /* complete | preposted */
    int preposted;       /* post the next receive before the partner can send */
    int local;           /* rank 0 alone; rank 1 waits at the next sync */
    void *state;
    /* Buffers of up to maxsize bytes will be passed. Returns 0, or -1 with a
     * one-line reason in err (the transport is then reported unavailable). */
    int (*setup)(struct tport *, long maxsize, char *err, size_t errlen);
    void (*post)(struct tport *, void *buf, int n);     /* start a receive */
    void (*send)(struct tport *, const void *buf, int n);
    void (*recv)(struct tport *);                       /* finish it */
    long (*received)(struct tport *); /* bytes of the last finished receive */
    void (*cleanup)(struct tport *);
    /* Optional: messages outstanding (the flood, overlap and window modes of
     * modes.c). NULL isend: the transport cannot keep several in flight, and
     * those modes report it unsupported (P2P-UNSUPPORTED), never a figure.
     * Each operation lives in a slot (0..P2P_MAX_SLOTS-1) until a wait over a
     * range of slots that holds it completes it; receives of one direction
     * complete in the order posted. `duplex`: sends and receives may be
     * outstanding on both ranks at once (the bidirectional window); a
     * transport whose isend blocks until the bytes are handed over (raw TCP)
     * could deadlock there and leaves it 0. */
    void (*isend)(struct tport *, int slot, const void *buf, int n);
    void (*irecv)(struct tport *, int slot, void *buf, int n);
    void (*wait)(struct tport *, int first, int count);
    long (*slot_received)(struct tport *, int slot); /* bytes, after its wait */
    int duplex;
};

#define P2P_MAX_SLOTS 128 /* a window of 64 receives and 64 sends */

/* Constructors; each fills *t. pair: index into p2p_pair_names. */
void tr_mpi_init(struct tport *t, int pair, int preposted);
void tr_shm_init(struct tport *t);
void tr_memcpy_init(struct tport *t);
void tr_tcp_init(struct tport *t, int poll); /* poll: busy-poll, else blocking */
/* MPI one-sided: op and sync of p2p.h; the windows are the driver's send and
 * receive arenas (len bytes each). tr_rma_supported says whether this build
 * of the library can run `sync` (1), else why not (0, reason in why). */
void tr_rma_init(struct tport *t, int op, int sync, void *send_base,
                 void *recv_base, size_t len);
int tr_rma_supported(int sync, char *why, size_t len);
/* The same, Put with flush, for the modes of modes.c: the window is `slots`
 * (len bytes: receive slot k at k * stride, an ack slot at ack_offset), and
 * acks are sent from ack_send. Without MPI-3 RMA it has no isend (setup
 * fails first: tr_rma_supported). */
void tr_rma_modes_init(struct tport *t, void *slots, size_t stride, size_t len,
                       size_t ack_offset, const void *ack_send);

#endif
