"""How much does a figure move from one run to the next on this machine? The run-to-run spread
of P2PMatrix's latencies over N run reports.

    python3 -m testbed.spread REPORT... [--sizes 8,1024] [--statistic median] [--json FILE]
    python3 -m testbed.spread --archive 3        # the newest 3 quick runs of reframe/archive
    make spread [RUNS=3 | REPORTS="a.json b.json ..."] [STATISTIC=min]

A REPORT is a ReFrame run report (JSON file) or a session UUID of ReFrame's results storage.
Per stack, size range and size, each run gives one figure: the median, over P2PMatrix's modes,
of each mode's median half round trip (the figure P2PStack asserts), computed from the samples
the report keeps (figure_samples); --statistic min takes each mode's least sample instead
(NetPIPE's statistic), mean its mean. The table gives that figure in every run, its CV over the
runs (sample standard deviation over mean), the CV of the geometric mean over the modes, and
the median and largest CV of the modes taken one by one: once over every mode, once over the
modes in the low placement.

Why the geometric mean too: a stack's twelve modes fall in two groups at small sizes (the
buffered sends near the floor, the synchronous ones up to twice as slow), and the median over
twelve is the mean of the sixth and seventh, which sit at the gap between the groups: one mode
crossing it moves the median by the gap's width. The geometric mean weighs every mode's launch
alike, so each launch's own draw (where the library's shared pages land, docs/measurement.md)
averages out over twelve (the CVs of both over fresh machines' quick passes are in
docs/verification.md, "Figures the code comments carried"). Every case records
its own 8-byte shared-memory floor (shm_floor_8B_us), which says where the two ranks' CPUs sat
on the host. On this VM type two placements were seen whose floors differ about 5x, and every
small-message figure moves with them (docs/measurement.md). A mode is in the low placement
when its floor was within peer_table.STEADY of the lowest floor of that stack and size in
every run; over every mode, the CV is the machine's as much as the library's.

Units: us = microseconds, half a round trip. Exit status 0; 2 on bad input (the file and the
field named) or when no stack has P2PMatrix figures in every run.
"""
import argparse
import json
import re
import statistics
import sys
from pathlib import Path

from testbed import results
from testbed.archive import ARCHIVE, runs_of
from testbed.compare import CompareError, figures_cases, load, positive_samples
from testbed.peer_table import STEADY

FIGURE = re.compile(r'^half_round_trip_us@(\d+)$')
#: a mode's figure in one run, from its samples
STATISTICS = {'median': statistics.median, 'min': min, 'mean': statistics.mean}


def cv(values):
    """Sample standard deviation over mean (0 for fewer than two values)."""
    return statistics.stdev(values) / statistics.mean(values) if len(values) > 1 else 0.0


def run_figures(report, where, sizes, stat='median'):
    """{(stack, size_range, size): {mode: (the statistic of its samples in us, the case's
    8-byte floor us or None)}} of one report's P2PMatrix cases that passed or only missed a
    reference."""
    figs = {}
    for i, case in figures_cases(report, where):
        name = case.get('name')
        if not isinstance(name, str) or not name.startswith('P2PMatrix'):
            continue
        stack = results.case_stack(case)
        mode = re.search(r'%mode=(\S+)', name)
        size_range = case.get('size_range')
        samples = case.get('figure_samples')
        if not stack or not mode or not size_range or not isinstance(samples, dict):
            raise CompareError(f'{where}: {i} ({name}): stack_name, size_range or '
                               'figure_samples missing')
        floor = case.get('shm_floor_8B_us')
        floor = floor if isinstance(floor, (int, float)) and floor > 0 else None
        for fig, values in samples.items():
            m = FIGURE.match(fig)
            if not m or int(m.group(1)) not in sizes:
                continue
            field = f'{where}: {i} ({name}): figure_samples.{fig}'
            if not positive_samples(values, field):        # none: no statistic to take
                raise CompareError(f'{field}: expected a list of positive numbers')
            key = (stack, size_range, int(m.group(1)))
            figs.setdefault(key, {})[mode.group(1)] = (STATISTICS[stat](values), floor)
    return figs


