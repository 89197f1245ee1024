"""One reading of ReFrame's run reports: the test cases that count and their figures, as rows.

    python3 -m testbed.results SOURCE... [--csv FILE] [--parquet FILE]

A SOURCE is a ReFrame run report (JSON file), an archived run (a folder of reframe/archive,
testbed/archive.py: its report.json and the machine.json beside it) or a session UUID of
ReFrame's results storage (`reframe --list-stored-sessions`). Every reader of results
(testbed.summary, testbed.report, testbed.compare, testbed.spread, testbed.sweep_table,
testbed.peer_table, testbed.failures, testbed.references, site/cluster/profile_check.py) takes
its test cases and figures from here, so that they agree on which attempt of a case counts.

Retries and reruns, the one rule: a test case is (name, system, partition, environ), and it
counts as its final attempt, the one in the last run of the report that holds it. ReFrame's
report keeps every case in runs[0]; a later run holds only the cases retried after a failure
(--max-retries) or, under --reruns, every case again. So a case that failed and passed on its
retry counts as passed, with the retry's figures; a case that passed at once counts from runs[0]
although later runs (other cases' retries) exist; under --reruns the last repetition counts.
Cases keep the order in which they first appear. Pooling several sessions is the caller's
choice (testbed.compare's comma lists), never a side effect of reading one report.

Rows (Row): one per perf variable of a counted case (source 'perfvalue': ReFrame's value,
reference, bounds and unit), one per entry of its figure_samples (source 'samples': the samples
the test kept, the value their median, `size` the number after '@' in the figure's name), and
one with an empty variable for a case that has neither (source 'case': its result alone).
ReFrame's build fixtures are cases too (`fixture` true in the report) and are left out of rows.
"""
import argparse
import csv
import json
import os
import re
import statistics
import subprocess
import sys
from collections import namedtuple
from dataclasses import dataclass, fields
from pathlib import Path

#: the value ReFrame writes for a test variable the case never set
UNDEFINED = '<undefined>'


class ResultsError(ValueError):
    """A source that cannot be read as results; the message names the file (or session)."""


# --- the cases that count -------------------------------------------------------------------

def case_key(tc):
    """What makes a test case one case across the runs of a report (ReFrame's own index)."""
    return (tc.get('name') or tc.get('display_name'), tc.get('system'), tc.get('partition'),
            tc.get('environ'))


def check(report, where):
    """Raise ResultsError unless `report` has the shape of a ReFrame run report."""
    runs = report.get('runs') if isinstance(report, dict) else None
    if not isinstance(runs, list) or not runs or not all(
            isinstance(r, dict) and isinstance(r.get('testcases'), list) for r in runs):
        raise ResultsError(f'{where}: no runs[-1].testcases: not a ReFrame run report')


def located_cases(report):
    """[(run index, case index, test case)] of the cases that count (the module's rule), in
    the order of their first appearance; entries that are not objects are left out."""
    final = {}
    runs = report.get('runs') if isinstance(report, dict) else None
    for i, run in enumerate(runs if isinstance(runs, list) else []):
        for j, tc in enumerate((run.get('testcases') or []) if isinstance(run, dict) else []):
            if isinstance(tc, dict):
                final[case_key(tc)] = (i, j, tc)       # a later run's attempt replaces it
    return list(final.values())


def final_cases(report):
    """The test cases that count, each as its final attempt left it (the module's rule)."""
    return [tc for _, _, tc in located_cases(report)]


# --- one case's figures --------------------------------------------------------------------

#: one entry of ReFrame's perfvalues: [value, reference, lower, upper, unit, result]
PerfValue = namedtuple('PerfValue', 'value reference lower upper unit result')


def parse_key(key):
    """ReFrame's perfvalues key 'system:partition:variable' as its three parts ('' for a
    part the key lacks)."""
    parts = str(key).rsplit(':', 2)
    return ('',) * (3 - len(parts)) + tuple(parts)


