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
#include <stdint.h>
#include <stdlib.h>
#include <mpi.h>
#include "../common/tb_clock.h"
#include "../common/tb_cma.h"
#include "../common/tb_raw.h"
#include "../common/tb_raw_pair.h"
#include "shm_exchange.h"

#define PAGE 4096L

/* One direction, written by one rank and read by the other. The two counts run over every
 * byte ever sent this way (never reset; the segment starts zeroed), each on its own line:
 * unlike p2p's ping-pong (tb_raw_lane), both ranks send at once, so the writer waits for the
 * reader's `taken` before it reuses the lane. */
struct lane {
    _Alignas(TB_RAW_LINE) _Atomic uint64_t published;  /* by the writer: copied in */
    _Alignas(TB_RAW_LINE) _Atomic uint64_t taken;      /* by the reader: copied out */
    _Atomic uintptr_t addr;                      /* through the kernel: the writer's buffer */
    _Alignas(TB_RAW_LINE) unsigned char data[];
};

struct shm_pair {
    unsigned char *seg;
    size_t len;
    struct lane *out, *in;
    uint64_t sent, got;  /* bytes this rank has published on out, taken from in */
    long partner_pid;
    int kernel_errno;    /* the first failure of process_vm_readv, 0 if none */
};

shm_pair *shm_pair_open(long most)
{
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 2 || most <= 0)
        return NULL;
    size_t lane_len = (size_t)((sizeof(struct lane) + (size_t)most + PAGE - 1) / PAGE * PAGE);
    long partner;
    unsigned char *seg = tb_raw_pair_segment(MPI_COMM_WORLD, "su3-exchange", 2 * lane_len,
                                             &partner);
    shm_pair *p = seg ? calloc(1, sizeof *p) : NULL;   /* seg: NULL on both ranks or none */
    int have = p != NULL, all;
    MPI_Allreduce(&have, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all) {
        tb_raw_segment_unmap(seg, 2 * lane_len);
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

/* Bare reads, yielding now and then: more ranks than cores must let the partner run. */
static void wait_for(_Atomic uint64_t *count, uint64_t at_least)
{
    tb_raw_wait(count, at_least, TB_SPIN_YIELD);
}

/* Each chunk: ours in and published, then the partner's out once published, both cores at
 * once (tb_raw_put, tb_raw_get); the partner may reuse its lane once we have taken it. */
static void exchange_once(shm_pair *p, const unsigned char *send, unsigned char *recv,
                          long bytes)
{
    wait_for(&p->out->taken, p->sent);   /* the partner has copied out our last message */
    for (long off = 0; off < bytes; off += TB_RAW_CHUNK) {
        long len = bytes - off < TB_RAW_CHUNK ? bytes - off : TB_RAW_CHUNK;
        tb_raw_put(&p->out->published, p->out->data, send, off, len, p->sent);
        tb_raw_get(&p->in->published, p->in->data, recv, off, len, p->got, TB_SPIN_YIELD);
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
     * writes the next sample's payload there, or the payload check finds the next sample's
     * bytes (docs/verification.md, '2026-11-26: su3's exchange, from a pause to the kernel
     * copy'). Untimed. */
    wait_for(&p->out->taken, p->sent);
    return s;
}

int shm_pair_kernel_errno(const shm_pair *p) { return p ? p->kernel_errno : 0; }

void shm_pair_close(shm_pair *p)
{
    if (!p)
        return;
    tb_raw_segment_unmap(p->seg, p->len);
    free(p);
}
