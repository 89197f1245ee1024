/* Preloaded into IMB-MPI1 by PeerCompare (reframe/tests/peers.py): MPI_Alloc_mem returns
 * page-aligned memory, as our p2p's buffers are. IMB takes its buffers from MPI_Alloc_mem,
 * which MPICH serves from malloc: its 64 KiB send and receive buffers sat 480 and 512 bytes
 * past a page, 32 bytes out of step, and at 64 KiB MPICH's copy depends on that (IMB 7.3-9.1
 * us page-aligned against 8.4-10.4 us as it is, docs/peers.md). In the same layout the
 * comparison is of the two timing loops, which is its point. IMB's timing is untouched.
 * The MPICH ABI (the only one IMB runs on here): MPI_Aint is a long, MPI_Info an int. */
#include <stdlib.h>

#define MPI_SUCCESS 0
#define MPI_ERR_NO_MEM 34      /* MPICH's class for it */

int MPI_Alloc_mem(long size, int info, void *baseptr)
{
    (void)info;
    size_t len = ((size_t)(size > 0 ? size : 1) + 4095) / 4096 * 4096;
    void *p = aligned_alloc(4096, len);
    *(void **)baseptr = p;
    return p ? MPI_SUCCESS : MPI_ERR_NO_MEM;
}

int MPI_Free_mem(void *base)
{
    free(base);
    return MPI_SUCCESS;
}
