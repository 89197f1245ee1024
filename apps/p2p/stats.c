/* p2p: statistics of the samples and JSON strings for the records. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/tb_median.h"
#include "../common/tb_version.h"

#include "stats.h"

struct stats summarise(double *v, int n)
{
    struct stats s;
    double sum = 0, ss = 0;
    s.median = tb_median(v, n);     /* sorts v: min and p95 read from it */
    for (int i = 0; i < n; i++)
        sum += v[i];
    s.min = v[0];
    s.mean = sum / n;
    for (int i = 0; i < n; i++)
        ss += (v[i] - s.mean) * (v[i] - s.mean);
    s.cv = n > 1 && s.mean > 0 ? sqrt(ss / (n - 1)) / s.mean : 0.0;
    int r = (95 * n + 99) / 100; /* ceil(0.95 n), exact in integers */
    s.p95 = v[r - 1];
    return s;
}

void json_str(const char *s)
{
    /* One escaper for every program (apps/common/tb_version.c); an escape is at most
     * six characters ("\u001f"), so this buffer always holds the whole text. */
    size_t len = 6 * strlen(s) + 1;
    char *buf = malloc(len);
    if (!buf) {
        fprintf(stderr, "p2p: out of memory escaping a record string\n");
        exit(1);
    }
    tb_json_escape(s, buf, len);
    printf("\"%s\"", buf);
    free(buf);
}
