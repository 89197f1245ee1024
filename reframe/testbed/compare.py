"""Is B slower than A? A compare of two runs (or two stacks, or two versions) that decides on
the samples, not on one summary figure, and exits non-zero when a figure got slower.

    python3 -m testbed.compare A B [--stack-a S] [--stack-b S] [--threshold 0.05]
                                   [--confidence 0.95] [--tests REGEX] [--json FILE]
                                   [--allow-machines]

A and B are ReFrame run reports (JSON files, or archived runs' folders) or session UUIDs of
ReFrame's results storage (`reframe --list-stored-sessions`); ReFrame's `--performance-compare`
prints the figures side by side and always exits 0, this adds the decision. A figure is one
entry of a test case's `figure_samples` (testbed/checks.py): every sample of, say, the half
round trip at 1024 bytes, all of them times, so "slower" is a ratio B/A above 1. A session's
cases are read by testbed.results: a case retried after a failure counts as its final attempt.

The statistics, per figure (nothing assumes a distribution; one slow outlier moves nothing):
  - the ratio is the Hodges-Lehmann estimate: exp of the median of ln(b_j) - ln(a_i) over all
    pairs of samples;
  - its interval is the Mann-Whitney (Moses) interval of that shift, at the confidence level
    corrected for the number of figures compared (Bonferroni), so that 200 figures compared
    at 95 % raise a false alarm in 5 % of clean comparisons, not in most of them;
  - verdict 'slower' when the whole interval lies above 1 + threshold, 'faster' when it lies
    below 1 / (1 + threshold), else 'same'; 'too few samples (n, needs N)' when the samples
    cannot reach the corrected level at all: with n and m samples the narrowest interval (the
    range of the differences) excludes 0 by chance with probability 2 / C(n+m, n), so at 95 %
    over 48 figures a figure needs 7 samples a side (lower_index, samples_needed). Such a
    figure is reported and not judged, and the Bonferroni count is over the figures judged.
Families: the modes of P2PMatrix (one size range, one stack, one size), PvmMatrix's send and
receive calls and encodings of one route, both packings (15 members; figures named
MEMBER/figure@size, testbed/samples.py), OneSided's Put and Get over its synchronisations (6
where all three run), answer one question measured at different minutes. On this machine
type the VM's state triples a latency for a minute at a time, and that moves one or two modes
(docs/measurement.md); a slower library moves them all. So a family of at least FAMILY_MIN
members is judged by the median over its members' ratios, with the sign test's interval for
that median (Bonferroni over families).
Exit status: 1 if a family, or a figure in no family, is 'slower'; 0 if none; 2 on bad input
(the file and the field named), and when A and B ran on different machine types (the cases'
machine_type; --allow-machines compares them anyway). Cases that failed before measuring are
named, their figures not judged. Stored sessions are read with the storage opened read-only."""
import argparse
import json
import math
import re
import statistics
import sys
from pathlib import Path

from testbed import results, storage
from testbed.rankstats import binomial_cdf, lower_index, samples_needed, shift_interval

#: the verdict of a figure whose samples cannot reach the level (lower_index)
TOO_FEW = 'too few samples'
#: a family of at least this many members (P2PMatrix's 12 modes) is judged as a whole
FAMILY_MIN = 6


class CompareError(Exception):
    pass


def load_all(sources):
    """Several sessions as one side ('a.json,UUID2,...'): their reports, merged so that the
    samples of a figure are pooled over the sessions. Pooled, the spread between sessions is
    part of the samples, and a figure with one value per session (HPL) gets its samples."""
    parts = [p for p in sources.split(',') if p]
    if not parts:
        raise CompareError(f'{sources!r}: no report or session named')
    reports = [load(p) for p in parts]
    if len(reports) == 1:
        return reports[0]
    merged = {}
    for report, name in zip(reports, parts):
        for _, case in figures_cases(report, name):
            key = (case.get('name'), results.case_stack(case))
            into = merged.setdefault(key, dict(case, figure_samples={}))
            samples = case.get('figure_samples') or {}
            for fig, values in (samples.items() if isinstance(samples, dict) else []):
                if not isinstance(values, list):
                    raise CompareError(f'{name}: {case.get("name")}: figure_samples.{fig}: '
                                       'expected a list of positive numbers')
                into['figure_samples'].setdefault(fig, []).extend(values)
    types = sorted(set().union(*(machine_types(r) for r in reports)))
    return {'session_info': {'uuid': sources, 'pooled_machine_types': types},
            'runs': [{'testcases': list(merged.values())}]}


