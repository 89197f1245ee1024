"""Figure against version: the table of a version sweep (ci/sweep.sh), from its ReFrame report.

    python3 -m testbed.sweep_table REPORT [REPORT ...] [--stacks a,b,...]

One column per stack (stack name = family-version), sorted by family, then by version
numerically (4.10 after 4.9); one row per figure: every perf variable of every test case
(P2PMatrix's latency and bandwidth there are geometric means over the range's sizes) and, for
P2PMatrix, latency at the range's smallest size and bandwidth at its largest (quick: 8 B and
1 MiB), from the median of the samples the report keeps (figure_samples) or, for reports
without them, from the p2p_sizes.csv kept in the test's output folder.
With several reports (repeats of one sweep) a cell is the median over them, the lowest and
highest in brackets: on a shared 2-core machine the differences between versions in one run
are often within the spread between runs.
Exit status: 0 when every stack (all in the reports, or those of --stacks) has test cases and
all of them passed, 1 otherwise, 2 when a report cannot be read.
"""
import argparse
import csv
import json
import os
import re
import statistics
import sys

from testbed import results
from testbed.results import case_stack

#: the perf variables of P2PMatrix are geometric means over the sizes: said so in the row
GEOMEAN_TESTS = ('P2PMatrix',)


def version_key(name):
    """Sort key of a stack name 'family-version': family, then the version's numeric parts
    (so 4.10 comes after 4.9); a text part sorts after any number at the same place."""
    m = re.match(r'^(.*?)-(\d.*)$', name)
    family, version = (m.group(1), m.group(2)) if m else (name, '')
    parts = tuple((0, int(p), '') if p.isdigit() else (1, 0, p)
                  for p in re.split(r'[._-]', version) if p)
    return family, parts


def size_label(size):
    for unit, factor in (('MiB', 1 << 20), ('KiB', 1 << 10)):
        if size >= factor and size % factor == 0:
            return f'{size // factor} {unit}'
    return f'{size} B'


def case_label(name):
    """'P2PMatrix %mode=Send-Recv/complete %size_range=quick' -> 'P2PMatrix Send-Recv/complete
    quick': the parameters' values are enough to tell the cases apart in a row label."""
    return re.sub(r'%\w+=', '', name).strip()


def p2p_sizes(tc):
    """{size: median half round trip in us} of the MPI transport, from the report's samples or
    else the CSV the test keeps beside its log; {} when neither is there."""
    samples = tc.get('figure_samples') or {}
    sizes = {size: results.median(v) for (name, size), v in
             ((results.split_figure(k), v) for k, v in samples.items())
             if name == 'half_round_trip_us' and size is not None and v}
    if sizes:
        return sizes
    path = os.path.join(tc.get('outputdir') or '', 'p2p_sizes.csv')
    try:
        with open(path) as fh:
            rows = csv.DictReader(line for line in fh if not line.startswith('#'))
            return {int(r['size_bytes']): float(r['median_us']) for r in rows
                    if r['transport'] == 'mpi'}
    except (OSError, KeyError, ValueError):
        return {}


def figures(tc):
    """[(row label, value)] of one test case, in a stable order."""
    label = case_label(tc['name'])
    test = results.test_of(tc)
    out = []
    # a failed case's per-size figures are not to be trusted (nor an older run's CSV)
    if test == 'P2PMatrix' and tc['result'] == 'pass':
        sizes = p2p_sizes(tc)
        if sizes:
            lo, hi = min(sizes), max(sizes)
            out.append((f'{label}: latency at {size_label(lo)} (us, median half round trip)',
                        sizes[lo]))
            # bytes per us = 10^6 bytes/s = MB/s
            out.append((f'{label}: bandwidth at {size_label(hi)} (MB/s = 10^6 bytes/s)',
                        hi / sizes[hi]))
    for var, pv in results.perf(tc).items():
        if pv.value is None:           # a case that failed before its performance stage
            continue
        how = ', geometric mean over the sizes' if test in GEOMEAN_TESTS and pv.unit != 'ratio' \
            else ''
        out.append((f'{label}: {var} ({pv.unit}{how})', pv.value))
    return out


def fmt(value):
    # four significant digits, never an exponent for the MB/s of a shared-memory copy
    return f'{value:.0f}' if abs(value) >= 1000 else f'{value:.4g}'


def spread(values):
    if len(values) == 1:
        return fmt(values[0])
    return f'{fmt(statistics.median(values))} ({fmt(min(values))}–{fmt(max(values))})'


def reported_version(text):
    m = re.search(r'\d+\.\d+(\.\d+)?', text or '')
    return m.group() if m else ''


def load_cases(report_path):
    """Every test case of the report, the last run's when a case was retried."""
    with open(report_path) as fh:
        return results.final_cases(json.load(fh))


def table(cases, stacks=None):
    """(markdown lines, problems): the figure-against-version table of these test cases over
    `stacks` (default: every stack that has a case), and what kept a stack from running."""
    stacks = sorted(set(stacks or [case_stack(tc) for tc in cases]), key=version_key)
    cells, rows, by_stack, versions, problems = {}, [], {}, {}, []
    for tc in sorted(cases, key=lambda tc: tc['name']):
        stack = case_stack(tc)
        if stack not in stacks:
            continue
        by_stack.setdefault(stack, []).append(tc)
        versions[stack] = versions.get(stack) or reported_version(tc.get('library_version'))
        for label, value in figures(tc):
            if label not in rows:
                rows.append(label)
            cells.setdefault((label, stack), []).append(value)
    lines = ['| figure | ' + ' | '.join(stacks) + ' |', '|---' * (len(stacks) + 1) + '|',
             '| library reports version | ' + ' | '.join(versions.get(s) or '—' for s in stacks)
             + ' |']
    for label in rows:
        lines.append(f'| {label} | ' + ' | '.join(
            spread(cells[(label, s)]) if (label, s) in cells else '—' for s in stacks) + ' |')
    verdicts = []
    for s in stacks:
        failed = [tc for tc in by_stack.get(s, []) if tc['result'] != 'pass']
        if s not in by_stack:
            problems.append(f'{s}: no test case ran')
        for tc in failed:
            problems.append(f"{s}: {tc['name']}: {tc['result']} in {tc.get('fail_phase')}: "
                            f"{(tc.get('fail_reason') or '').strip().split(chr(10))[0][:200]}")
        verdicts.append('no test' if s not in by_stack else
                        f'{len(failed)} of {len(by_stack[s])} failed' if failed else
                        f'all {len(by_stack[s])} passed')
    lines.append('| test cases | ' + ' | '.join(verdicts) + ' |')
    return lines, problems


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('reports', nargs='+', metavar='REPORT',
                    help="ReFrame's JSON run report of the sweep (several: repeats)")
    ap.add_argument('--stacks', default='', help='comma-separated stack names (the columns)')
    args = ap.parse_args(argv)
    cases = []
    for report in args.reports:
        try:
            cases += load_cases(report)
        except (OSError, ValueError, KeyError) as err:
            print(f'error: sweep_table: no usable report {report}: {err}', file=sys.stderr)
            return 2
    stacks = [s.strip() for s in args.stacks.split(',') if s.strip()]
    lines, problems = table(cases, stacks)
    print('\n'.join(lines))
    for p in problems:
        print(f'- {p}')
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