def variable(key):
    """The variable's name in ReFrame's perfvalues key 'system:partition:variable'."""
    return parse_key(key)[2]


def perf(tc):
    """{variable: PerfValue} of one test case, in the report's order (None values kept)."""
    out = {}
    for key, entry in (tc.get('perfvalues') or {}).items():
        entry = list(entry) + [None] * (6 - len(entry))
        out[variable(key)] = PerfValue(*entry[:6])
    return out


def split_figure(name):
    """A figure_samples name 'half_round_trip_us@8' as ('half_round_trip_us', 8); a name
    without a whole number after '@' (s_per_traj, time_s@N7200) as (name, None)."""
    base, at, size = str(name).rpartition('@')
    return (base, int(size)) if at and size.isdigit() else (str(name), None)


def median(values):
    """The median of `values`, None when there are none."""
    values = list(values)
    return statistics.median(values) if values else None


# --- stacks --------------------------------------------------------------------------------

_ENVIRON_NAMES = {}


def _registry_names():
    """{ReFrame environment: stack name} of the registry, read once per registry file state."""
    from testbed import registry
    path = Path(os.environ.get('TESTBED_REGISTRY') or registry.DEFAULT_FILE)
    try:
        stamp = (str(path), path.stat().st_mtime_ns)
    except OSError:
        return {}
    if stamp not in _ENVIRON_NAMES:
        try:
            names = {s.environ: s.name for s in registry.load(path).stacks.values()}
        except registry.RegistryError:
            names = {}
        _ENVIRON_NAMES.clear()
        _ENVIRON_NAMES[stamp] = names
    return _ENVIRON_NAMES[stamp]


def stack_of(environ):
    """The stack name of a ReFrame environment ('mpich-4_0' -> 'mpich-4.0'): the registry's
    stack of that environment, else the name with its underscores made dots again (a sweep's
    release stacks, family-X.Y.Z, may be in no registry here). None stays None."""
    if environ is None:
        return None
    return _registry_names().get(environ) or str(environ).replace('_', '.')


def case_stack(tc):
    """A test case's stack: the name StackLaunch recorded, else that of its environment (a
    case skipped before it ran has only the environment)."""
    return tc.get('stack_name') or stack_of(tc.get('environ'))


def test_of(tc):
    """The test's class name: the first word of the case's name."""
    return (str(tc.get('name') or tc.get('display_name') or '').split() or [''])[0]


# --- rows ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Row:
    """One figure of one counted test case (see the module's text)."""
    session: str
    machine_type: str
    system: str
    partition: str
    stack: str
    library_version: str
    configure: str          # the library's configure flags as the case recorded them
    knobs: str              # the case's knobs, 'name=value' sorted and space-separated
    test: str
    case: str               # the case's display name: the test and its parameters
    size: int | None        # the figure's size (after '@' in a figure_samples name)
    variable: str
    value: float | None
    unit: str
    samples: tuple          # the samples behind the value (source 'samples')
    reference: float | None
    lower: float | None
    upper: float | None
    result: str             # ReFrame's result of the case: pass, fail, skip, ...
    fail_phase: str
    source: str             # perfvalue | samples | case
    origin: str             # where in the report: runs[i].testcases[j]


COLUMNS = [f.name for f in fields(Row)]
#: a sample's unit, from the end of its figure's name (the tests name figures unit last:
#: half_round_trip_us, time_s@N7200)
SAMPLE_UNITS = {'us': 'us', 's': 's', 'ms': 'ms', 'ns': 'ns', 'MBps': 'MB/s'}


def _text(value):
    return '' if value in (None, UNDEFINED) else str(value)


def _number(value):
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        else None