def figures_cases(report, where):
    """(where in the report, test case) of the cases whose figures count (see figures()):
    each case as its final attempt left it, testbed.results' rule for retries and reruns."""
    try:
        results.check(report, where)
    except results.ResultsError as err:
        raise CompareError(str(err)) from None
    return [(f'runs[{i}].testcases[{j}]', c) for i, j, c in results.located_cases(report)
            if c.get('result') == 'pass' or (c.get('result') == 'fail' and
                                             c.get('fail_phase') == 'performance')]


def load(source):
    """A run report: a JSON file, an archived run's folder (testbed.results.load), or a stored
    session's UUID read from ReFrame's storage opened read-only (testbed.storage)."""
    try:
        if not results.report_file(source).exists() and re.fullmatch(r'[0-9a-f-]{8,36}',
                                                                       str(source)):
            return storage.session(source)
        return results.load(source)
    except (results.ResultsError, storage.StorageError) as err:
        raise CompareError(str(err)) from None


def machine_types(report):
    """The machine types a report's counted cases (and its session's tags) recorded."""
    found = {str(tc.get('machine_type')) for tc in results.final_cases(report)
             if tc.get('machine_type') not in (None, '', results.UNDEFINED)}
    info = report.get('session_info') or {}
    tagged = info.get('machine_type')
    return found | ({str(tagged)} if tagged else set()) | set(info.get('pooled_machine_types', []))


def check_machines(report_a, report_b, where=('A', 'B')):
    """CompareError unless both sides ran on one machine type (a side without a record
    passes): a session of another type, or of a mix of types, is slower or faster for
    reasons no library change explains."""
    ta, tb = machine_types(report_a), machine_types(report_b)
    if len(ta | tb) > 1 and ta and tb:
        raise CompareError(f'{where[0]} ran on machine type {", ".join(sorted(ta))} and '
                           f'{where[1]} on {", ".join(sorted(tb))}: not compared; give '
                           '--allow-machines (make: ALLOW_MACHINES=1) to compare them anyway')


def failed_cases(report, stack=None):
    """Names of the counted cases (of `stack`, if given) that failed before their figures
    were measured (their figures are not judged; said beside the table)."""
    def measured(tc):
        return tc.get('result') in ('pass', 'skip') or (
            tc.get('result') == 'fail' and tc.get('fail_phase') == 'performance')
    return sorted({f'{tc.get("display_name") or tc.get("name")} @{results.case_stack(tc)}'
                   for tc in results.final_cases(report) if not tc.get('fixture') and
                   stack in (None, results.case_stack(tc)) and not measured(tc)})


def positive_samples(values, where):
    """`values` if they are a list of positive numbers (a figure's samples), else a
    CompareError naming `where` (the file and the field)."""
    if not isinstance(values, list) or not all(
            isinstance(v, (int, float)) and v > 0 for v in values):
        raise CompareError(f'{where}: expected a list of positive numbers')
    return values


def figures(report, stack=None, tests=None, where='report'):
    """{(test name, figure): samples} of one stack (all stacks if None; then the stack is part
    of the key). Test cases that passed carry figures worth comparing, and so do those that
    only missed a reference (a regression may be exactly that); any other failure does not."""
    out = {}
    for i, case in figures_cases(report, where):
        samples = case.get('figure_samples') or {}
        name = case.get('name')
        if not isinstance(name, str) or not isinstance(samples, dict):
            raise CompareError(f'{where}: {i}: name or figure_samples malformed')
        if not samples or (tests and not re.search(tests, name)):
            continue
        case_stack = results.case_stack(case)
        if stack and case_stack != stack:
            continue
        for fig, values in samples.items():
            positive_samples(values, f'{where}: {i} ({name}): figure_samples.{fig}')
            key = (name, fig) if stack else (name, f'{case_stack}: {fig}')
            out[key] = [float(v) for v in values]
    return out


