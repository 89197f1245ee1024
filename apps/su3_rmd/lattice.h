/* Domain decomposition, neighbour gathers and MPI call profiling. */
#ifndef LATTICE_H
#define LATTICE_H

#include <mpi.h>
#include "../common/tb_clock.h"
#include "su3.h"
#include "shm_exchange.h"

/* Every MPI call after MPI_Init goes through PROF so its time is counted. */
enum { P_COMM_RANK, P_COMM_SIZE, P_BARRIER, P_IRECV, P_ISEND, P_SSEND,
       P_WAIT, P_WAITALL, P_ALLREDUCE, P_REDUCE, P_NCALLS };
extern const char *prof_name[P_NCALLS];
extern double prof_sec[P_NCALLS];
extern long prof_count[P_NCALLS];
#define PROF(id, call) do { double t0_ = MPI_Wtime(); call; \
        prof_sec[id] += MPI_Wtime() - t0_; prof_count[id]++; } while (0)

/* Gathers are timed on tb_now_s (ns resolution): a gather lasts microseconds, and LAM's
 * MPI_Wtime counts whole microseconds. */

/* The seconds inside MPI of every gather (from its Irecv to its last Wait), one log per
 * message size in the order the sizes first occur (every rank gathers the same sequence).
 * Their lower quartile is the library's transfer time when both ranks arrive together; the
 * rest also hold the wait for a late partner (SU3-GATHER in su3_rmd.c). */
#define GATHER_SIZES 8
typedef struct {
    long bytes;
    int n, cap;
    double *s;
    int d, dir;        /* dimension and direction of its first gather: the exchange's */
} gather_log;
extern gather_log gather_logs[GATHER_SIZES];
extern int gather_sizes, gather_log_full; /* sizes seen; 1 if a time could not be kept */
/* The largest message of the gathers logged on this rank (0 if none). */
long gather_most_bytes(void);

#define MAX_LOCAL_VOLUME (1 << 24)
enum { PLUS = 0, MINUS = 1 };
enum { COMM_ISEND, COMM_SSEND };

typedef struct {
    int L[4];          /* global extents x y z t */
    int l[4];          /* local extents */
    int grid[4];       /* ranks per dimension */
    int coord[4];      /* this rank's position in the grid */
    int nbr[4][2];     /* rank of the +d / -d neighbour */
    int vol;           /* local sites */
    int face[4];       /* sites of a face normal to d: vol / l[d] */
    /* nb[d][s][i]: neighbour of site i in direction s along d, as a local
     * index (>= 0) or -(f+1) for entry f of that gather's receive buffer */
    int *nb[4][2];
    int *sendlist[4][2]; /* local sites sent by a gather from s along d */
    int comm;          /* COMM_ISEND or COMM_SSEND */
    su3 *sendbuf;
    int corrupt_exchange; /* test only: rank 0 sends one wrong value in the exchanges */
} lattice;

/* Split the lattice over nranks (a power of two); 0 or -1 with msg set. */
int lattice_layout(lattice *lat, int nranks, char *msg, int msglen);
/* Coordinates, neighbour tables, buffers. Returns 0, or -1 on no memory. */
int lattice_setup(lattice *lat, int rank);
long lattice_global_index(const lattice *lat, int i);

/* Fill recv with the `per` matrices per site of field at the sites x+d
 * (s = PLUS) or x-d (s = MINUS) that lie on other ranks. */
void gather(lattice *lat, const su3 *field, int per, int d, int s, su3 *recv);

/* Each gather size's exchange alone, after the run: the gather's own calls, partners and
 * bytes repeated with the ranks in step, so no time waits for a partner still computing,
 * each exchange timed on its own and followed by the same untimed pause on every rank (as
 * a gather follows arithmetic). Collective. For gather_logs[k]: t[k * samples + j] the
 * seconds per exchange of sample j on this rank, reps[k] exchanges per sample (1 ms of
 * them at the calibration's median exchange), pause[k] the seconds of each pause, bad[k]
 * the samples whose last message arrived wrong. Where shm is not NULL, each sample is
 * followed by one of as many exchanges of the same bytes through it (shm_exchange.h, same
 * pause, one untimed first): shm_t[k * samples + j] its seconds per exchange, shm_bad[k]
 * the samples whose bytes arrived wrong; then as many through the kernel
 * (shm_pair_kernel_exchanges): cma_t and cma_bad the same. -1 without memory. */
int time_exchanges(lattice *lat, int samples, double *t, int *reps, double *pause, int *bad,
                   shm_pair *shm, double *shm_t, int *shm_bad, double *cma_t, int *cma_bad);

/* The `per` matrices of field at the neighbour of site i. */
static inline const su3 *nbr_site(const lattice *lat, const su3 *field,
                                  const su3 *recv, int per, int d, int s, int i)
{
    int k = lat->nb[d][s][i];
    return k >= 0 ? field + (long)k * per : recv + (long)(-k - 1) * per;
}

#endif
