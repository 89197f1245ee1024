"""Interleaved A/B (make ab): the decision on the paired differences of one job that ran
stack or build A and stack or build B launch by launch, in ABBA order, over the whole quick
point-to-point matrix (tests/ab.py, docs/ab.md).

    python3 -m testbed.ab REPORT [--threshold 0.02] [--confidence 0.95] [--json FILE]

A round is one launch of A and the launch of B next to it (A B, then B A, then A B ...), so
that a slow minute of the machine falls on both sides of a round. Every launch measures each
send/receive mode at each quick size; a round gives, per (mode, size), ln(B time / A time).
A family gathers the figures that answer one question: latency (8 B and 1 KiB) and bandwidth
(64 KiB and 1 MiB). Per round, a family's value is the median of its members' log ratios (a
burst that moves a few modes of one launch moves the median little). Over the rounds, the
family is judged on those values without assuming a distribution (a launch on this VM type
sometimes lands on another placement and moves every figure of the launch, so the values have
heavy tails): the ratio B/A is exp of their Hodges-Lehmann estimate, its interval the Wilcoxon
signed-rank interval at the confidence level corrected for the number of families
(Bonferroni), and the verdict 'slower' when the interval lies above 1 and the ratio above
1 + threshold, 'faster' when the mirror holds, 'undecided' when the ratio passes both the
threshold and what the run could see (below) but its interval reaches 1 (a few rounds on
another placement widen it: run again with more rounds), else 'same'. Each family also says the smallest
change the run could have seen (with power 0.9, from the rounds' robust spread): a 'same'
means no change larger than that. With fewer rounds than MIN_ROUNDS a family is reported and
not judged ('too few rounds').

Exit status: 0 when no family is slower (an 'undecided' one is said, not gated on: only a
slowdown the interval shows fails a run), 1 when one is, 2 on bad input (named).
"""
import argparse
import json
import math
import statistics
import sys
from pathlib import Path

from testbed import results

#: the families of the quick sizes, bytes
FAMILIES = {'latency': (8, 1024), 'bandwidth': (65536, 1048576)}
#: below this many rounds the signed-rank interval cannot exclude 1 at the corrected level
MIN_ROUNDS = 6
#: the smallest change that counts; a 5 % slowdown is the goal (docs/ab.md: the power curve)
THRESHOLD = 0.02


class AbError(Exception):
    """Bad input, in one line."""


def order(rounds):
    """The launches of `rounds` rounds in ABBA order: [(side, round), ...], rounds from 1."""
    out = []
    for r in range(1, rounds + 1):
        out += [('a', r), ('b', r)] if r % 2 else [('b', r), ('a', r)]
    return out


#: the transports a launch of the timing core measures (MPI two-sided, or PVM's calls in
#: p2p-pvm), as against the raw layers it runs beside them as baselines (shm, memcpy, tcp)
MEASURED = ('mpi', 'pvm')


def launch_figures(recs):
    """{(pair, variant, size): median half round trip, us} of one launch's measured records
    (MPI's, or PVM's)."""
    return {(r['pair'], r['variant'], r['size_bytes']): r['median_us'] for r in recs
            if r.get('transport') in MEASURED and r.get('median_us', 0) > 0}


def log_ratios(a_rounds, b_rounds):
    """Per round, {(pair, variant, size): ln(b / a)} over the figures both launches hold.
    `a_rounds`, `b_rounds`: one {figure: us} per round, in round order."""
    if len(a_rounds) != len(b_rounds):
        raise AbError(f'{len(a_rounds)} launches of A and {len(b_rounds)} of B: they pair by '
                      'round')
    return [{k: math.log(b[k] / a[k]) for k in a if k in b} for a, b in zip(a_rounds, b_rounds)]


def family_values(rounds, sizes):
    """Per round, the median of the log ratios of the figures at `sizes` (rounds where the
    family has no member are left out)."""
    out = []
    for logs in rounds:
        members = [v for (_, _, size), v in logs.items() if size in sizes]
        if members:
            out.append(statistics.median(members))
    return out


