/* p2p-pvm links no MPI. The option parser and the driver name the MPI
 * transports' tables and constructors; these stand-ins let them link, and
 * an MPI transport asked for here reports itself unavailable (the driver
 * then says so and stops) instead of being silently replaced. */
#include <stdio.h>
#include <string.h>

#include "p2p.h"
#include "transport.h"

const char *const p2p_pair_names[P2P_NPAIRS] = {
    "Send-Recv", "Send-Irecv", "Isend-Recv", "Isend-Irecv",
    "Ssend-Recv", "Ssend-Irecv", "Issend-Recv", "Issend-Irecv",
};
int p2p_pair_has_irecv(int pair) { return pair % 2 == 1; }

static int no_mpi(struct tport *t, long maxsize, char *err, size_t errlen)
{
    (void)t;
    (void)maxsize;
    snprintf(err, errlen, "this is the PVM build (p2p-pvm): no MPI transport in it");
    return -1;
}

void tr_mpi_init(struct tport *t, int pair, int preposted)
{
    (void)pair;
    (void)preposted;
    memset(t, 0, sizeof *t);
    t->name = "mpi";
    t->pair = t->variant = "none";
    t->setup = no_mpi;
}

/* MPI one-sided (tr_rma.c): the names opts.c checks --rma-* against. */
const char *const p2p_rma_op_names[P2P_RMA_NOPS] = { "Put", "Get" };
const char *const p2p_rma_sync_names[P2P_RMA_NSYNCS] = { "fence", "pscw", "flush" };

int tr_rma_supported(int sync, char *why, size_t len)
{
    (void)sync;
    snprintf(why, len, "this is the PVM build (p2p-pvm): no MPI one-sided in it");
    return 0;
}

void tr_rma_init(struct tport *t, int op, int sync, void *send_base, void *recv_base,
                 size_t len)
{
    (void)send_base;
    (void)recv_base;
    (void)len;
    tr_mpi_init(t, op, sync);
}

void tr_rma_modes_init(struct tport *t, void *slots, size_t stride, size_t len,
                       size_t ack_offset, const void *ack_send)
{
    (void)stride;
    (void)ack_offset;
    (void)ack_send;
    tr_rma_init(t, 0, 0, NULL, slots, len);
}
