"""The four studies beside this testbed's figures (docs/studies.md).

    python3 -m testbed.studies REPORT... [--out reframe/reports/studies] [--studies DIR]

Each study's findings live in reframe/studies/<id>.toml, transcribed from its seed (shared/seeds):
the finding's sentence, the original's figures with their units and the table, figure or section
they come from, and either how it maps to a figure here (a ReFrame test, a perf variable or
figure, a case filter; a ratio of two such figures; a direction of testbed/directions.py) or why
it cannot run here (the hardware or software named). For every study this writes OUT/<id>.md: each
finding with the original's magnitude, the figure here with stack and case, whether its direction
is asserted (and passed or failed) or the figure only reported, and the findings that cannot run
here. testbed/report/studies.py draws the same as a section of the HTML report.

Reports are read through testbed.results (a report file, an archived run's folder or a stored
session UUID). Exit status: 0, 1 when an asserted direction failed, 2 on bad input (a study file
or a report, named in one line with the field and the fix).

A study file (TOML): a table [study] (id = the file's stem, authors, title, seed, setting) and an
array [[finding]], each with
  id, claim, source                    strings (source: the seed's table, figure or section)
  original                             a list of {what, value, unit}: value a number or [low,
                                       high]; a figure the text states without a number has
                                       `what` only
  runs_here                            true or false
  cannot_run                           (runs_here false) what is missing here, named
  note                                 optional: how the figure here differs from the original's
  [finding.here]                       (runs_here true) `direction` (a rule of
                                       testbed/directions.py), and/or:
  [finding.here.asserted_by]           test (and optional case, searched in the case's name):
                                       a test whose own sanity asserts the finding's
                                       direction; its cases that passed or failed in sanity
                                       are the verdict (skipped ones and those stopped before
                                       sanity are not counted), and/or:
  [finding.here.figure]                test, variable (a regular expression matched in full),
                                       optional case (searched in the case's name), system,
                                       partition (matched in full), stack, size (bytes, for a
                                       per-size figure), time_as_bandwidth (true: a time in us
                                       at `size` set as MB/s)
  [finding.here.over]                  optional: the denominator of a ratio, the fields that
                                       differ from figure's (the rest are figure's); a row
                                       pairs with the denominator's row of the same system,
                                       partition, stack, case, variable and size, each but
                                       where the two figures differ (the case not at all when
                                       the tests differ)
"""
import argparse
import re
import sys
import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from testbed import directions, results

REPO = Path(__file__).resolve().parents[2]
STUDIES_DIR = REPO / 'reframe' / 'studies'
TESTS_DIR = REPO / 'reframe' / 'tests'
OUT_DIR = REPO / 'reframe' / 'reports' / 'studies'

#: the units a study file may give, spelled out where the page shows them
UNITS = {'Mbps': 'Mbps (10^6 bits per second)', 'Gbps': 'Gbps (10^9 bits per second)',
         'MB/s': 'MB/s (10^6 bytes per second)', 'us': 'us (microseconds)', 's': 's (seconds)',
         'Gflop/s': 'Gflop/s (10^9 floating-point operations per second)',
         'percent': 'percent', 'x': 'x (a ratio)', 'kB': 'kB (kilobytes, as the paper writes them)',
         'KB': 'KB (kilobytes, as the paper writes them)', 'bytes': 'bytes'}
FIGURE_FIELDS = {'test': str, 'variable': str, 'case': str, 'system': str, 'partition': str,
                 'stack': str, 'size': int, 'time_as_bandwidth': bool}


class StudyError(ValueError):
    """A study file that cannot be used; the message names the file, the field and the fix."""


