/* p2p: per-size statistics of the samples, and JSON text for the records. */
#ifndef P2P_STATS_H
#define P2P_STATS_H

struct stats { double min, median, mean, p95, cv; };

/* Sorts v[0..n) in place. Median: middle value (mean of the two middle ones
 * for an even count); p95: nearest rank, the ceil(0.95 n)-th smallest;
 * cv: sample standard deviation over the mean (0 for one sample). */
struct stats summarise(double *v, int n);
void json_str(const char *s);       /* quoted, escaped, on stdout */

#endif