def judged(counts, confidence):
    """The keys of {key: (n_a, n_b)} judged, and the per-figure level: Bonferroni over the
    figures judged, each of which must reach that level with its samples. Shrunk until it
    holds (fewer figures judged, a less strict level): the choice rests on sample counts only,
    never on the values, so the family-wise rate stays as stated."""
    keys = [k for k, (n, m) in counts.items() if n and m]
    while True:
        level = 1 - (1 - confidence) / max(len(keys), 1)
        kept = [k for k in keys if lower_index(*counts[k], 1 - level) is not None]
        if len(kept) == len(keys):
            return set(kept), level
        keys = kept


def compare(report_a, report_b, stack_a=None, stack_b=None, threshold=0.05, confidence=0.95,
            tests=None, where=('A', 'B')):
    """One row per figure present on both sides, sorted; see the module's text."""
    if not 0 < confidence < 1:
        raise CompareError(f'--confidence {confidence}: expected a number between 0 and 1')
    if threshold < 0:
        raise CompareError(f'--threshold {threshold}: expected a number >= 0')
    fa = figures(report_a, stack_a, tests, where[0])
    fb = figures(report_b, stack_b, tests, where[1])
    keys = sorted(set(fa) & set(fb))
    testable, level = judged({k: (len(fa[k]), len(fb[k])) for k in keys}, confidence)
    need = samples_needed(1 - level)
    rows = []
    for key in keys:
        a, b = fa[key], fb[key]
        row = {'test': key[0], 'figure': key[1], 'stack_a': stack_a, 'stack_b': stack_b,
               'n_a': len(a), 'n_b': len(b), 'median_a': statistics.median(a),
               'median_b': statistics.median(b)}
        if key not in testable:
            rows.append(dict(row, ratio=None, lo=None, hi=None, verdict=TOO_FEW,
                             needs=need))
            continue
        est, lo, hi = shift_interval(a, b, level)
        verdict = ('slower' if lo > math.log1p(threshold) else
                   'faster' if hi < -math.log1p(threshold) else 'same')
        rows.append(dict(row, ratio=math.exp(est), lo=math.exp(lo), hi=math.exp(hi),
                         verdict=verdict))
    return rows


#: the parameters whose values are members of one family: P2PMatrix's modes, PvmMatrix's
#: packings (with the calls and encodings in the figure's name), OneSided's synchronisations
MEMBER_PARAMETERS = ('mode', 'pack', 'sync')


def family_of(test):
    """The test without its member parameters: the members of one family are replicates of
    one question (is this library slower at this size?) measured at different minutes."""
    return re.sub(r' %(?:' + '|'.join(MEMBER_PARAMETERS) + r')=\S+', '', test)


def family_figure(figure):
    """The figure without its member: 'send-recv/raw/half_round_trip_us@8' (PVM's calls and
    encodings, one-sided's operations: testbed/samples.py) is a member of the family
    'half_round_trip_us@8'; a stack prefix ('pvm-3.4: ...') stays."""
    stack, sep, rest = figure.rpartition(': ')
    return stack + sep + rest.rpartition('/')[2]


