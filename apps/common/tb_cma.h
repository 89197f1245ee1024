/* The kernel's cross-memory copy (CMA): one process reads another's memory with
 * process_vm_readv, as MPICH and Open MPI move large messages between processes of a host.
 * The baseline of su3's exchange_over_cma and HPL's panel_over_cma. */
#ifndef TB_CMA_H
#define TB_CMA_H

/* Copy `bytes` at address `remote` in process `pid` to `dst`, calling again after a short
 * read; 0, or the errno of the failure (EPERM where ptrace rules or seccomp forbid it). */
int tb_cma_read(long pid, void *dst, const void *remote, long bytes);

#endif
