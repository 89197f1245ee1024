"""Performance references as data: read them for the tests, regenerate them from measured runs.

A reference file is CSV with one row per (system, partition, stack, test, case, variable):

    system,partition,stack,test,case,variable,value,lower,upper,unit,runs

`lower` and `upper` are ReFrame's relative bounds (-0.2 means 20 % below `value`). `runs` names
the ReFrame session(s) whose figures produced the row. Rows are written only by
`python3 -m testbed.references update`, whose rule for the tolerance is in its --help and in
docs/measurement.md; a commit that changes a reference file says which run produced it.
"""
import argparse
import csv
import json
import math
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

FIELDS = ['system', 'partition', 'stack', 'test', 'case', 'variable',
          'value', 'lower', 'upper', 'unit', 'runs']
HEADER_COMMENT = ('# Performance references, one row per system/partition/stack/test/case/'
                  'variable.\n# Written by `python3 -m testbed.references update` from the '
                  'ReFrame runs in column runs; never edited by hand.\n')


class ReferenceError(ValueError):
    """A reference file that cannot be used; the message names the file, line and field."""


@dataclass(frozen=True)
class Reference:
    value: float
    lower: float
    upper: float
    unit: str
    runs: str

    def as_reframe(self):
        return (self.value, self.lower, self.upper, self.unit)


def _number(path, lineno, name, text):
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise ReferenceError(f'{path}: line {lineno}: field {name}: {text!r} is not a number') \
            from None
    if not math.isfinite(value):
        raise ReferenceError(f'{path}: line {lineno}: field {name}: {text!r} is not finite')
    return value


def load(path):
    """Read a reference file into {(system, partition, stack, test, case, variable): Reference}."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ReferenceError(f'{path}: no such file') from None
    lines = [(n, line) for n, line in enumerate(text.splitlines(), 1)
             if line.strip() and not line.lstrip().startswith('#')]
    if not lines:
        raise ReferenceError(f'{path}: no header line (expected: {",".join(FIELDS)})')
    header_no, header = lines[0]
    columns = next(csv.reader([header]))
    if columns != FIELDS:
        raise ReferenceError(f'{path}: line {header_no}: header is {",".join(columns)}; '
                             f'expected {",".join(FIELDS)}')
    table = {}
    for lineno, line in lines[1:]:
        row = next(csv.reader([line]))
        if len(row) != len(FIELDS):
            raise ReferenceError(f'{path}: line {lineno}: {len(row)} fields, '
                                 f'expected {len(FIELDS)} ({",".join(FIELDS)})')
        rec = dict(zip(FIELDS, row))
        for name in FIELDS[:6] + ['unit']:
            if not rec[name].strip():
                raise ReferenceError(f'{path}: line {lineno}: field {name} is empty')
        value = _number(path, lineno, 'value', rec['value'])
        lower = _number(path, lineno, 'lower', rec['lower'])
        upper = _number(path, lineno, 'upper', rec['upper'])
        if value <= 0:
            raise ReferenceError(f'{path}: line {lineno}: field value: {value} is not positive')
        if not -1 <= lower <= 0:
            raise ReferenceError(f'{path}: line {lineno}: field lower: {lower} is not in [-1, 0]')
        if upper < 0:
            raise ReferenceError(f'{path}: line {lineno}: field upper: {upper} is negative')
        key = tuple(rec[f] for f in FIELDS[:6])
        if key in table:
            raise ReferenceError(f'{path}: line {lineno}: duplicate row for {"/".join(key)}')
        table[key] = Reference(value, lower, upper, rec['unit'], rec['runs'])
    return table


def for_test(path, system, partition, stack, test, case, variables):
    """ReFrame's `reference` dict for one test case; missing variables are left out."""
    table = load(path)
    found = {}
    for var in variables:
        ref = table.get((system, partition, stack, test, case, var))
        if ref is not None:
            found[var] = ref.as_reframe()
    return {f'{system}:{partition}': found}, [v for v in variables if v not in found]


# --- regeneration from ReFrame run reports -----------------------------------------------

def final_cases(report):
    """Each test case of a ReFrame run report as its last run left it (a retry replaces the
    try before it)."""
    final = {}
    for run in report.get('runs', []):
        for tc in run.get('testcases', []):
            final[(tc['name'], tc.get('system'), tc.get('partition'), tc['environ'])] = tc
    return list(final.values())