@dataclass(frozen=True)
class Figure:
    """Which rows of the results make a figure (see the module's text)."""
    test: str
    variable: str
    case: str = ''
    system: str = ''
    partition: str = ''
    stack: str = ''
    size: int | None = None
    #: the figure is a time in us at `size` bytes, set here as MB/s (size / time)
    time_as_bandwidth: bool = False

    def label(self):
        parts = [f'{self.test} {self.variable}'] + [
            f'{f.name} {getattr(self, f.name)}' for f in fields(self)[2:]
            if getattr(self, f.name) not in ('', None, False)]
        return ', '.join(parts)


@dataclass
class Finding:
    id: str
    claim: str
    source: str
    original: list
    runs_here: bool
    cannot_run: str = ''
    note: str = ''
    direction: str = ''
    asserted_by: tuple = ()         # (test, case regex): a test whose sanity asserts it
    figure: Figure | None = None
    over: Figure | None = None


@dataclass
class Study:
    id: str
    authors: str
    title: str
    seed: str
    setting: str
    path: Path
    findings: list = field(default_factory=list)


# --- the study files --------------------------------------------------------------------------

def _get(where, table, key, kind, fix, required=True):
    if key not in table:
        if required:
            raise StudyError(f'{where}.{key}: missing; {fix}')
        return None
    value = table[key]
    if kind is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    else:
        ok = isinstance(value, kind) and not (kind is int and isinstance(value, bool))
    if not ok or (kind is str and not value.strip()):
        raise StudyError(f'{where}.{key}: {value!r} is not a non-empty {kind.__name__}; {fix}')
    return value


def _unknown(where, table, allowed):
    extra = sorted(set(table) - set(allowed))
    if extra:
        raise StudyError(f'{where}: unknown field {extra[0]!r}; the fields are '
                         f'{", ".join(allowed)}')


def _figure(where, table, base=None):
    if not isinstance(table, dict):
        raise StudyError(f'{where}: not a table; give it as [{where.split(": ", 1)[-1]}] with '
                         'test and variable')
    _unknown(where, table, FIGURE_FIELDS)
    values = {} if base is None else {f.name: getattr(base, f.name) for f in fields(Figure)}
    for key, kind in FIGURE_FIELDS.items():
        got = _get(where, table, key, kind, f'give {key} as a {kind.__name__}',
                   required=base is None and key in ('test', 'variable'))
        if got is not None:
            values[key] = got
    for key in ('variable', 'case', 'partition'):
        try:
            re.compile(values.get(key) or '')
        except re.error as err:
            raise StudyError(f'{where}.{key}: not a regular expression ({err}); escape it')
    if values.get('time_as_bandwidth') and not values.get('size'):
        raise StudyError(f'{where}.time_as_bandwidth: needs the size (bytes) the time is '
                         'taken at; give size')
    if base is not None and Figure(**values) == base:
        raise StudyError(f'{where}: the same figure as the numerator; name the field that '
                         'differs (case, stack, partition, variable, ...)')
    return Figure(**values)


def _original(where, entries):
    if not isinstance(entries, list) or not entries:
        raise StudyError(f'{where}: missing or empty; list the original\'s figures as '
                         '{ what = "...", value = N, unit = "..." } ({ what = "..." } alone '
                         'for a finding stated without a number)')
    for j, entry in enumerate(entries):
        at = f'{where}[{j}]'
        if not isinstance(entry, dict):
            raise StudyError(f'{at}: not a table; write {{ what = "...", value = N, unit = "..." }}')
        _unknown(at, entry, ('what', 'value', 'unit'))
        _get(at, entry, 'what', str, 'say what the figure is')
        if 'value' not in entry:
            if 'unit' in entry:
                raise StudyError(f'{at}.unit: a unit without a value; give the value too')
            continue
        value = entry['value']
        pair = isinstance(value, list) and len(value) == 2 and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)
        if not pair:
            _get(at, entry, 'value', float, 'give a number or [low, high]')
        elif value[0] > value[1]:
            raise StudyError(f'{at}.value: {value} is not [low, high]; put the lower first, '
                             'or give two entries for two figures')
        unit = _get(at, entry, 'unit', str, f'give one of {", ".join(UNITS)}')
        if unit not in UNITS:
            raise StudyError(f'{at}.unit: {unit!r} is not a known unit; use one of '
                             f'{", ".join(UNITS)}')
    return entries