def walsh_interval(values, level):
    """Hodges-Lehmann estimate of the centre of `values` (the median of the Walsh averages)
    and the signed-rank interval at `level` (normal approximation of the statistic's spread,
    fine from about 10 values; scipy has the quantile, not the interval)."""
    from scipy import stats           # the venv's, loaded only when a family is judged
    n = len(values)
    walsh = sorted((values[i] + values[j]) / 2 for i in range(n) for j in range(i, n))
    m = len(walsh)
    z = stats.norm.ppf(1 - (1 - level) / 2)
    k = max(int(math.floor(n * (n + 1) / 4 - z * math.sqrt(n * (n + 1) * (2 * n + 1) / 24))),
            0)
    return statistics.median(walsh), walsh[k], walsh[m - 1 - k]


def detectable(values, level, power=0.9):
    """The smallest change (a fraction) a run with this spread of `values` would call at
    `level` with `power`: (z_level + z_power) x robust spread / sqrt(rounds), the spread the
    scaled median absolute deviation, so that one burst round does not set it."""
    from scipy import stats
    spread = stats.median_abs_deviation(values, scale='normal')
    z = stats.norm.ppf(1 - (1 - level) / 2) + stats.norm.ppf(power)
    return math.expm1(z * spread / math.sqrt(len(values)))


def judge(values, threshold=THRESHOLD, level=0.95):
    """The verdict on one family's per-round log ratios: {'rounds', 'ratio', 'lo', 'hi',
    'p_slower', 'detectable', 'verdict'}; see the module's text."""
    n = len(values)
    row = {'rounds': n, 'ratio': None, 'lo': None, 'hi': None, 'p_slower': None,
           'detectable': None, 'threshold': threshold}
    if n < MIN_ROUNDS:
        return dict(row, verdict=f'too few rounds ({n}, needs {MIN_ROUNDS})')
    from scipy import stats
    est, lo, hi = walsh_interval(values, level)
    p = 0.5 if not any(values) else float(
        stats.wilcoxon(values, alternative='greater').pvalue)
    past = abs(est) > math.log1p(threshold)
    seen = detectable(values, level)
    verdict = ('slower' if lo > 0 and est > 0 and past else
               'faster' if hi < 0 and est < 0 and past else
               'undecided' if past and abs(est) > math.log1p(seen) else 'same')
    return dict(row, ratio=math.exp(est), lo=math.exp(lo), hi=math.exp(hi), p_slower=p,
                detectable=seen, verdict=verdict)


def decide(a_rounds, b_rounds, threshold=THRESHOLD, confidence=0.95, thresholds=None):
    """{'families': {name: judge()}, 'figures': {key: median over rounds of B/A}};
    `thresholds`: {family: its own threshold} where one differs from `threshold`."""
    logs = log_ratios(a_rounds, b_rounds)
    level = 1 - (1 - confidence) / len(FAMILIES)
    fams = {name: judge(family_values(logs, sizes), (thresholds or {}).get(name, threshold),
                        level)
            for name, sizes in FAMILIES.items()}
    keys = sorted({k for r in logs for k in r}, key=lambda k: (k[2], k[0], k[1]))
    figures = {k: math.exp(statistics.median(r[k] for r in logs if k in r)) for k in keys}
    return {'families': fams, 'figures': figures}


def exit_status(decision):
    return 1 if any(f['verdict'] == 'slower' for f in decision['families'].values()) else 0


def _interval(f):
    return '-' if f['lo'] is None else f"{f['lo']:.3f}-{f['hi']:.3f}"


def table(case, decision, threshold, confidence):
    """Markdown: one case's families, then its figures."""
    lines = [f"### {case['a']} (A) against {case['b']} (B){case['inject']}", '',
             '| family | rounds | B/A | interval | could see | verdict |',
             '|---|---:|---:|---|---:|---|']
    for name, f in decision['families'].items():
        ratio = '-' if f['ratio'] is None else f"{f['ratio']:.3f}"
        seen = '-' if f['detectable'] is None else f"{f['detectable']:.1%}"
        lines.append(f"| {name} | {f['rounds']} | {ratio} | {_interval(f)} | {seen} | "
                     f"{f['verdict']} |")
    sizes = sorted({s for _, _, s in decision['figures']})
    modes = sorted({(p, v) for p, v, _ in decision['figures']})
    lines += ['', 'B/A per mode and size (bytes), the median over the rounds:', '',
              '| mode | ' + ' | '.join(str(s) for s in sizes) + ' |',
              '|---|' + '---:|' * len(sizes)]
    for p, v in modes:
        cells = [decision['figures'].get((p, v, s)) for s in sizes]
        lines.append(f'| {p}/{v} | ' + ' | '.join('-' if c is None else f'{c:.3f}'
                                                  for c in cells) + ' |')
    lines += ['', f'Families judged at {confidence:.0%} corrected for {len(FAMILIES)} families '
              f'(Bonferroni), threshold {threshold:.0%}: "slower" needs the interval above 1 '
              f'and the ratio above {1 + threshold:.2f}; "undecided": the ratio passes the '
              'threshold and what the run could see, but its interval reaches 1 (run again '
              'with more rounds, ROUNDS=48). '
              '"could see": the smallest change this run would call slower 9 times in 10, '
              'from the spread of its rounds.']
    return '\n'.join(lines)


