"""Rank statistics for testbed.compare: the Hodges-Lehmann shift of two samples and its
Moses (Mann-Whitney) interval, exact for small samples, with the fewest samples a level can be
claimed with; and the binomial counts of the sign test that families are judged by."""
import functools
import math
import statistics


def normal_quantile(p):
    """z with P(Z <= z) = p, by bisection on erf (the standard library has no inverse)."""
    lo, hi = -12.0, 12.0
    for _ in range(100):
        mid = (lo + hi) / 2
        if 0.5 * (1 + math.erf(mid / math.sqrt(2))) < p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


#: above this many pairs of samples the Mann-Whitney statistic's spread is taken as normal
EXACT_PAIRS = 400


@functools.lru_cache(maxsize=None)
def u_cdf(n, m):
    """P(U <= u) for u = 0..nm, U the Mann-Whitney statistic of n and m samples of one
    distribution (no ties): the counts of the classic recursion, exact."""
    counts = [[1] for _ in range(m + 1)]          # n = 0: one arrangement, U = 0
    for i in range(1, n + 1):
        row = [[1]]                               # m = 0
        for j in range(1, m + 1):
            left, down = counts[j], row[j - 1]    # (i-1, j) shifted by j; (i, j-1)
            size = i * j + 1
            row.append([(left[u - j] if 0 <= u - j < len(left) else 0) +
                        (down[u] if u < len(down) else 0) for u in range(size)])
        counts = row
    total, acc, out = math.comb(n + m, n), 0, []
    for c in counts[m]:
        acc += c
        out.append(acc / total)
    return out


def lower_index(n, m, alpha):
    """The index c of the Moses interval [d(c), d(nm-1-c)] (d sorted, 0-based) at two-sided
    level alpha, or None when n and m samples cannot reach it: the narrowest interval, the
    whole range of the differences, already excludes 0 by chance with probability
    2 / C(n+m, n), and a level below that cannot be claimed. Exact up to EXACT_PAIRS pairs."""
    if n < 1 or m < 1 or 2 / math.comb(n + m, n) > alpha:
        return None
    if n * m <= EXACT_PAIRS:
        cdf = u_cdf(n, m)
        k = 0                                     # the largest k with P(U <= k - 1) <= alpha/2
        while cdf[k] <= alpha / 2:
            k += 1
        return k - 1
    z = normal_quantile(1 - alpha / 2)
    return max(math.floor(n * m / 2 - z * math.sqrt(n * m * (n + m + 1) / 12)), 0)


def samples_needed(alpha):
    """The fewest samples a side (equal sides) for which a figure can be judged at alpha."""
    n = 1
    while 2 / math.comb(2 * n, n) > alpha:
        n += 1
    return n


def shift_interval(a, b, confidence):
    """Hodges-Lehmann estimate and Moses interval of ln(b) - ln(a); None for the interval when
    the samples are too few for the confidence (lower_index)."""
    la, lb = [math.log(x) for x in a], [math.log(x) for x in b]
    diffs = sorted(y - x for x in la for y in lb)
    c = lower_index(len(la), len(lb), 1 - confidence)
    if c is None:
        return statistics.median(diffs), None, None
    return statistics.median(diffs), diffs[c], diffs[len(diffs) - 1 - c]


def binomial_cdf(k, n):
    """P(X <= k) for X ~ Binomial(n, 1/2)."""
    return sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n