def machine_record(cases, path=None):
    """The machine record (testbed/machine.py) the test cases carry, else that of the archived
    run beside the report file `path` (its machine.json: testbed/archive.py), else {}."""
    for tc in cases:
        if tc.get('machine_record') not in (None, '', UNDEFINED):
            try:
                return json.loads(tc['machine_record'])
            except (TypeError, json.JSONDecodeError):
                raise ResultsError(f'{path}: test case {tc.get("name")}: machine_record: '
                                   'not a JSON object') from None
    beside = Path(path).with_name('machine.json') if path else None
    if beside and beside.exists():
        try:
            return json.loads(beside.read_text())
        except (OSError, json.JSONDecodeError) as err:
            raise ResultsError(f'{beside}: cannot read machine record: {err}') from None
    return {}


def machine_type(cases, path=None):
    """The machine type the cases (or the archived run) recorded; '' when unknown."""
    for tc in cases:
        if tc.get('machine_type') not in (None, '', UNDEFINED):
            return tc['machine_type']
    try:
        record = machine_record(cases, path)
    except ResultsError:
        return ''               # an unreadable record is the report's readers' to name
    return record.get('machine_type', '') if isinstance(record, dict) else ''


def rows(report, path=None):
    """Every Row of a report's counted cases (fixtures left out). `path`: the report's file,
    for an archived run's machine.json."""
    session = _text((report.get('session_info') or {}).get('uuid')) or \
        (Path(path).stem if path else '')
    located = located_cases(report)
    mtype = machine_type([tc for _, _, tc in located], path)
    out = []
    for i, j, tc in located:
        if tc.get('fixture'):
            continue
        knobs = tc.get('knobs') if isinstance(tc.get('knobs'), dict) else {}
        common = dict(
            session=session, machine_type=_text(tc.get('machine_type')) or mtype,
            system=_text(tc.get('system')), partition=_text(tc.get('partition')),
            stack=_text(case_stack(tc)), library_version=_text(tc.get('library_version')),
            configure=_text(tc.get('stack_configure')),
            knobs=' '.join(f'{k}={v}' for k, v in sorted(knobs.items())), test=test_of(tc),
            case=_text(tc.get('display_name') or tc.get('name')), result=_text(tc.get('result')),
            fail_phase=_text(tc.get('fail_phase')), origin=f'runs[{i}].testcases[{j}]')
        got = []
        for var, pv in perf(tc).items():
            got.append(Row(**common, size=None, variable=var, value=_number(pv.value),
                           unit=_text(pv.unit), samples=(), reference=_number(pv.reference),
                           lower=_number(pv.lower), upper=_number(pv.upper), source='perfvalue'))
        samples = tc.get('figure_samples')
        for name, values in (samples.items() if isinstance(samples, dict) else []):
            values = tuple(float(v) for v in values if _number(v) is not None) \
                if isinstance(values, list) else ()
            var, size = split_figure(name)
            unit = SAMPLE_UNITS.get(var.split('@')[0].rpartition('_')[2], '')
            got.append(Row(**common, size=size, variable=var, value=median(values), unit=unit,
                           samples=values, reference=None, lower=None, upper=None,
                           source='samples'))
        out += got or [Row(**common, size=None, variable='', value=None, unit='', samples=(),
                           reference=None, lower=None, upper=None, source='case')]
    return out


# --- sources -------------------------------------------------------------------------------

def report_file(source):
    """The report file of a source path: the file itself, or an archived run's report.json."""
    path = Path(source)
    return path / 'report.json' if path.is_dir() else path


def load(source, where=None):
    """The run report of a source (a JSON file, an archived run's folder, or a session UUID
    of ReFrame's results storage); ResultsError names the source when it cannot be read."""
    path = report_file(source)
    if path.exists():
        try:
            return json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
            raise ResultsError(f'{where or path}: not a readable run report: {err}') from None
    if not re.fullmatch(r'[0-9a-f-]{8,36}', str(source)):
        raise ResultsError(f'{source}: no such report file, and not a session UUID')
    return stored_session(source)


