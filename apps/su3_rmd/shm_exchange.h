/* su3's exchange with no library: the same bytes both ways between the two ranks' cores
 * through a shared segment, or through the kernel (shm_exchange.c). The baselines of
 * exchange_over_shm and exchange_over_cma. */
#ifndef SHM_EXCHANGE_H
#define SHM_EXCHANGE_H

typedef struct shm_pair shm_pair;

/* Collective over MPI_COMM_WORLD. A segment for messages of up to `most` bytes each way,
 * where there are exactly two ranks on one host; NULL on every rank otherwise (or where a
 * rank could not map it). The name is unlinked before this returns: nothing is left behind
 * however the job ends. */
shm_pair *shm_pair_open(long most);

/* `count` exchanges of `bytes` (at most `most`): each rank copies `send` into its lane by
 * 32 KiB chunks, publishing each, and copies the partner's published chunks into `recv`,
 * both cores at once, as a library's shared-memory path moves a message. Each exchange is
 * timed on its own and followed by a busy pause of pause_s, as su3's timed exchanges are
 * (lattice.c). Both ranks call it with the same arguments. Returns the seconds per exchange,
 * pauses left out. */
double shm_pair_exchanges(shm_pair *p, const void *send, void *recv, long bytes, int count,
                          double pause_s);

/* The same through the kernel: each rank reads the partner's message with one
 * process_vm_readv (CMA), as MPICH and Open MPI move these messages here. A failed read
 * (seccomp or ptrace rules that forbid it) is kept: shm_pair_kernel_errno. */
double shm_pair_kernel_exchanges(shm_pair *p, const void *send, void *recv, long bytes,
                                 int count, double pause_s);
/* The errno of the first failed process_vm_readv on this rank, 0 if none failed. */
int shm_pair_kernel_errno(const shm_pair *p);

void shm_pair_close(shm_pair *p);

#endif
