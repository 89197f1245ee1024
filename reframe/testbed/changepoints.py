"""Change points in one series of per-session values (docs/history.md): ruptures locates each,
a permutation test (scipy) decides whether it is kept, a bootstrap over the sessions (scipy)
gives the interval of its size.

False change points are held down three ways: segments of at least MIN_SIZE sessions; a split
is kept only when the cost it removes (ruptures' L2 cost, on the log of the values) is beaten
by fewer than `level` of the series' permutations, `level` being ALPHA over the series judged
(Bonferroni, counting only the series long enough to reach it: Tarone); each side of a kept
split is searched again and tested the same way (binary segmentation, as e-divisive means
does), so a change is found where it is and nowhere else.
"""
import math
from dataclasses import dataclass

import numpy as np
import ruptures
from scipy import stats

#: the chance of one or more false change points over all the series of one history
ALPHA = 0.01
#: the fewest sessions in a segment
MIN_SIZE = 3
#: the first pass of permutations; a series plainly flat after it is not permuted further
FIRST_RESAMPLES = 999
CONFIDENCE = 0.95
SEED = 20261129


@dataclass
class Change:
    index: int          # the first session after the change (0-based, in the series)
    ratio: float        # median of the segment after over the median of the one before
    low: float
    high: float
    p: float            # the permutation test's p-value
    n_before: int
    n_after: int


def min_p(n, min_size=MIN_SIZE):
    """The smallest p-value the permutation test can give n sessions: the best split's two
    groups arise in at least 2 of the C(n, n//2) ways to deal the values (either order)."""
    return 1.0 if n < 2 * min_size else min(1.0, 2 / math.comb(n, n // 2))


def sessions_needed(level, min_size=MIN_SIZE):
    """The fewest sessions whose series can reach `level`."""
    n = 2 * min_size
    while min_p(n, min_size) > level:
        n += 1
    return n


def reachable_level(lengths, alpha=ALPHA, min_size=MIN_SIZE):
    """(level, [keys judged]) for {key: series length}: Tarone's Bonferroni, the smallest m
    such that at most m series can reach alpha / m; those are judged at alpha / m."""
    for m in range(1, len(lengths) + 1):
        judged = [k for k, n in lengths.items() if min_p(n, min_size) <= alpha / m]
        if len(judged) <= m:
            return alpha / m, judged
    return alpha / max(len(lengths), 1), []


def split_gain(y, axis=-1, min_size=MIN_SIZE):
    """The most L2 cost one split into two segments of at least min_size removes (ruptures'
    CostL2: the sum of squared deviations from the segment's mean), along `axis`."""
    y = np.moveaxis(np.asarray(y, dtype=float), axis, -1)
    n = y.shape[-1]
    cum = np.cumsum(y, axis=-1)
    t = np.arange(min_size, n - min_size + 1)
    left = cum[..., t - 1] / t
    right = (cum[..., -1:] - cum[..., t - 1]) / (n - t)
    return (t * (n - t) / n * (left - right) ** 2).max(axis=-1)


def locate(y, min_size=MIN_SIZE):
    """Where one split of y falls (ruptures' binary segmentation, L2 cost, every position)."""
    algo = ruptures.Binseg(model='l2', min_size=min_size, jump=1).fit(np.asarray(y, float))
    return algo.predict(n_bkps=1)[0]


def p_value(y, level, min_size=MIN_SIZE, seed=SEED):
    """The permutation test's p-value of y's best split: how often the values in a random order
    give a split that removes as much cost. A first pass of FIRST_RESAMPLES; where it is not
    plainly above 5 %, enough more to resolve `level`: 100 / level (all orders when fewer)."""
    def stat(x, axis):
        return split_gain(x, axis=axis, min_size=min_size)

    def test(n):
        return stats.permutation_test((np.asarray(y, float),), stat, vectorized=True,
                                      permutation_type='pairings', n_resamples=n,
                                      alternative='greater', batch=20000,
                                      random_state=np.random.default_rng(seed)).pvalue
    p = test(FIRST_RESAMPLES)
    if p > 0.05 or p > 100 * level:
        return p
    return test(min(max(9999, math.ceil(100 / level)), 2_000_000))


def interval(before, after, seed=SEED):
    """The ratio of the segments' medians and its percentile bootstrap interval, resampling
    sessions (their values vary from session to session, more than samples within one)."""
    ratio = float(np.median(after) / np.median(before))
    if len(set(before)) < 2 and len(set(after)) < 2:
        return ratio, ratio, ratio
    res = stats.bootstrap((np.asarray(before, float), np.asarray(after, float)),
                          lambda b, a, axis: np.median(a, axis=axis) / np.median(b, axis=axis),
                          vectorized=True, n_resamples=9999, method='percentile',
                          confidence_level=CONFIDENCE, random_state=np.random.default_rng(seed))
    return ratio, float(res.confidence_interval.low), float(res.confidence_interval.high)


def find(values, level, min_size=MIN_SIZE):
    """The change points of a series of positive per-session values, in order."""
    y = np.log(np.asarray(values, dtype=float))
    cuts, todo = {}, [(0, len(y))]
    while todo:
        a, b = todo.pop()
        if min_p(b - a, min_size) > level:
            continue
        p = p_value(y[a:b], level, min_size)
        if p > level:
            continue
        t = a + locate(y[a:b], min_size)
        cuts[t] = p
        todo += [(a, t), (t, b)]
    edges = [0] + sorted(cuts) + [len(y)]
    out = []
    for lo, t, hi in zip(edges, edges[1:], edges[2:]):
        ratio, low, high = interval(values[lo:t], values[t:hi])
        out.append(Change(t, ratio, low, high, cuts[t], t - lo, hi - t))
    return out