def spread(reports, sizes, stat='median'):
    """Rows of the table, one per (stack, size range, size) measured in every report.
    'all': every mode measured in every run. 'low': the modes whose case ran in the low
    placement in every run (its floor within STEADY of the lowest floor of that stack and
    size over all runs): the spread of the program and the library with the machine held in
    one state, as far as the floor can tell."""
    per_run = [run_figures(report, where, sizes, stat) for where, report in reports]
    keys = set.intersection(*(set(figs) for figs in per_run))
    rows = []
    for key in sorted(keys):
        runs = [figs[key] for figs in per_run]
        modes = sorted(set.intersection(*(set(r) for r in runs)))
        floors = [r[m][1] for r in runs for m in modes]
        lowest = min((f for f in floors if f), default=None)
        low = [m for m in modes if lowest and all(
            r[m][1] and r[m][1] <= STEADY * lowest for r in runs)]
        row = {'stack': key[0], 'size_range': key[1], 'size_bytes': key[2],
               'lowest_floor_8B_us': lowest}
        for part, chosen in (('all', modes), ('low', low)):
            values = [statistics.median(r[m][0] for m in chosen) for r in runs] if chosen else []
            gmeans = [statistics.geometric_mean(r[m][0] for m in chosen)
                      for r in runs] if chosen else []
            mode_cvs = [cv([r[m][0] for r in runs]) for m in chosen]
            row[part] = {'modes': len(chosen), 'median_over_modes_us': values,
                         'cv': cv(values) if values else None,
                         'gmean_over_modes_us': gmeans,
                         'gmean_cv': cv(gmeans) if gmeans else None,
                         'mode_cv_median': statistics.median(mode_cvs) if chosen else None,
                         'mode_cv_max': max(mode_cvs) if chosen else None}
        rows.append(row)
    return rows


def render(rows, names, stat='median'):
    out = [f'# run-to-run spread over {len(names)} runs: ' + ', '.join(names),
           f'# per run: the median over the modes of each mode\'s {stat} half round trip, in us '
           '(microseconds); CV = standard deviation / mean over the runs (of that median; gm: '
           'of the geometric mean over the modes; and of each mode\'s own: median and largest '
           'over the modes)',
           f'# low placement: the modes whose 8-byte shared-memory floor was within {STEADY:g}x '
           'of the lowest (given, in us) in every run',
           f"{'':33} {'all modes':-^57}  {'low placement':-^69}",
           f"{'stack':17} {'range':6} {'bytes':>8} {'n':>3} {'per run (us)':24} {'CV':>6} "
           f"{'gm CV':>6} {'modes':>6} {'max':>6}  {'floor':>6} {'n':>3} {'per run (us)':24} "
           f"{'CV':>6} {'gm CV':>6} {'modes':>6} {'max':>6}"]

    def part(p):
        if not p['modes']:
            return f"{0:>3} {'-':24} {'':>6} {'':>6} {'':>6} {'':>6}"
        runs = ' '.join(f'{v:.4g}' for v in p['median_over_modes_us'])
        return (f"{p['modes']:>3} {runs:24} {p['cv']:6.1%} {p['gmean_cv']:6.1%} "
                f"{p['mode_cv_median']:6.1%} {p['mode_cv_max']:6.1%}")

    for r in rows:
        floor = f"{r['lowest_floor_8B_us']:.3f}" if r['lowest_floor_8B_us'] else '-'
        out.append(f"{r['stack']:17} {r['size_range']:6} {r['size_bytes']:>8} {part(r['all'])}  "
                   f"{floor:>6} {part(r['low'])}")
    return '\n'.join(out)


def newest_archived(count, archive=ARCHIVE, profile='quick'):
    """The report.json of the newest `count` archived runs of a profile, oldest first."""
    runs = [p for p in runs_of(profile, archive) if (p / 'report.json').exists()]
    if len(runs) < count:
        raise CompareError(f'{archive}: {len(runs)} archived {profile} runs, {count} asked for '
                           f'(each `make test` archives one)')
    return [str(p / 'report.json') for p in runs[-count:]]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('reports', nargs='*', help='run reports or stored session UUIDs')
    ap.add_argument('--archive', type=int, metavar='N',
                    help='the newest N quick runs of reframe/archive (instead of REPORT...)')
    ap.add_argument('--sizes', default='8,1024', help='sizes in bytes (default 8,1024)')
    ap.add_argument('--statistic', choices=sorted(STATISTICS), default='median',
                    help="each mode's figure from its samples (default median)")
    ap.add_argument('--json', metavar='FILE', help='also write the rows as JSON')
    args = ap.parse_args(argv)
    try:
        sizes = {int(s) for s in args.sizes.split(',')}
    except ValueError:
        print(f'error: --sizes {args.sizes!r}: a comma list of whole numbers', file=sys.stderr)
        return 2
    try:
        names = newest_archived(args.archive) if args.archive else args.reports
        if len(names) < 2:
            raise CompareError('a spread needs at least two runs')
        reports = [(n, load(n)) for n in names]
        rows = spread(reports, sizes, args.statistic)
        if not rows:
            raise CompareError('no stack has P2PMatrix figures at these sizes in every run')
    except CompareError as err:
        print(f'spread: {err}', file=sys.stderr)
        return 2
    print(render(rows, names, args.statistic))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + '\n')
    return 0


if __name__ == '__main__':
    sys.exit(main())
