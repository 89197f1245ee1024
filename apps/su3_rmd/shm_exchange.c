/* su3's exchange with no library in the way (shm_exchange.h).
 *
 * Why: exchange_over_memcpy divides the exchange by memcpy within one core, and on the
 * Intel Xeon VMs the exchanges of every stack at once ran up to 1.33x slower for minutes at a
 * time while memcpy did not move (docs/measurement.md): what moved is the traffic between
 * the two cores, which a copy within one core does not see. This moves the same bytes both
 * ways between the same two cores, as a shared-memory transport would, with no library's
 * protocol, matching or progress in it; the exchange over it (exchange_over_shm) leaves the
 * library's share. Timed sample by sample beside the MPI exchange (lattice.c), so both see
 * the machine in the same state. It follows the exchange's drift only about half-way: the
 * libraries here move these messages with one process_vm_readv each (docs/measurement.md),
 * so the same bytes are also moved that way (kernel_once: exchange_over_cma). */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <mpi.h>
#include "../common/tb_clock.h"
#include "../common/tb_cma.h"
#include "shm_exchange.h"

#define CHUNK 32768L    /* the pipeline's step, as apps/p2p/tr_shm.c */
#define LINE 64
#define PAGE 4096L
#define TAG 0x5e        /* the gathers use tags 0-7, the probe after a pause 99 */

/* One direction, written by one rank and read by the other. The two counts run over every
 * byte ever sent this way (never reset; the segment starts zeroed), each on its own line. */
struct lane {
    _Alignas(LINE) _Atomic uint64_t published;  /* by the writer: copied in */
    _Alignas(LINE) _Atomic uint64_t taken;      /* by the reader: copied out */
    _Atomic uintptr_t addr;                      /* through the kernel: the writer's buffer */
    _Alignas(LINE) unsigned char data[];
};

struct shm_pair {
    unsigned char *seg;
    size_t len;
    struct lane *out, *in;
    uint64_t sent, got;  /* bytes this rank has published on out, taken from in */
    long partner_pid;
    int kernel_errno;    /* the first failure of process_vm_readv, 0 if none */
};

static void *map_segment(const char *name, int flags, size_t len)
{
    int fd = shm_open(name, flags, 0600);
    if (fd < 0)
        return MAP_FAILED;
    void *seg = MAP_FAILED;
    if (!(flags & O_CREAT) || ftruncate(fd, (off_t)len) == 0)
        seg = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    return seg;
}

