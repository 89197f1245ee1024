"""What the report reads: ReFrame run reports, the per-size tables of P2PMatrix cases, and the
figures of the other tests, checked enough that a bad file fails with its name and field."""
import csv
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from testbed import results
from testbed.results import case_stack as stack_of   # page.py and series.py name it so

# P2PMatrix's per-size tables carry the geometric mean of their medians as the case's latency
# perf value: a table whose mean differs was overwritten by a later run of the same test.
STALE_TOLERANCE = 1e-3
RELEASE = re.compile(r'^(?P<family>[A-Za-z][\w-]*?)-(?P<version>\d+\.\d+\.\d+)$')
RANGE_ORDER = ['quick', 'netpipe', 'small', 'medium', 'large']


class ReportError(ValueError):
    """A report the page cannot be made from; the message names the file and the field."""


@dataclass
class Run:
    path: Path
    report: dict
    session: str
    time_start: str
    machine: dict
    cases: list
    versions: dict = field(default_factory=dict)
    stacks: list = field(default_factory=list)
    #: {stack: its configure flags} for stacks built here (StackLaunch's stack_configure)
    configure: dict = field(default_factory=dict)


def _require(path, where, obj, key, kind):
    if not isinstance(obj, dict) or key not in obj:
        raise ReportError(f'{path}: {where}: missing field "{key}"')
    if not isinstance(obj[key], kind):
        raise ReportError(f'{path}: {where}.{key}: expected {kind.__name__}, '
                          f'got {type(obj[key]).__name__}')
    return obj[key]


def load(path):
    path = Path(path)
    try:
        report = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ReportError(f'{path}: cannot read run report: {err}') from None
    return from_report(report, path)


def stored_releases(names, reports=None):
    """Runs of the stored sessions (testbed.storage, read-only) that ran a stack of `names`
    (the releases site/versions.toml lists), each as 'results storage, session UUID'; the
    version series takes each release from the newest. `reports` for tests."""
    from testbed import storage
    if reports is None and not storage.path().exists():
        return []                    # nothing stored yet (a fresh machine): no stored series
    try:
        reports = storage.sessions() if reports is None else reports
    except storage.StorageError as err:
        raise ReportError(str(err)) from None
    out = []
    for report in reports:
        cases = results.final_cases(report)
        if any(stack_of(tc) in names for tc in cases if not tc.get('fixture')):
            uuid = (report.get('session_info') or {}).get('uuid', '?')
            out.append(from_report(report, Path(f'results storage, session {uuid}')))
    return out


def from_report(report, path):
    """A Run of a report already read; `path` names it in errors and on the page."""
    info = _require(path, 'top level', report, 'session_info', dict)
    runs = _require(path, 'top level', report, 'runs', list)
    for i, run in enumerate(runs):
        for j, tc in enumerate(_require(path, f'runs[{i}]', run, 'testcases', list)):
            for key in ('name', 'environ', 'result'):
                _require(path, f'runs[{i}].testcases[{j}]', tc, key, str)
            pv = tc.get('perfvalues') or {}
            if not isinstance(pv, dict) or any(
                    not isinstance(v, list) or len(v) < 5 for v in pv.values()):
                raise ReportError(f'{path}: runs[{i}].testcases[{j}] ({tc["name"]}).perfvalues:'
                                  ' expected {name: [value, ref, lower, upper, unit, ...]}')
    cases = [tc for tc in results.final_cases(report) if not tc.get('fixture')]
    run = Run(path, report, str(info.get('uuid') or 'unknown session'),
              _when(info.get("time_start")), _machine(path if path.exists() else None, cases),
              cases)
    for tc in cases:
        stack = stack_of(tc)
        if stack not in run.stacks:
            run.stacks.append(stack)
        version = tc.get('library_version')
        if version not in (None, '', 'unknown', '<undefined>'):
            run.versions.setdefault(stack, version)
        flags = tc.get('stack_configure')
        if flags not in (None, '', '<undefined>'):
            run.configure.setdefault(stack, flags)
    return run