def _finding(where, table):
    _unknown(where, table, ('id', 'claim', 'source', 'original', 'runs_here', 'cannot_run',
                            'note', 'here'))
    fid = _get(where, table, 'id', str, 'give the finding a short id')
    if not re.fullmatch(r'[A-Za-z0-9][A-Za-z0-9_-]*', fid):
        raise StudyError(f'{where}.id: {fid!r}; use letters, digits, - and _ only')
    where = f'{where} ({fid})'
    out = Finding(
        id=fid, claim=_get(where, table, 'claim', str, 'give the finding\'s sentence'),
        source=_get(where, table, 'source', str, 'name the table, figure or section'),
        original=_original(f'{where}.original', table.get('original')),
        runs_here=_get(where, table, 'runs_here', bool, 'say true or false'),
        note=_get(where, table, 'note', str, 'give a sentence or leave it out',
                  required=False) or '')
    if not out.runs_here:
        out.cannot_run = _get(where, table, 'cannot_run', str, 'name what is missing here '
                              '(Myrinet, VIA, Quadrics, GM, ...)')
        if 'here' in table:
            raise StudyError(f'{where}.here: given for a finding that cannot run here; '
                             'drop it or set runs_here = true')
        return out
    if 'cannot_run' in table:
        raise StudyError(f'{where}.cannot_run: given with runs_here = true; drop one of them')
    here = table.get('here')
    if not isinstance(here, dict) or not ({'figure', 'direction', 'asserted_by'} & set(here)):
        raise StudyError(f'{where}.here: missing; give [finding.here.figure] (test, variable), '
                         'here.direction (a rule of testbed/directions.py) or '
                         '[finding.here.asserted_by] (test)')
    _unknown(f'{where}.here', here, ('direction', 'asserted_by', 'figure', 'over'))
    if 'asserted_by' in here:
        by, at = here['asserted_by'], f'{where}.here.asserted_by'
        if not isinstance(by, dict):
            raise StudyError(f'{at}: not a table; give [finding.here.asserted_by] with test')
        _unknown(at, by, ('test', 'case'))
        out.asserted_by = (_get(at, by, 'test', str, 'name the test whose sanity asserts it'),
                           _get(at, by, 'case', str, 'give a regular expression',
                                required=False) or '')
        try:
            re.compile(out.asserted_by[1])
        except re.error as err:
            raise StudyError(f'{at}.case: not a regular expression ({err}); escape it')
    if 'direction' in here:
        out.direction = _get(f'{where}.here', here, 'direction', str, 'name a rule')
        if out.direction not in directions.RULES:
            raise StudyError(f'{where}.here.direction: {out.direction!r} is not a rule of '
                             f'testbed/directions.py; use one of {", ".join(directions.RULES)}')
    if 'over' in here and 'figure' not in here:
        raise StudyError(f'{where}.here.over: a ratio\'s denominator without its numerator; '
                         'give [finding.here.figure] too')
    if 'figure' in here:
        out.figure = _figure(f'{where}.here.figure', here['figure'])
    if 'over' in here:
        out.over = _figure(f'{where}.here.over', here['over'], out.figure)
    return out


