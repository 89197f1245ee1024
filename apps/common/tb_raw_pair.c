/* The two ranks' shared segment (tb_raw_pair.h). */
#include <string.h>
#include <unistd.h>
#include <mpi.h>
#include "tb_raw.h"
#include "tb_raw_pair.h"

#define TAG 0x5e   /* on the caller's communicator; every message of this is matched here */

void *tb_raw_pair_segment(MPI_Comm pair, const char *what, size_t len, long *partner_pid)
{
    int me;
    MPI_Comm_rank(pair, &me);
    int other = 1 - me;
    /* the host and the process id, at once */
    struct { char host[MPI_MAX_PROCESSOR_NAME]; long pid; } mine, theirs;
    int len_unused;
    memset(&mine, 0, sizeof mine);
    MPI_Get_processor_name(mine.host, &len_unused);
    mine.pid = (long)getpid();
    MPI_Sendrecv(&mine, (int)sizeof mine, MPI_BYTE, other, TAG, &theirs, (int)sizeof theirs,
                 MPI_BYTE, other, TAG, pair, MPI_STATUS_IGNORE);
    *partner_pid = theirs.pid;
    if (strcmp(mine.host, theirs.host) != 0)
        return NULL;                     /* both ranks compare the same two names */
    /* rank 0 creates the segment, rank 1 maps it, then rank 0 unlinks the name */
    char name[64] = "";
    void *seg = me == 0 ? tb_raw_segment_create(what, len, name, sizeof name) : NULL;
    MPI_Bcast(name, (int)sizeof name, MPI_CHAR, 0, pair);
    if (me == 1 && name[0])
        seg = tb_raw_segment_attach(name, len);
    int mapped = seg != NULL, both;
    MPI_Allreduce(&mapped, &both, 1, MPI_INT, MPI_MIN, pair);
    if (me == 0)
        tb_raw_segment_unlink(name);
    if (!both) {
        tb_raw_segment_unmap(seg, len);
        return NULL;
    }
    return seg;
}