def _when(stamp):
    """ReFrame's 20261123T060200+0000 as 2026-11-23 06:02 UTC (as given when not that form)."""
    m = re.match(r'(\d{4})(\d\d)(\d\d)T(\d\d)(\d\d)\d\d\+0000$', str(stamp or ''))
    return f'{m[1]}-{m[2]}-{m[3]} {m[4]}:{m[5]} UTC' if m else str(stamp or 'unknown date')


def _machine(path, cases):
    """The machine record the test cases carry (testbed/machine.py), else the archive's."""
    try:
        return results.machine_record(cases, path)
    except results.ResultsError as err:
        raise ReportError(str(err)) from None


def short_version(text):
    """'Open MPI v4.1.4, package: ...' -> '4.1.4': the first dotted number."""
    m = re.search(r'\d+(?:\.\d+)+', text or '')
    return m.group(0) if m else (text or '')


def perf(tc):
    """{variable: (value, unit)} of one case, None values left out."""
    return {var: (pv.value, pv.unit) for var, pv in results.perf(tc).items()
            if isinstance(pv.value, (int, float))}


def geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


@dataclass
class SizeTable:
    stack: str
    mode: str
    size_range: str
    rows: list           # the mpi transport's rows: size_bytes, median_us, bandwidth_MBps
    problem: str = ''    # why there is no table ('' when there is)


def size_table(tc):
    """The per-size table of one P2PMatrix case, or a SizeTable saying why it is missing."""
    t = SizeTable(stack_of(tc), str(tc.get('mode')), str(tc.get('size_range')), [])
    out = tc.get('outputdir')
    if not out or not Path(out).is_dir():
        t.problem = f'output directory {out or "(not in the report)"} is gone'
        return t
    path = Path(out) / 'p2p_sizes.csv'
    if not path.exists():
        t.problem = f'{path} is gone'
        return t
    try:
        lines = [ln for ln in path.read_text().splitlines() if not ln.startswith('#')]
        rows = [r for r in csv.DictReader(lines) if r.get('transport') == 'mpi']
        # the curves need these; the raw-layer columns are absent between nodes (no shm)
        t.rows = [{k: float(r[k]) for k in ('size_bytes', 'median_us', 'bandwidth_MBps')}
                  for r in rows]
    except (OSError, KeyError, TypeError, ValueError) as err:
        t.problem = f'{path}: unreadable ({type(err).__name__}: {err})'
        t.rows = []
        return t
    latency = perf(tc).get('latency', (None,))[0]
    mean = geomean([r['median_us'] for r in t.rows if r['median_us'] > 0])
    if not t.rows:
        t.problem = f'{path} has no mpi rows'
    elif latency and mean and abs(mean / latency - 1) > STALE_TOLERANCE:
        t.problem = (f'{path} belongs to another run (its latency {mean:.4g} us, this '
                     f'session\'s {latency:.4g} us): overwritten by a later run')
        t.rows = []
    return t


def p2p_cases(run):
    return [tc for tc in run.cases if tc['name'].startswith('P2PMatrix')]


def modes(cases):
    found = []
    for tc in cases:
        if tc.get('mode') not in found:
            found.append(tc.get('mode'))
    return [str(m) for m in found]


def ranges(cases):
    found = {str(tc.get('size_range')) for tc in cases}
    return sorted(found, key=lambda r: (RANGE_ORDER.index(r) if r in RANGE_ORDER else 99, r))


def release_key(version):
    return tuple(int(p) for p in version.split('.'))


def releases(runs):
    """{family: [(version, run, stack)]} for stacks named family-X.Y.Z, oldest release first;
    a release in several reports is taken from the session that started last."""
    found = {}
    for run in sorted(runs, key=lambda r: r.report['session_info'].get('time_start_unix') or 0):
        for stack in run.stacks:
            m = RELEASE.match(stack)
            if m:
                found.setdefault(m['family'], {})[m['version']] = (run, stack)
    return {fam: [(v, *rs[v]) for v in sorted(rs, key=release_key)] for fam, rs in found.items()}