def load_study(path):
    """One study file, checked; StudyError names the file, the field and the fix."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text())
    except OSError as err:
        raise StudyError(f'{path}: cannot read it ({err.strerror})') from None
    except tomllib.TOMLDecodeError as err:
        raise StudyError(f'{path}: not TOML ({err}); fix the syntax there') from None
    try:
        _unknown('top level', data, ('study', 'finding'))
        head = data.get('study')
        if not isinstance(head, dict):
            raise StudyError('[study]: missing; give id, authors, title, seed and setting')
        _unknown('study', head, ('id', 'authors', 'title', 'seed', 'setting'))
        sid = _get('study', head, 'id', str, f'give the file\'s stem, "{path.stem}"')
        if sid != path.stem:
            raise StudyError(f'study.id: {sid!r} in a file named {path.name}; make them agree')
        study = Study(id=sid, path=path, **{k: _get('study', head, k, str, f'give the {k}')
                                            for k in ('authors', 'title', 'seed', 'setting')})
        entries = data.get('finding')
        if not isinstance(entries, list) or not entries:
            raise StudyError('finding: none; give at least one [[finding]]')
        for i, entry in enumerate(entries):
            if not isinstance(entry, dict):
                raise StudyError(f'finding[{i}]: not a table; write it as [[finding]]')
            study.findings.append(_finding(f'finding[{i}]', entry))
        ids = [f.id for f in study.findings]
        twice = sorted({i for i in ids if ids.count(i) > 1})
        if twice:
            raise StudyError(f'finding id {twice[0]!r}: given twice; give each its own id')
    except StudyError as err:
        raise StudyError(f'{path}: {err}') from None
    return study


def load_studies(folder=STUDIES_DIR):
    """Every study file of a folder, in the order of their ids."""
    paths = sorted(Path(folder).glob('*.toml'))
    if not paths:
        raise StudyError(f'{folder}: no study file (*.toml); run from a checkout with '
                         'reframe/studies/')
    return [load_study(p) for p in paths]


# --- the figures here ------------------------------------------------------------------------

@dataclass
class Here:
    """One figure here: a row's value, or a ratio of two rows' values."""
    stack: str
    where: str          # system:partition
    case: str
    value: float
    unit: str
    detail: str = ''    # for a ratio, the two figures


@dataclass
class Outcome:
    study: Study
    finding: Finding
    status: str         # passed, FAILED, reported, not run, cannot run here
    here: list = field(default_factory=list)
    checks: list = field(default_factory=list)      # testbed.directions rows of its rule
    why: str = ''


def defined_tests(folder=TESTS_DIR):
    """The class names the ReFrame test files define (a test not there is 'no such test')."""
    names = set()
    for path in Path(folder).glob('*.py'):
        names |= set(re.findall(r'^class (\w+)\(', path.read_text(), re.M))
    return names


def _matches(row, fig):
    return (row.test == fig.test and row.result in ('pass', 'fail') and row.value is not None
            and re.fullmatch(fig.variable, row.variable) is not None
            and (fig.size is None or row.size == fig.size)
            and (not fig.case or re.search(fig.case, row.case) is not None)
            and (not fig.system or row.system == fig.system)
            and (not fig.partition or re.fullmatch(fig.partition, row.partition) is not None)
            and (not fig.stack or row.stack == fig.stack))


def select(rows, fig):
    """The rows of a figure, one per (session, case, variable, size): a perf variable before
    the median of samples of the same name; a time set as a bandwidth where the figure says."""
    out = {}
    for row in rows:
        if _matches(row, fig):
            if fig.time_as_bandwidth:
                row = replace(row, value=row.size / row.value if row.value else None,
                              unit='MB/s', variable=f'{row.variable} as bandwidth')
                if row.value is None:
                    continue
            key = (row.session, row.system, row.partition, row.stack, row.case, row.variable,
                   row.size)
            if key not in out or (row.source == 'perfvalue' and out[key].source != 'perfvalue'):
                out[key] = row
    return list(out.values())


def _params(pattern):
    return dict(re.findall(r'%(\w+)=([^\s%]*)', pattern or ''))


def _pair_key(row, fig, over):
    """What a numerator's row and its denominator's share: everything the two figures do not
    set apart (a case parameter, system, partition, stack, variable or size named differently)."""
    a, b = _params(fig.case), _params(over.case)
    apart = {k for k in set(a) | set(b) if a.get(k) != b.get(k)}
    case = '' if fig.test != over.test else ' '.join(
        t for t in row.case.split() if not (t.startswith('%') and t[1:].split('=')[0] in apart))
    same = {f.name: getattr(fig, f.name) == getattr(over, f.name) for f in fields(Figure)}
    return (row.system if same['system'] else '', row.partition if same['partition'] else '',
            row.stack if same['stack'] else '', case,
            row.variable if same['variable'] else '', row.size if same['size'] else '')


def _where(row):
    return f'{row.system}:{row.partition}'


def figures_here(rows, finding):
    """[Here] of a finding's figure (values) or ratio (numerator over denominator)."""
    top = select(rows, finding.figure)
    if finding.over is None:
        return [Here(r.stack, _where(r), r.case, r.value, r.unit,
                     f'{r.variable}' + (f' at {r.size} B' if r.size is not None else ''))
                for r in top]
    below = {}
    for r in select(rows, finding.over):
        below.setdefault(_pair_key(r, finding.figure, finding.over), []).append(r)
    out = []
    for r in top:
        options = below.get(_pair_key(r, finding.figure, finding.over), [])
        options = [o for o in options if o.session == r.session] or options
        if not options or not options[0].value:
            continue
        d = options[0]
        stack = r.stack if r.stack == d.stack else f'{r.stack} / {d.stack}'
        where = _where(r) if _where(r) == _where(d) else f'{_where(r)} / {_where(d)}'
        out.append(Here(stack, where, r.case if r.case == d.case else f'{r.case} / {d.case}',
                        r.value / d.value, 'x',
                        f'{r.variable} {_num(r.value)} {r.unit} over '
                        f'{d.variable} {_num(d.value)} {d.unit}'))
    return out