def families(rows, threshold, confidence):
    """Per (family, figure) with at least FAMILY_MIN members: the median over its members'
    ratios and the order-statistic interval of that median (sign test), Bonferroni-corrected
    over the families. A burst of the machine's state moves one or two members for a minute;
    a slower library moves them all, so this verdict, not a member's, sets the exit status.
    A family of fewer members is judged by its members' own verdicts."""
    groups = {}
    for r in rows:
        if r['ratio'] is not None:
            groups.setdefault((family_of(r['test']), family_figure(r['figure'])),
                              []).append(r)
    big = {k: v for k, v in groups.items() if len(v) >= FAMILY_MIN}
    alpha = (1 - confidence) / max(len(big), 1)
    out = []
    for (fam, fig), members in sorted(big.items()):
        ratios = sorted(m['ratio'] for m in members)
        n = len(ratios)
        k = 0                        # the largest k with P(X <= k) <= alpha / 2
        while binomial_cdf(k + 1, n) <= alpha / 2:
            k += 1
        lo, hi = (ratios[k], ratios[n - 1 - k]) if binomial_cdf(0, n) <= alpha / 2 else \
            (ratios[0], ratios[-1])
        verdict = ('slower' if lo > 1 + threshold else
                   'faster' if hi < 1 / (1 + threshold) else 'same')
        out.append({'family': fam, 'figure': fig, 'members': n,
                    'ratio': statistics.median(ratios), 'lo': lo, 'hi': hi, 'verdict': verdict})
    singles = [r for k, v in groups.items() if k not in big for r in v]
    return out, singles


def fmt_interval(r):
    return '-' if r['lo'] is None else f"{r['lo']:.3f}-{r['hi']:.3f}"


def table(rows, fams, singles, threshold, confidence):
    """The families, then every figure judged on its own that is not 'same'."""
    lines = []
    if fams:
        lines += ['| family | figure | members | median of B/A | interval | verdict |',
                  '|---|---|---:|---:|---|---|']
        lines += [f"| {f['family']} | {f['figure']} | {f['members']} | {f['ratio']:.3f} | "
                  f"{fmt_interval(f)} | {f['verdict']} |" for f in fams]
        lines.append('')
    lines += ['| test | figure | median A | median B | B/A | interval | verdict |',
              '|---|---|---:|---:|---:|---|---|']
    for r in rows:
        if r['verdict'] == 'same':
            continue
        ratio = '-' if r['ratio'] is None else f"{r['ratio']:.3f}"
        lines.append(f"| {r['test']} | {r['figure']} | {r['median_a']:.4g} | "
                     f"{r['median_b']:.4g} | {ratio} | {fmt_interval(r)} | {verdict_text(r)} |")
    n = sum(r['verdict'] != TOO_FEW for r in rows)
    counts = ', '.join(f"{sum(r['verdict'] == v for r in rows)} {v}"
                       for v in ('slower', 'faster', 'same', TOO_FEW))
    few = [r for r in rows if r['verdict'] == TOO_FEW]
    lines += ['', f'{len(rows)} figures on both sides, {n} tested on their samples at '
              f'{confidence:.0%} confidence corrected for {n} comparisons (Bonferroni), '
              f'threshold {threshold:.0%}: {counts} (figures judged "same" are not listed).'
              + (f' {len(few)} not judged: at that level a figure needs '
                 f'{few[0]["needs"]} samples a side (fewer cannot exclude "same" by chance '
                 'alone rarely enough).' if few else ''),
              f'{len(fams)} families judged as a whole (median over their members, '
              f'{confidence:.0%} corrected for {len(fams)}); {len(singles)} figures in no '
              'family judged on their own. The exit status follows those two.']
    return '\n'.join(lines)


def unmatched(fa, fb, where=('A', 'B')):
    """A line naming the figures one side has and the other has not (a figure renamed, a case
    not run or failed): not compared, and said."""
    out = []
    for side, mine, other in ((where[0], fa, fb), (where[1], fb, fa)):
        only = sorted(k for k in mine if k not in other)
        if only:
            names = ', '.join(f'{t} {f}' for t, f in only[:3])
            out.append(f'{len(only)} figure(s) only in {side}, not compared (renamed, not run or '
                       f'failed on the other side): {names}' + (' ...' if len(only) > 3 else ''))
    return '\n'.join(out) or 'every figure of each side is on the other'


def verdict_text(r):
    if r['verdict'] == TOO_FEW:
        return f"{TOO_FEW} ({min(r['n_a'], r['n_b'])}, needs {r['needs']})"
    return r['verdict']


def decide(fams, singles):
    """1 when a family or a figure in no family is slower, else 0."""
    return 1 if any(x['verdict'] == 'slower' for x in fams + singles) else 0


