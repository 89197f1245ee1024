/* The median and lower quartile of a sample, for every program's statistics. */
#ifndef TB_MEDIAN_H
#define TB_MEDIAN_H

/* Median of v[0..n-1]; sorts v in place (callers read min and percentiles from
 * it afterwards). 0 when n is 0. */
double tb_median(double *v, int n);

/* Lower quartile of v[0..n-1], interpolated between the order statistics at (n - 1) / 4
 * (as Python's statistics.quantiles(method='inclusive')); sorts v in place. 0 when n is 0. */
double tb_lower_quartile(double *v, int n);

#endif
