"""What make ab catches, and its false alarms: the table of ci/ab_power.sh's runs.

    python3 -m testbed.ab_power DIR [--threshold 0.02] [--confidence 0.95]

DIR holds the run reports of ci/ab_power.sh: aa-K.json (the stack against itself) and
inject-SETTING-K.json (B's launches slowed by the shim: a factor, '+Nns' or 'copy:N', N a
number of copies or a share of one). Every run is decided again here by testbed.ab with the
same rule make ab prints. Per setting and family: how many runs called B slower (for A/A:
false alarms; 'faster' and 'undecided' counted apart), the median over the runs of the estimated ratio B/A (the injection's *effective* slowdown, which
is not its factor: the shim's clock reads add tens of ns to every call) and of the smallest
change each run could see. Rows are in order of effective slowdown, a detection-power curve;
--svg FILE draws it (share of runs called slower against the effective ratio, per family and
kind of slowdown, the A/A runs at the foot of every line).
"""
import argparse
import re
import statistics
import sys
from pathlib import Path

from testbed import ab, results

NAME = re.compile(r'^(aa|inject-(?P<setting>.+))-(?P<k>\d+)\.json$')


def runs(folder, threshold=ab.THRESHOLD, confidence=0.95):
    """{setting ('' for A/A): [decision, ...]} of the reports in `folder`; a report with no
    decidable case is listed in 'unusable' with why."""
    out, unusable = {}, []
    for path in sorted(Path(folder).glob('*.json')):
        m = NAME.match(path.name)
        if not m:
            continue
        setting = m.group('setting') or ''
        try:
            cases = [c for c in ab.cases_of(results.load(str(path)), str(path))
                     if 'failed' not in c]
        except (ab.AbError, results.ResultsError) as err:
            unusable.append(f'{path.name}: {err}')
            continue
        if not cases:
            unusable.append(f'{path.name}: its AbP2P case failed')
            continue
        sides = cases[0]['sides']
        out.setdefault(setting, []).append(ab.decide(sides['a'], sides['b'], threshold,
                                                      confidence))
    return out, unusable


def rows(decided):
    """One row per (setting, family): counts and medians (see the module's text)."""
    out = []
    for setting, decisions in decided.items():
        for fam in ab.FAMILIES:
            judged = [d['families'][fam] for d in decisions
                      if d['families'][fam]['ratio'] is not None]
            if not judged:
                continue
            out.append({'setting': setting or 'none (A/A)', 'family': fam, 'runs': len(judged),
                        'slower': sum(f['verdict'] == 'slower' for f in judged),
                        'faster': sum(f['verdict'] == 'faster' for f in judged),
                        'undecided': sum(f['verdict'] == 'undecided' for f in judged),
                        'ratio': statistics.median(f['ratio'] for f in judged),
                        'could_see': statistics.median(f['detectable'] for f in judged)})
        any_slower = sum(any(f['verdict'] == 'slower' for f in d['families'].values())
                         for d in decisions)
        out.append({'setting': setting or 'none (A/A)', 'family': 'any (exit status 1)',
                    'runs': len(decisions), 'slower': any_slower, 'faster': None,
                    'undecided': None,
                    'ratio': None, 'could_see': None})
    return out


def table(rows_, threshold, confidence):
    lines = ['| B slowed by | family | runs | called slower | called faster | undecided | '
             'median B/A (effective) | median "could see" |',
             '|---|---|---:|---:|---:|---:|---:|---:|']
    fam_rows = sorted((r for r in rows_ if r['ratio'] is not None),
                      key=lambda r: (r['family'], r['ratio']))
    for r in fam_rows + [r for r in rows_ if r['ratio'] is None]:
        lines.append(f"| {r['setting']} | {r['family']} | {r['runs']} | {r['slower']} | "
                     f"{'-' if r['faster'] is None else r['faster']} | "
                     f"{'-' if r['undecided'] is None else r['undecided']} | "
                     f"{'-' if r['ratio'] is None else format(r['ratio'], '.3f')} | "
                     f"{'-' if r['could_see'] is None else format(r['could_see'], '.1%')} |")
    lines += ['', f'Each run decided by testbed.ab: threshold {threshold:.0%}, {confidence:.0%} '
              'family-wise. For A/A every "slower" or "faster" is a false alarm.']
    return '\n'.join(lines)


CURVE_MAX = 1.5     # slowdowns beyond this are caught every time; drawn, they squash the rest


def curve(rows_):
    """[(label, [(effective ratio, share called slower), ...])]: one line per family and kind
    of slowdown (the shim's padding, the extra copy), each starting from the A/A runs; settings
    whose effective ratio exceeds CURVE_MAX stay in the table only."""
    fam_rows = [r for r in rows_ if r['ratio'] is not None]
    out = []
    for fam in ab.FAMILIES:
        clean = [(r['ratio'], r['slower'] / r['runs']) for r in fam_rows
                 if r['family'] == fam and r['setting'] == 'none (A/A)']
        for kind, label in (('pad', 'padded calls'), ('copy', 'extra copy')):
            pts = sorted((r['ratio'], r['slower'] / r['runs']) for r in fam_rows
                         if r['family'] == fam and r['setting'] != 'none (A/A)'
                         and r['ratio'] <= CURVE_MAX
                         and r['setting'].startswith('copy:') == (kind == 'copy'))
            if pts:
                out.append((f'{fam}, {label}', [sorted(clean + pts)]))
    return out


def svg(rows_, threshold, stamp):
    from testbed.report import svg as draw
    return draw.line_chart('ab-power', 'make ab: share of runs called slower',
                           curve(rows_), 'B/A as the runs estimated it (effective slowdown)',
                           'share of runs called slower', stamp, logx=False,
                           marks=[(1.0, 1.0 + threshold, 'threshold', '#999999')])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('folder', help="ci/ab_power.sh's folder of run reports")
    ap.add_argument('--threshold', type=float, default=ab.THRESHOLD)
    ap.add_argument('--confidence', type=float, default=0.95)
    ap.add_argument('--svg', metavar='FILE', help='also draw the power curve into FILE')
    args = ap.parse_args(argv)
    if not Path(args.folder).is_dir():
        print(f'ab_power: {args.folder}: no such folder (ci/ab_power.sh makes one)',
              file=sys.stderr)
        return 2
    decided, unusable = runs(args.folder, args.threshold, args.confidence)
    for line in unusable:
        print(f'not counted: {line}')
    if not decided:
        print(f'ab_power: {args.folder}: no aa-K.json or inject-SETTING-K.json report to '
              'count', file=sys.stderr)
        return 2
    rows_ = rows(decided)
    print(table(rows_, args.threshold, args.confidence))
    if args.svg:
        stamp = f'{Path(args.folder).resolve()}: {sum(map(len, decided.values()))} runs'
        Path(args.svg).write_text(svg(rows_, args.threshold, stamp) + '\n')
        print(f'power curve: {args.svg}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