def stored_session(uuid):
    """A session's report from ReFrame's results storage (site/local.py names the file)."""
    site = Path(__file__).resolve().parents[2] / 'site' / 'local.py'
    proc = subprocess.run(['reframe', '-C', str(site), '--describe-stored-sessions', uuid],
                          capture_output=True, text=True)
    try:
        sessions = json.loads(proc.stdout)
    except json.JSONDecodeError:
        sessions = None
    if proc.returncode != 0 or not sessions:
        raise ResultsError(f'session {uuid}: not in the results storage '
                           f'({proc.stderr.strip()[-300:] or "no such session"})')
    return sessions[0]


def read(sources):
    """The rows of several sources, in the order given."""
    out = []
    for source in sources:
        path = report_file(source)
        out += rows(load(source), path if path.exists() else None)
    return out


# --- export --------------------------------------------------------------------------------

def _cell(name, value):
    if name == 'samples':
        return ' '.join(repr(v) for v in value)
    return '' if value is None else value


def to_csv(rows_, path):
    """Write rows as CSV, one line each; samples space-separated, None as an empty field."""
    with open(path, 'w', newline='') as fh:
        writer = csv.writer(fh, lineterminator='\n')
        writer.writerow(COLUMNS)
        for row in rows_:
            writer.writerow([_cell(c, getattr(row, c)) for c in COLUMNS])


def _typed(name, text):
    """A CSV field back as the Row's type."""
    if name == 'samples':
        return tuple(float(v) for v in text.split())
    if name == 'size':
        return int(text) if text else None
    if name in ('value', 'reference', 'lower', 'upper'):
        return float(text) if text else None
    return text


def from_csv(path):
    """The rows of a file to_csv wrote."""
    with open(path, newline='') as fh:
        reader = csv.DictReader(fh)
        if reader.fieldnames != COLUMNS:
            raise ResultsError(f'{path}: columns {reader.fieldnames}; expected {COLUMNS}')
        return [Row(**{c: _typed(c, r[c]) for c in COLUMNS}) for r in reader]


def _polars():
    try:
        import polars
    except ImportError:
        raise ResultsError('Parquet needs the Python package polars (pip install polars in '
                           'the ReFrame venv)') from None
    return polars


def to_parquet(rows_, path):
    """Write rows as Parquet (polars); samples as a list column."""
    pl = _polars()
    schema = {c: pl.Utf8 for c in COLUMNS} | {
        'size': pl.Int64, 'value': pl.Float64, 'reference': pl.Float64, 'lower': pl.Float64,
        'upper': pl.Float64, 'samples': pl.List(pl.Float64)}
    data = {c: [list(getattr(r, c)) if c == 'samples' else getattr(r, c) for r in rows_]
            for c in COLUMNS}
    pl.DataFrame(data, schema=schema).write_parquet(path)


def from_parquet(path):
    """The rows of a file to_parquet wrote."""
    pl = _polars()
    return [Row(**dict(r, samples=tuple(r['samples'] or ()))) for r in
            pl.read_parquet(path).select(COLUMNS).iter_rows(named=True)]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('sources', nargs='+', metavar='SOURCE',
                    help='run report (JSON), archived run folder, or stored session UUID')
    ap.add_argument('--csv', metavar='FILE', help='write the rows as CSV')
    ap.add_argument('--parquet', metavar='FILE', help='write the rows as Parquet (polars)')
    args = ap.parse_args(argv)
    try:
        got = read(args.sources)
        if args.csv:
            to_csv(got, args.csv)
        if args.parquet:
            to_parquet(got, args.parquet)
    except ResultsError as err:
        print(f'results: {err}', file=sys.stderr)
        return 2
    print(f'{len(got)} rows from {len(args.sources)} source(s)'
          + ''.join(f'; written: {f}' for f in (args.csv, args.parquet) if f))
    return 0


if __name__ == '__main__':
    sys.exit(main())