def sanity_checks(reports, test, case=''):
    """The verdicts of a test whose own sanity asserts a finding, as rows like testbed.directions'
    (a case that failed in another phase, or was skipped, judged nothing)."""
    out = []
    for report, _ in reports:
        for tc in results.final_cases(report):
            name = str(tc.get('name') or tc.get('display_name') or '')
            if tc.get('fixture') or results.test_of(tc) != test or \
                    (case and not re.search(case, name)):
                continue
            held = tc.get('result') == 'pass' or tc.get('fail_phase') == 'performance'
            if not held and tc.get('fail_phase') != 'sanity':
                continue
            reason = (str(tc.get('fail_reason') or '').strip().splitlines() or [''])[0][:200]
            out.append({'rule': test, 'subject': f'{results.case_stack(tc)} {name}{_on(tc)}',
                        'ok': held, 'text': 'its sanity passed' if held else
                        f'its sanity failed: {reason}'})
    return out


def _on(tc):
    system = tc.get('system') or 'testbed-local'
    return '' if system == 'testbed-local' else f" on {system}:{tc.get('partition')}"


def evaluate(studies, reports, tests=None):
    """[Outcome] of every finding, over `reports`: [(report, path)] as testbed.results reads
    them."""
    tests = defined_tests() if tests is None else tests
    rows = [row for report, path in reports for row in results.rows(report, path)]
    checks = directions.check([report for report, _ in reports])
    out = []
    for study in studies:
        for f in study.findings:
            if not f.runs_here:
                out.append(Outcome(study, f, 'cannot run here', why=f.cannot_run))
                continue
            got = Outcome(study, f, 'reported')
            got.here = figures_here(rows, f) if f.figure else []
            got.checks = [c for c in checks if c['rule'] == f.direction]
            if f.asserted_by:
                got.checks += sanity_checks(reports, *f.asserted_by)
            if got.checks:
                got.status = 'passed' if all(c['ok'] for c in got.checks) else 'FAILED'
            elif not got.here:
                got.status = 'not run'
                named = {f.figure and f.figure.test, f.over and f.over.test,
                         f.asserted_by[0] if f.asserted_by else None} - {None, ''}
                missing = sorted(t for t in named if t not in tests)
                if missing:
                    got.why = f'no such test ({", ".join(missing)})'
                elif f.figure:
                    got.why = (f'no case of {f.figure.label()}'
                               + (' and its denominator' if f.over else '') + ' in these reports')
                else:
                    got.why = f'no figures for {rules_of(f)} in these reports'
            elif f.direction or f.asserted_by:
                got.why = f'{rules_of(f)} not judged: no figures for it in these reports'
            out.append(got)
    return out


