#include <stdlib.h>

#include "tb_median.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double tb_median(double *v, int n)
{
    if (n <= 0)
        return 0.0;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double tb_lower_quartile(double *v, int n)
{
    if (n <= 0)
        return 0.0;
    tb_median(v, n); /* sorts */
    double pos = 0.25 * (n - 1);
    int i = (int)pos;
    return i + 1 < n ? v[i] + (pos - i) * (v[i + 1] - v[i]) : v[i];
}