def cases_of(report, where):
    """The AbP2P cases of a run report that ran: their sides and the per-round figures the
    test kept (variable ab_rounds, JSON {'a': [...], 'b': [...]}: per launch a list of
    [pair, variant, size, us])."""
    try:
        results.check(report, where)
    except results.ResultsError as err:
        raise AbError(str(err)) from None
    out = []
    for tc in results.final_cases(report):
        if not str(tc.get('name', '')).startswith('AbP2P'):
            continue
        if tc.get('result') != 'pass':
            out.append({'name': tc.get('name'), 'failed': tc.get('fail_reason') or
                        tc.get('result')})
            continue
        try:
            rounds = json.loads(tc.get('ab_rounds') or '')
            sides = {s: [{(p, v, int(z)): float(us) for p, v, z, us in launch}
                         for launch in rounds[s]] for s in ('a', 'b')}
        except (KeyError, TypeError, ValueError):
            raise AbError(f'{where}: {tc.get("name")}: ab_rounds: expected JSON '
                          '{"a": [[[pair, variant, size, us], ...], ...], "b": ...}') from None
        inject = tc.get('inject_b') or ''
        out.append({'name': tc.get('name'), 'a': tc.get('stack_a') or '?',
                    'b': tc.get('stack_b') or '?', 'sides': sides,
                    'inject': f' (B injected: {inject})' if inject else ''})
    if not out:
        raise AbError(f'{where}: no AbP2P case in the report (run make ab A=... B=...)')
    return out


def environs(names):
    """'envA|envB': the ReFrame environments of the stacks `names` (ci/ab.sh's filter)."""
    from testbed import registry
    try:
        reg = registry.load()
        stacks = reg.select(list(dict.fromkeys(names)), 'make ab A=/B=')
    except registry.RegistryError as err:
        raise AbError(str(err)) from None
    for stack in stacks:
        if 'mpi' not in stack.features or 'no-p2p' in stack.features:
            raise AbError(f'{reg.path}: stacks.{stack.name}: no MPI point-to-point program '
                          f'runs on it (make ab compares MPI stacks)')
    return '|'.join(s.environ for s in stacks)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ['--environs']:
        try:
            print(environs(argv[1:]))
        except AbError as err:
            print(f'ab: {err}', file=sys.stderr)
            return 2
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('report', help='the run report of make ab (JSON)')
    ap.add_argument('--threshold', type=float, default=THRESHOLD,
                    help=f'smallest change that counts, a fraction (default {THRESHOLD})')
    ap.add_argument('--confidence', type=float, default=0.95,
                    help='family-wise confidence (default 0.95)')
    ap.add_argument('--json', help='also write the decisions to this file')
    args = ap.parse_args(argv)
    try:
        if not 0 < args.confidence < 1 or args.threshold < 0:
            raise AbError('--confidence takes a number between 0 and 1, --threshold one >= 0')
        report = results.load(args.report)
        cases = cases_of(report, args.report)
    except (AbError, results.ResultsError) as err:
        print(f'ab: {err}', file=sys.stderr)
        return 2
    status, out = 0, []
    for case in cases:
        if 'failed' in case:
            print(f"{case['name']}: failed, not judged: {case['failed']}\n")
            status = max(status, 2)
            continue
        decision = decide(case['sides']['a'], case['sides']['b'], args.threshold,
                          args.confidence)
        print(table(case, decision, args.threshold, args.confidence) + '\n')
        status = max(status, exit_status(decision)) if status != 2 else status
        out.append({'name': case['name'], 'a': case['a'], 'b': case['b'],
                    'inject': case['inject'],
                    'families': decision['families'],
                    'figures': [[*k, v] for k, v in decision['figures'].items()]})
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + '\n')
    return status


if __name__ == '__main__':
    sys.exit(main())