shm_pair *shm_pair_open(long most)
{
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 2 || most <= 0)
        return NULL;
    char host[MPI_MAX_PROCESSOR_NAME] = "", other[MPI_MAX_PROCESSOR_NAME] = "";
    int len;
    MPI_Get_processor_name(host, &len);
    MPI_Sendrecv(host, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 1 - rank, TAG, other,
                 MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 1 - rank, TAG, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    if (strcmp(host, other) != 0)
        return NULL;                      /* both ranks compare the same two names */
    size_t lane_len = (size_t)((sizeof(struct lane) + (size_t)most + PAGE - 1) / PAGE * PAGE);
    long mine = (long)getpid(), partner;
    MPI_Sendrecv(&mine, 1, MPI_LONG, 1 - rank, TAG, &partner, 1, MPI_LONG, 1 - rank, TAG,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    char name[64];                        /* named after rank 0's process: unique on the host */
    snprintf(name, sizeof name, "/tb-su3-exchange-%ld", rank == 0 ? mine : partner);
    /* rank 0 creates the segment, rank 1 maps it, then rank 0 unlinks the name */
    unsigned char *seg = MAP_FAILED;
    if (rank == 0)
        seg = map_segment(name, O_CREAT | O_EXCL | O_RDWR, 2 * lane_len);
    int created = rank == 0 && seg != MAP_FAILED, any;
    MPI_Allreduce(&created, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any && rank == 1)
        seg = map_segment(name, O_RDWR, 2 * lane_len);
    int mapped = seg != MAP_FAILED, both;
    MPI_Allreduce(&mapped, &both, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (created)
        shm_unlink(name);
    shm_pair *p = both ? calloc(1, sizeof *p) : NULL;
    int have = p != NULL, all;
    MPI_Allreduce(&have, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all) {
        if (seg != MAP_FAILED)
            munmap(seg, 2 * lane_len);
        free(p);
        return NULL;
    }
    p->seg = seg;
    p->len = 2 * lane_len;
    p->out = (struct lane *)(seg + (size_t)rank * lane_len);
    p->in = (struct lane *)(seg + (size_t)(1 - rank) * lane_len);
    p->partner_pid = partner;
    return p;
}

static void wait_for(_Atomic uint64_t *count, uint64_t at_least)
{
    for (long spins = 1; atomic_load_explicit(count, memory_order_acquire) < at_least; spins++)
        if (spins % 4096 == 0)
            sched_yield();                /* more ranks than cores: let the partner run */
}

static void exchange_once(shm_pair *p, const unsigned char *send, unsigned char *recv,
                          long bytes)
{
    wait_for(&p->out->taken, p->sent);   /* the partner has copied out our last message */
    for (long off = 0; off < bytes; off += CHUNK) {
        long len = bytes - off < CHUNK ? bytes - off : CHUNK;
        memcpy(p->out->data + off, send + off, (size_t)len);
        atomic_store_explicit(&p->out->published, p->sent + (uint64_t)(off + len),
                              memory_order_release);
        wait_for(&p->in->published, p->got + (uint64_t)(off + len));
        memcpy(recv + off, p->in->data + off, (size_t)len);
        atomic_store_explicit(&p->in->taken, p->got + (uint64_t)(off + len),
                              memory_order_release);
    }
    p->sent += (uint64_t)bytes;
    p->got += (uint64_t)bytes;
}

/* `count` exchanges by `once`, each timed on its own and followed by a busy pause; seconds
 * per exchange, pauses left out. */
static double timed(void (*once)(shm_pair *, const unsigned char *, unsigned char *, long),
                    shm_pair *p, const void *send, void *recv, long bytes, int count,
                    double pause_s)
{
    double sum = 0.0;
    for (int r = 0; r < count; r++) {
        double t0 = tb_now_s();
        once(p, send, recv, bytes);
        double t1 = tb_now_s();
        sum += t1 - t0;
        while (tb_now_s() - t1 < pause_s)
            ;
    }
    return count > 0 ? sum / count : 0.0;
}

double shm_pair_exchanges(shm_pair *p, const void *send, void *recv, long bytes, int count,
                          double pause_s)
{
    return timed(exchange_once, p, send, recv, bytes, count, pause_s);
}

/* One exchange through the kernel: each rank publishes where its message is, then reads the
 * partner's with one process_vm_readv, as the libraries here move these messages (one call per
 * message on MPICH 4.0 and 5.0, Open MPI 4.1 and 5.0: docs/measurement.md). The flow control
 * is exchange_once's: the partner has read our last message before we publish the next. */
static void kernel_once(shm_pair *p, const unsigned char *send, unsigned char *recv, long bytes)
{
    wait_for(&p->out->taken, p->sent);
    atomic_store_explicit(&p->out->addr, (uintptr_t)send, memory_order_relaxed);
    atomic_store_explicit(&p->out->published, p->sent + (uint64_t)bytes, memory_order_release);
    wait_for(&p->in->published, p->got + (uint64_t)bytes);
    int err = tb_cma_read(p->partner_pid, recv,
                          (const void *)atomic_load_explicit(&p->in->addr, memory_order_relaxed),
                          bytes);
    if (err && !p->kernel_errno)
        p->kernel_errno = err;
    atomic_store_explicit(&p->in->taken, p->got + (uint64_t)bytes, memory_order_release);
    p->sent += (uint64_t)bytes;
    p->got += (uint64_t)bytes;
}

double shm_pair_kernel_exchanges(shm_pair *p, const void *send, void *recv, long bytes,
                                 int count, double pause_s)
{
    double s = timed(kernel_once, p, send, recv, bytes, count, pause_s);
    /* The partner reads `send` itself: it must have read the last message before the caller
     * writes the next sample's payload there (seen without this: a wrong payload in 1 of 51
     * samples, openmpi-5.0 build, 2026-11-26). Untimed. */
    wait_for(&p->out->taken, p->sent);
    return s;
}

int shm_pair_kernel_errno(const shm_pair *p) { return p ? p->kernel_errno : 0; }

void shm_pair_close(shm_pair *p)
{
    if (!p)
        return;
    munmap(p->seg, p->len);
    free(p);
}