def _report_cases(report_path):
    """Yield the test cases with perf values from a ReFrame JSON run report."""
    try:
        report = json.loads(Path(report_path).read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise ReferenceError(f'{report_path}: cannot read run report: {err}') from None
    session = report.get('session_info', {}).get('uuid', Path(report_path).stem)
    for tc in final_cases(report):
        if tc.get('perfvalues') and tc.get('reference_case'):
            yield session, tc


def _quantile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def derive(report_paths, k=4.0):
    if len(report_paths) < 2:
        raise ReferenceError('a tolerance is measured from the spread between runs: '
                             f'give at least 2 run reports (got {len(report_paths)})')
    return _derive(report_paths, k)


def _derive(report_paths, k):
    """Reference rows, each with the reference file its test names, from run reports.

    value = median of the runs' figures. The tolerance is k times the larger of
    (a) the spread between runs of this figure, (max - min) / median;
    (b) the machine's run-to-run noise for this kind of figure: the 90th percentile of
        |run / median - 1| pooled over every figure of the same stack and test,
    so that a figure whose few runs happened to agree still gets the tolerance its
    neighbours show the machine needs. (A within-run spread, (p95 - median) / median, is not
    used: with 10 samples its p95 is the largest sample, and one slow sample of LAM made it
    18 times the median.)
    """
    groups = {}
    for report_path in report_paths:
        for session, tc in _report_cases(report_path):
            for key, entry in tc['perfvalues'].items():
                system, partition, var = key.split(':')
                value, unit = entry[0], entry[4]
                if value is None:
                    continue
                gkey = (system, partition, tc.get('stack_name') or tc['environ'],
                        tc['name'].split()[0], tc['reference_case'], var)
                g = groups.setdefault(gkey, {'values': [], 'unit': unit, 'runs': [],
                                             'file': tc.get('reference_file')})
                g['values'].append(float(value))
                if session not in g['runs']:
                    g['runs'].append(session)
    pooled = {}
    for gkey, g in groups.items():
        median = statistics.median(g['values'])
        pool = pooled.setdefault((gkey[2], gkey[3]), [])
        pool += [abs(v / median - 1) for v in g['values'] if median]
    rows = []
    for gkey, g in sorted(groups.items()):
        vals = g['values']
        median = statistics.median(vals)
        between = (max(vals) - min(vals)) / median if median else 0.0
        noise = _quantile(pooled[(gkey[2], gkey[3])], 0.9)
        tol = k * max(between, noise)
        rows.append(dict(zip(FIELDS[:6], gkey), value=f'{median:.6g}',
                         lower=f'{-min(tol, 0.99):.3f}', upper=f'{tol:.3f}', unit=g['unit'],
                         runs=' '.join(g['runs']), file=g['file']))
    return rows


def write(path, rows, keep=None):
    """Write `rows`, keeping the rows of `keep` (an existing table) that `rows` do not replace."""
    merged = {}
    for key, ref in (keep or {}).items():
        merged[key] = dict(zip(FIELDS[:6], key), value=f'{ref.value:.6g}',
                           lower=f'{ref.lower:.3f}', upper=f'{ref.upper:.3f}',
                           unit=ref.unit, runs=ref.runs)
    for row in rows:
        merged[tuple(row[f] for f in FIELDS[:6])] = row
    with open(path, 'w', newline='') as fh:
        fh.write(HEADER_COMMENT)
        writer = csv.DictWriter(fh, FIELDS, lineterminator='\n', extrasaction='ignore')
        writer.writeheader()
        for key in sorted(merged):
            writer.writerow(merged[key])


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog='python3 -m testbed.references',
        description='Regenerate reference files from ReFrame run reports. value = median over '
                    'the reports; tolerance = K x max(spread between runs, 90th percentile of '
                    'the run-to-run deviations of every figure of the same stack and test).')
    sub = ap.add_subparsers(dest='cmd', required=True)
    up = sub.add_parser('update', help='write references from run reports')
    up.add_argument('reports', nargs='+', help='ReFrame JSON run reports')
    up.add_argument('--dir', default=str(Path(__file__).resolve().parents[1] / 'references'),
                    help='folder of the reference files (each test names its file)')
    up.add_argument('--k', type=float, default=4.0, help='tolerance multiplier (default 4)')
    up.add_argument('--replace', action='store_true',
                    help='drop rows the reports do not measure (default: keep them)')
    chk = sub.add_parser('check', help='validate reference files')
    chk.add_argument('files', nargs='+')
    args = ap.parse_args(argv)
    try:
        if args.cmd == 'check':
            for f in args.files:
                print(f'{f}: {len(load(f))} references, all valid')
            return 0
        rows = derive(args.reports, args.k)
        if not rows:
            raise ReferenceError('no performance figures found in ' + ', '.join(args.reports))
        by_file = {}
        for row in rows:
            if not row.get('file'):
                raise ReferenceError(f'test {row["test"]} names no reference_file')
            by_file.setdefault(row['file'], []).append(row)
        for name, file_rows in sorted(by_file.items()):
            path = Path(args.dir) / name
            keep = None if args.replace or not path.exists() else load(path)
            write(path, file_rows, keep)
            print(f'{path}: wrote {len(file_rows)} references from {len(args.reports)} '
                  f'report(s)')
        return 0
    except ReferenceError as err:
        print(f'error: {err}', file=sys.stderr)
        return 2


if __name__ == '__main__':
    sys.exit(main())