def series(report, stacks, threshold=0.05, confidence=0.95):
    """Each release against the one before it, in one session's report: the figures that
    changed beyond the threshold with confidence (rows as compare()'s, verdict not 'same')."""
    out = []
    for a, b in zip(stacks, stacks[1:]):
        rows = compare(report, report, a, b, threshold, confidence)
        out += [r for r in rows if r['verdict'] in ('slower', 'faster')]
    return out


def series_table(rows, stacks):
    if not rows:
        return f'no figure changed significantly from one release to the next ({", ".join(stacks)})'
    lines = ['| from | to | test | figure | median from | median to | to/from | interval | '
             'verdict |', '|---|---|---|---|---:|---:|---:|---|---|']
    lines += [f"| {r['stack_a']} | {r['stack_b']} | {r['test']} | {r['figure']} | "
              f"{r['median_a']:.4g} | {r['median_b']:.4g} | {r['ratio']:.3f} | "
              f"{fmt_interval(r)} | {r['verdict']} |" for r in rows]
    return '\n'.join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('a', help='the baseline: run report (JSON) or stored session UUID; a comma '
                    'list pools several sessions')
    ap.add_argument('b', nargs='?', help='the candidate: run report (JSON) or stored session '
                    'UUID (not with --series)')
    ap.add_argument('--stack-a', help='compare this stack of A ...')
    ap.add_argument('--stack-b', help='... with this stack of B (two stacks or two versions)')
    ap.add_argument('--threshold', type=float, default=0.05,
                    help='smallest slowdown that counts, as a fraction (default 0.05)')
    ap.add_argument('--confidence', type=float, default=0.95,
                    help='family-wise confidence level (default 0.95)')
    ap.add_argument('--tests', help='only test cases whose name matches this regex')
    ap.add_argument('--json', help='also write every row to this file')
    ap.add_argument('--allow-machines', action='store_true',
                    help='compare sessions of different machine types (refused otherwise)')
    ap.add_argument('--series', metavar='S1,S2,...',
                    help='instead: each of these stacks of report A against the one before it '
                         '(a version sweep); prints the changes, exit 0 unless bad input')
    args = ap.parse_args(argv)
    if args.series:
        stacks = args.series.split(',')
        try:
            rows = series(load_all(args.a), stacks, args.threshold, args.confidence)
        except CompareError as err:
            print(f'compare: {err}', file=sys.stderr)
            return 2
        print(series_table(rows, stacks))
        return 0
    if not args.series and not args.b:
        ap.error('B is needed unless --series is given')
    if bool(args.stack_a) != bool(args.stack_b):
        ap.error('--stack-a and --stack-b go together')
    try:
        report_a, report_b = load_all(args.a), load_all(args.b)
        if not args.allow_machines:
            check_machines(report_a, report_b, (args.a, args.b))
        rows = compare(report_a, report_b, args.stack_a, args.stack_b, args.threshold,
                       args.confidence, args.tests, (args.a, args.b))
    except CompareError as err:
        print(f'compare: {err}', file=sys.stderr)
        return 2
    for side, report, stack in ((args.a, report_a, args.stack_a),
                                (args.b, report_b, args.stack_b)):
        failed = failed_cases(report, stack)
        if failed:
            print(f'{side}: {len(failed)} test case(s) failed before their figures were '
                  f'measured; their figures are not judged: {", ".join(failed[:8])}'
                  + (f' and {len(failed) - 8} more' if len(failed) > 8 else ''))
    if not rows:
        print(f'compare: {args.a} and {args.b} have no figure in common (figure_samples of '
              'passed test cases)', file=sys.stderr)
        return 2
    print(unmatched(figures(report_a, args.stack_a, args.tests, args.a),
                    figures(report_b, args.stack_b, args.tests, args.b), (args.a, args.b)))
    fams, singles = families(rows, args.threshold, args.confidence)
    print(table(rows, fams, singles, args.threshold, args.confidence))
    if args.json:
        Path(args.json).write_text(json.dumps({'figures': rows, 'families': fams},
                                              indent=1) + '\n')
    return decide(fams, singles)


if __name__ == '__main__':
    sys.exit(main())
