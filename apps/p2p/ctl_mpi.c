/* p2p: the control plane over MPI, on a communicator of its own so that no
 * control message can ever match a message of the MPI transport. */
#define _POSIX_C_SOURCE 200112L
#include <mpi.h>
#include "../common/tb_finalize.h"
#include <time.h>

#include "control.h"

#define TAG_CTL 91

static MPI_Comm ctl = MPI_COMM_NULL;
static int me;

int ctl_init(int *argc, char ***argv)
{
    int n;
    MPI_Init(argc, argv);
    MPI_Comm_dup(MPI_COMM_WORLD, &ctl);
    MPI_Comm_rank(ctl, &me);
    MPI_Comm_size(ctl, &n);
    return n;
}

int ctl_rank(void) { return me; }
void ctl_barrier(void) { MPI_Barrier(ctl); }
void ctl_bcast_long(long *v) { MPI_Bcast(v, 1, MPI_LONG, 0, ctl); }
void ctl_bcast_bytes(void *buf, int n) { MPI_Bcast(buf, n, MPI_BYTE, 0, ctl); }

void ctl_exchange_bytes(const void *mine, void *theirs, int n)
{
    MPI_Status st;
    MPI_Sendrecv((void *)mine, n, MPI_BYTE, 1 - me, TAG_CTL, theirs, n, MPI_BYTE,
                 1 - me, TAG_CTL, ctl, &st);
}

int ctl_exchange_int(int mine)
{
    int theirs = 0;
    ctl_exchange_bytes(&mine, &theirs, (int)sizeof mine);
    return theirs;
}

void ctl_abort(int code) { MPI_Abort(MPI_COMM_WORLD, code); }

void ctl_finalize(void)
{
    MPI_Comm_free(&ctl);
    tb_finalize_bounded();     /* see ../common/tb_finalize.h */
}
