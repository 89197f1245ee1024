/* p2p: options shared by the option parser (opts.c) and the driver
 * (driver.c), and the pair table of the MPI transport (tr_mpi.c). */
#ifndef P2P_H
#define P2P_H

#include <stddef.h>

#define P2P_NPAIRS 8
#define P2P_MAX_SIZE 268435456L /* 256 MiB: largest message accepted */

/* VAR_ORIGINAL: the thesis's 'original' program (seed 004, section 4.3.1), flawed on
 * purpose: on an Irecv pair rank 1 sends the reply before it waits for the receive, so
 * the message and the reply cross at once and the 'round trip' overstates bandwidth.
 * Only when asked for by name (original, thesis); 'all' stays complete + preposted. */
enum variant { VAR_COMPLETE = 1, VAR_PREPOSTED = 2, VAR_ALL = 3, VAR_ORIGINAL = 4 };
enum transport_kind { T_MPI = 0, T_SHM = 1, T_MEMCPY = 2, T_TCP = 3, T_TCP_POLL = 4 };
/* T_RMA: MPI one-sided (tr_rma.c), its op and sync below; a value of its
 * own, clear of the kinds the enum may grow by (PVM). */
#define T_RMA 10
/* Baselines measured in the same run, interleaved with the transport. */
enum baseline { BASE_SHM = 1, BASE_MEMCPY = 2, BASE_TCP = 4, BASE_TCP_POLL = 8 };
/* Two-sided Send-Recv (tr_mpi.c) beside a transport that is not it (rma). */
#define BASE_MPI 16
#define P2P_MAX_CHANNELS 6 /* the transport and up to five baselines */

/* MPI one-sided (tr_rma.c): how the payload moves and how its arrival is
 * made known; the names are the record's pair and variant. */
enum rma_op { RMA_PUT = 0, RMA_GET = 1, P2P_RMA_NOPS = 2 };
enum rma_sync { RMA_FENCE = 0, RMA_PSCW = 1, RMA_FLUSH = 2, P2P_RMA_NSYNCS = 3 };
extern const char *const p2p_rma_op_names[P2P_RMA_NOPS];
extern const char *const p2p_rma_sync_names[P2P_RMA_NSYNCS];

/* --mode: what the timing core measures (modes.c has all but the ping-pong).
 * LogGP (Bell et al., seed 002): pingpong (EEL at 8 B), flood (g per queue
 * depth q, G over sizes), overlap (o_s and o_r by a calibrated busy loop).
 * Streams (seed 003): stream (NetPIPE: back-to-back, one final reply),
 * unidir and bidir (MPBench/OSU: a window of W outstanding messages). */
enum p2p_mode { MODE_PINGPONG = 1, MODE_FLOOD = 2, MODE_OVERLAP = 4, MODE_STREAM = 8,
                MODE_UNIDIR = 16, MODE_BIDIR = 32 };
#define P2P_MAX_LIST 16 /* entries of --queue-depths and --window */
#define P2P_MAX_Q 64    /* largest queue depth and window */

struct options {
    int help;
    int samples;          /* timed samples per size (passes) */
    double min_time_s;    /* a sample lasts at least this long */
    int cache_cold;       /* 0: one buffer reused; 1: a ring larger than the LLC */
    int shared_buffer;    /* 1: send from and receive into one buffer (NetPIPE's layout) */
    int transport;        /* enum transport_kind: what is measured */
    int baselines;        /* bit set of enum baseline */
    long baseline_max;    /* --baseline-max: baselines only at sizes up to this */
    int pair;             /* index into the pair table, or -1 for all */
    int variant;          /* bit set of enum variant */
    const char *stack;    /* label copied into every record */
    const char *sizes_arg;/* --sizes as given, for the P2P-RUN record */
    long *sizes;          /* sorted, duplicates removed */
    int nsizes;
    long corrupt_at;      /* test switch: 0 = off */
    int bind_self;        /* pin rank r to the r-th allowed CPU (launchers that cannot) */
    int rma_op;           /* --rma-op: enum rma_op, or -1 for both */
    int rma_sync;         /* --rma-sync: enum rma_sync, or -1 for all */
    int modes;            /* --mode: bit set of enum p2p_mode */
    int qdepths[P2P_MAX_LIST], nqdepths; /* --queue-depths: flood's q, ascending */
    int windows[P2P_MAX_LIST], nwindows; /* --window: unidir/bidir's W, ascending */
};

/* --tcp-networks: IPv4 networks raw TCP (tr_tcp.c) may use between two hosts,
 * besides 198.18.0.0/15; a site's nodes' own network (partition extras
 * tcp_networks). opts.c fills the table, tr_tcp.c keeps to it. */
#define P2P_MAX_TCP_NETS 8
struct p2p_net {
    unsigned long addr, mask; /* host byte order, addr & mask == addr */
    int bits;
};
extern struct p2p_net p2p_tcp_nets[P2P_MAX_TCP_NETS];
extern int p2p_tcp_nnets;

/* Pair names in table order: send mode (Send, Isend, Ssend, Issend) major,
 * receive mode (Recv, Irecv) minor. Defined in tr_mpi.c. */
extern const char *const p2p_pair_names[P2P_NPAIRS];
int p2p_pair_has_irecv(int pair);
/* Turns a channel of tr_mpi_init into the thesis's 'original' program (VAR_ORIGINAL). */
struct tport;
void tr_mpi_original(struct tport *t);

/* Parses argv into *o. Returns 0 on success; on error writes one line
 * "p2p: ..." into err (size errlen) and returns 2. */
int p2p_parse_args(int argc, char **argv, struct options *o, char *err,
                   size_t errlen);
void p2p_usage(void);

#endif
