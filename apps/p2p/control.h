/* p2p: the control plane. Everything the driver says to the partner outside
 * the timed region (start together, agree on counts, gather a status) goes
 * through these calls, never through the transport under test. Today it is
 * MPI (ctl_mpi.c); a PVM or socket driver supplies its own. Every one of them
 * times with ../common/tb_clock.h, not the library's timer. */
#ifndef P2P_CONTROL_H
#define P2P_CONTROL_H

int ctl_init(int *argc, char ***argv);   /* returns the number of ranks */
int ctl_rank(void);
void ctl_barrier(void);
void ctl_bcast_long(long *v);            /* rank 0's value to both */
void ctl_bcast_bytes(void *buf, int n);  /* rank 0's bytes to both */
int ctl_exchange_int(int mine);          /* returns the partner's value */
void ctl_exchange_bytes(const void *mine, void *theirs, int n);
void ctl_abort(int code);                /* ends every rank */
void ctl_finalize(void);

#endif