# --- writing -----------------------------------------------------------------------------------

def _num(value):
    return f'{value:.4g}'


def original_text(entry, long=True):
    if 'value' not in entry:
        return entry['what']
    value = entry['value']
    number = f'{_num(value[0])}-{_num(value[1])}' if isinstance(value, list) else _num(value)
    unit = UNITS[entry['unit']] if long else entry['unit']
    return f"{entry['what']}: {number} {unit}" if long else f'{number} {unit}'


def here_summary(here, checks=()):
    """One cell: the value with stack and case, or the range over several; a finding judged by
    its direction alone, the direction's first pair of figures."""
    if not here:
        if not checks:
            return ''
        first = checks[0]
        more = f' (and {len(checks) - 1} more)' if len(checks) > 1 else ''
        return f"{first['subject']}: {first['text']}{more}"
    if len(here) == 1:
        h = here[0]
        return f'{_num(h.value)} {h.unit} ({h.stack}, {h.case}, {h.where})'
    values = [h.value for h in here]
    stacks = sorted({h.stack for h in here})
    return (f'{_num(min(values))} to {_num(max(values))} {here[0].unit} over {len(here)} '
            f'cases ({", ".join(stacks[:4])}{", ..." if len(stacks) > 4 else ""})')


def rules_of(finding):
    """What asserts a finding: its direction's rule and the test whose sanity does."""
    return ', '.join(r for r in (finding.direction, finding.asserted_by and
                                 f'{finding.asserted_by[0]} (its sanity)') if r)


def asserted_text(o):
    if o.status in ('passed', 'FAILED'):
        bad = sum(not c['ok'] for c in o.checks)
        return (f'asserted ({rules_of(o.finding)}): {o.status}, '
                f'{len(o.checks) - bad} of {len(o.checks)} held')
    if o.status == 'reported':
        return 'reported' + (f'; {o.why}' if o.why else '')
    return f'{o.status}: {o.why}'


def counts(outcomes):
    keys = ('passed', 'FAILED', 'reported', 'not run', 'cannot run here')
    return {k: sum(o.status == k for o in outcomes) for k in keys}


def _cell(text):
    return str(text).replace('|', '\\|').replace('\n', ' ')


def sources_text(reports):
    out = []
    for report, path in reports:
        info = report.get('session_info') or {}
        elapsed = info.get('time_elapsed')
        out.append(f"- `{path}`: session {str(info.get('uuid', '?'))[:8]}, started "
                   f"{info.get('time_start', '?')}, machine type "
                   f"{info.get('machine_type') or '?'}, ReFrame's run time "
                   + (f'{elapsed:.0f} s' if isinstance(elapsed, (int, float)) else '?'))
    return out


