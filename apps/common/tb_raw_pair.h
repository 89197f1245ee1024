/* The shared segment of tb_raw.h between the two ranks of an MPI communicator (su3's exchange,
 * HPL's panels); p2p sets its own up over its control plane, which may be PVM's. */
#ifndef TB_RAW_PAIR_H
#define TB_RAW_PAIR_H

#include <stddef.h>
#include <mpi.h>

/* Collective over `pair`, a communicator of two ranks: a segment of `len` bytes both ranks map
 * (zeroed; its name, "/tb-<what>-...", unlinked before this returns), and the other rank's
 * process id in *partner_pid (the kernel copy reads from it). NULL on both ranks where they
 * are on different hosts or either could not map it. Unmap with tb_raw_segment_unmap. */
void *tb_raw_pair_segment(MPI_Comm pair, const char *what, size_t len, long *partner_pid);

#endif
