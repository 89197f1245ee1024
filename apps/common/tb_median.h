/* The median of a sample, for every program's statistics. */
#ifndef TB_MEDIAN_H
#define TB_MEDIAN_H

/* Median of v[0..n-1]; sorts v in place (callers read min and percentiles from
 * it afterwards). 0 when n is 0. */
double tb_median(double *v, int n);

#endif