def markdown(study, outcomes, reports):
    """The markdown page of one study."""
    c = counts(outcomes)
    lines = [f'# Study {study.id}: {study.authors}, "{study.title}"', '',
             f'Transcribed in `reframe/studies/{study.path.name}` from `shared/seeds/'
             f'{study.seed}`. The original: {" ".join(study.setting.split())}', '',
             'Figures here from:'] + sources_text(reports) + [
             '', f'{len(outcomes)} findings: {c["passed"] + c["FAILED"]} asserted '
             f'({c["passed"]} passed, {c["FAILED"]} failed), {c["reported"]} reported, '
             f'{c["not run"]} not run in these reports, {c["cannot run here"]} cannot run here. '
             f'A direction (testbed/directions.py) fails only beyond a factor '
             f'{directions.TOLERANCE} either way.', '',
             '| finding | original | here | asserted or reported |', '|---|---|---|---|']
    for o in outcomes:
        orig = '; '.join(original_text(e, long=False) for e in o.finding.original)
        lines.append(f'| {o.finding.id} | {_cell(orig)} | {_cell(here_summary(o.here, o.checks))} | '
                     f'{_cell(asserted_text(o))} |')
    for o in outcomes:
        f = o.finding
        if o.status == 'cannot run here':
            continue
        lines += ['', f'## {f.id}', '', f'> {f.claim} ({f.source})', '', '- Original: '
                  + '; '.join(original_text(e) for e in f.original)]
        if f.note:
            lines.append(f'- Here: {f.note}')
        if f.figure:
            lines.append(f'- Figure: {f.figure.label()}'
                         + (f'; over {f.over.label()}' if f.over else ''))
        lines.append(f'- Result: {asserted_text(o)}')
        if o.here:
            lines += ['', '| stack | system:partition | case | here | from |',
                      '|---|---|---|---|---|']
            lines += [f'| {h.stack} | {h.where} | {_cell(h.case)} | {_num(h.value)} {h.unit} '
                      f'| {_cell(h.detail)} |' for h in o.here]
        if o.checks:
            lines += ['', '| direction | subject | figures |', '|---|---|---|']
            lines += [f"| {'ok' if ch['ok'] else 'FAIL'} | {_cell(ch['subject'])} | "
                      f"{_cell(ch['text'])} |" for ch in o.checks]
    gone = [o for o in outcomes if o.status == 'cannot run here']
    if gone:
        lines += ['', '## Cannot run here', '']
        lines += [f'- **{o.finding.id}** ({o.finding.source}): {o.why}. Original: '
                  + '; '.join(original_text(e) for e in o.finding.original) for o in gone]
    return '\n'.join(lines) + '\n'


def write(studies, outcomes, reports, out_dir=OUT_DIR):
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for study in studies:
        path = out_dir / f'{study.id}.md'
        path.write_text(markdown(study, [o for o in outcomes if o.study is study], reports))
        paths.append(path)
    return paths


def read_reports(sources):
    """[(report, path)] of the sources, through testbed.results (ResultsError names one)."""
    out = []
    for source in sources:
        report = results.load(source)
        results.check(report, source)
        path = results.report_file(source)
        out.append((report, path if path.exists() else None))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('reports', nargs='+', metavar='REPORT',
                    help='run report (JSON), archived run folder or stored session UUID')
    ap.add_argument('--out', default=str(OUT_DIR), help='folder for <id>.md')
    ap.add_argument('--studies', default=str(STUDIES_DIR), help='folder of the study files')
    args = ap.parse_args(argv)
    try:
        studies = load_studies(args.studies)
        reports = read_reports(args.reports)
    except (StudyError, results.ResultsError) as err:
        print(f'error: {err}', file=sys.stderr)
        return 2
    outcomes = evaluate(studies, reports)
    for path in write(studies, outcomes, reports, args.out):
        print(f'written: {path}')
    for study in studies:
        mine = [o for o in outcomes if o.study is study]
        c = counts(mine)
        print(f'study {study.id} ({study.authors.split(",")[0]}): {len(mine)} findings, '
              f'{c["passed"] + c["FAILED"]} asserted ({c["FAILED"]} failed), {c["reported"]} '
              f'reported, {c["not run"]} not run, {c["cannot run here"]} cannot run here')
        for o in mine:
            if o.status == 'FAILED':
                for ch in o.checks:
                    if not ch['ok']:
                        print(f"FAIL {study.id} {o.finding.id} {ch['rule']} {ch['subject']}: "
                              f"{ch['text']}")
    return 1 if any(o.status == 'FAILED' for o in outcomes) else 0


if __name__ == '__main__':
    sys.exit(main())
