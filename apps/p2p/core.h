/* p2p: what the timing core (driver.c) lends the modes beyond the ping-pong
 * (modes.c): the payload pattern, its check and the failure line, so that
 * every mode fills and checks its messages as the ping-pong does. */
#ifndef P2P_CORE_H
#define P2P_CORE_H

#include <stdint.h>

#include "p2p.h"
#include "transport.h"

uint32_t p2p_pattern_seed(int rank, long size, unsigned idx);
/* p[0..n) set to the pattern of seed, or its complement (a receive buffer:
 * a message that never landed cannot pass the check) */
void p2p_fill(unsigned char *p, long n, uint32_t seed, int invert);
/* index of the first byte of p[0..n) that is not the pattern of seed, or -1 */
long p2p_first_bad(const unsigned char *p, long n, uint32_t seed);
/* prints "p2p: payload check failed on rank R: ..." and ends the job (status 3) */
void p2p_payload_failed(int rank, const struct tport *t, long size, const char *what);

/* Calibration (rank 0): the next count of round trips or messages per sample
 * after a shortest sample of t seconds at reps; -reps when reps will do. */
long p2p_next_reps(long reps, double t, double min_time_s);

/* modes.c: every mode of o->modes but the ping-pong, over the transport of
 * --transport (mpi: two-sided, tr_mpi.c; tcp, tcp_poll: raw TCP). */
void p2p_measure_modes(const struct options *o, int rank);

#endif
