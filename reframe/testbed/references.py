"""Performance references as data: read them for the tests, regenerate them from measured runs.

A reference file is CSV with one row per (system, partition, machine, stack, test, case, variable):

    system,partition,machine,stack,test,case,variable,value,lower,upper,unit,runs

Two kinds of row, by their machine column (testbed/machine.py):
- a machine *type* (`x86_64-intel-2cpu-vm`): a ratio to a baseline measured in the same job that
  proved to travel (HPL over the DGEMM capacity of its cores, su3 over its run with every core
  busy, ...: the test's portable_variable() says which). Asserted on any machine of the type;
  these are the rows the repository ships.
- one machine's id (`m-...`): its own rows, made there by `make references` from N runs there:
  absolute figures, the ratios that do not travel (P2PStack's), and its own rows of the ratios
  that do, which are asserted there before the type's (the same figure, a band from that
  machine's spread alone). Never shipped.

`lower` and `upper` are ReFrame's relative bounds, from a tolerance w in log space: the figure
passes within a factor exp(w) either way (lower = exp(-w) - 1, upper = exp(w) - 1). A row whose
bounds would accept a 2x change in either direction catches nothing worth catching and is
refused when loaded. `runs` names the ReFrame sessions whose figures produced the row. Rows are
written only by `python3 -m testbed.references update` (from N runs on one machine) and
`transfer` (a row's band widened to cover runs on another machine of its type, by the same
rule, on the side where they fall); a commit that changes a reference file says which runs
produced it.
"""
import argparse
import csv
import json
import math
import os
import re
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

from testbed import results

FIELDS = ['system', 'partition', 'machine', 'stack', 'test', 'case', 'variable',
          'value', 'lower', 'upper', 'unit', 'runs']
KEY = FIELDS[:7]
HEADER_COMMENT = ('# Performance references, one row per system/partition/machine/stack/test/'
                  'case/variable.\n# Written by `python3 -m testbed.references update` (bands widened '
                  'by `transfer`) from the ReFrame runs in column runs; never edited by hand.\n')
RATIO_UNIT = 'ratio'
#: a row accepting a factor of 2 either way is refused: it would catch nothing worth catching
MAX_FACTOR = 2.0
#: the narrowest tolerance of a machine's own rows of the tests in NARROW_FLOOR_TESTS (log space,
#: about 5 %): three runs estimate a spread poorly, and the 2-core VMs of this type move even
#: compute-bound ratios by 1 % between runs.
W_MIN = 0.05
#: the narrowest tolerance of every other row (about 15 %): the rows that travel (keyed by
#: machine type, asserted on machines and at times they were never measured on) and a
#: machine's own rows of one case's figure (HPL, su3_rmd, start-up, PVM): the largest
#: out-of-sample fall of a figure that needs both cores at once, with a quarter more. The noise
#: is the machine's own (a tenant, the vCPUs' placement), so own rows keep it too; with 5 %
#: they missed in clean runs (docs/verification.md, "Figures the code comments carried").
W_MIN_PORTABLE = 0.15
#: the tests whose own rows get W_MIN, each measured to hold it on its machine: P2PStack's
#: (the median over twelve modes, which one jumping mode does not move). Not HPL's panels nor
#: su3's exchange: their own narrow rows missed in clean runs (docs/verification.md, "Figures
#: the code comments carried").
NARROW_FLOOR_TESTS = ('P2PStack',)
#: figures whose floor is their own largest out-of-sample fall with a quarter more, as
#: W_MIN_PORTABLE is su3's (test, start of the variable's name): HPL's efficiency fell by 8 %
#: (ln 0.92 x 1.25 = 0.104), and the shared 15 % floor hid a 1.2x slower computation
#: (docs/verification.md, "2026-11-27: HPL's efficiency gets its own floor").
FIGURE_FLOORS = {('HplRun', 'efficiency_N'): 0.104}
#: a machine type's name (testbed/machine.py), as opposed to one machine's id (m-...)
MACHINE_TYPE = re.compile(r'.+-\d+cpu-(vm|bare)')
#: the reference files the repository ships
SHIPPED = Path(__file__).resolve().parents[1] / 'references'
#: the command that makes a machine's own rows (said wherever a figure goes without one)
MAKE_ROWS = 'make references'


def own_dir():
    """The folder of a site's own rows (TESTBED_REFERENCES_DIR: files named as the shipped
    ones), outside the checkout so that updating the testbed leaves them; None when unset."""
    text = os.environ.get('TESTBED_REFERENCES_DIR', '').strip()
    if not text:
        return None
    folder = Path(text)
    if folder.exists() and not folder.is_dir():
        raise ReferenceError(f'TESTBED_REFERENCES_DIR={text}: not a folder (give the folder '
                             f'that keeps this site\'s reference files, or unset it)')
    return folder


def files_of(name, shipped=SHIPPED):
    """The files a test's reference file `name` is read from: the shipped one, then the
    site's own (TESTBED_REFERENCES_DIR), whose rows take the place of shipped rows."""
    paths = [Path(shipped) / name]
    own = own_dir()
    if own is not None and (own / name).exists():
        paths.append(own / name)
    return paths


def load_all(paths):
    """The rows of several reference files, a later file's row replacing an earlier one's."""
    table = {}
    for path in paths:
        table.update(load(path))
    return table


def folders(shipped=SHIPPED):
    """The folders reference files are read from: the shipped one and the site's own."""
    own = own_dir()
    return [Path(shipped)] + ([own] if own is not None and own.is_dir() else [])


def has_rows(machine, shipped=SHIPPED):
    """Whether any reference file holds a row for this machine's type or for the machine
    itself. A machine without any is not one whose rows are missing: its figures are reported
    and what holds everywhere is asserted (docs/measurement.md)."""
    keys = {machine['machine_type'], machine['machine_id']}
    return any(key[2] in keys for folder in folders(shipped)
               for path in sorted(folder.glob('*.csv')) for key in load(path))


#: why derive() leaves a figure out when its band would accept MAX_FACTOR
TOO_WIDE = 'spread too wide to assert'


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
    """Read a reference file into {(system, partition, machine, stack, test, case, variable):
    Reference}. Every error names the file, the line and the field."""
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
        for name in KEY + ['unit']:
            if not rec[name].strip():
                raise ReferenceError(f'{path}: line {lineno}: field {name} is empty')
        value = _number(path, lineno, 'value', rec['value'])
        lower = _number(path, lineno, 'lower', rec['lower'])
        upper = _number(path, lineno, 'upper', rec['upper'])
        if value <= 0:
            raise ReferenceError(f'{path}: line {lineno}: field value: {value} is not positive')
        if not -1 < lower <= 0:
            raise ReferenceError(f'{path}: line {lineno}: field lower: {lower} is not in (-1, 0]')
        if upper < 0:
            raise ReferenceError(f'{path}: line {lineno}: field upper: {upper} is negative')
        if 1 + upper >= MAX_FACTOR:
            raise ReferenceError(f'{path}: line {lineno}: field upper: {upper} accepts a '
                                 f'{MAX_FACTOR:g}x rise: a reference that wide catches nothing')
        if 1 + lower <= 1 / MAX_FACTOR:
            raise ReferenceError(f'{path}: line {lineno}: field lower: {lower} accepts a '
                                 f'{MAX_FACTOR:g}x drop: a reference that wide catches nothing')
        key = tuple(rec[f] for f in KEY)
        if key in table:
            raise ReferenceError(f'{path}: line {lineno}: duplicate row for {"/".join(key)}')
        table[key] = Reference(value, lower, upper, rec['unit'], rec['runs'])
    return table


def for_test(path, system, partition, machine, stack, test, case, variables, portable):
    """ReFrame's `reference` dict for one test case, and the variables left without one.

    `machine` is the record of testbed.machine. A variable in `portable` (a ratio to a
    same-job baseline) is looked up under this machine's id first (its own row, made here by
    `make references`, from this machine's spread) and then under the machine type (the row
    that travels); any other variable under the machine id only.
    `path` may be a list of files (files_of): a later file's row replaces an earlier one's.
    Returns (reference, missing_portable, missing_absolute)."""
    table = load_all(path if isinstance(path, (list, tuple)) else [path])
    found, missing_portable, missing_absolute = {}, [], []
    for var in variables:
        own = table.get((system, partition, machine['machine_id'], stack, test, case, var))
        if own is not None:
            found[var] = own.as_reframe()
        elif var in portable:
            ref = table.get((system, partition, machine['machine_type'], stack, test, case, var))
            if ref is not None:
                found[var] = ref.as_reframe()
            else:
                missing_portable.append(var)
        else:
            missing_absolute.append(var)
    return {f'{system}:{partition}': found}, missing_portable, missing_absolute


# --- regeneration from ReFrame run reports -----------------------------------------------

#: the cases of a report that count: testbed.results' one rule (kept here for directions.py)
final_cases = results.final_cases


def _report_cases(report_path):
    """Yield (session, test case) for the cases with perf values of a ReFrame JSON report."""
    try:
        report = json.loads(Path(report_path).read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise ReferenceError(f'{report_path}: cannot read run report: {err}') from None
    session = report.get('session_info', {}).get('uuid', Path(report_path).stem)
    cases = final_cases(report)
    for tc in cases + _aggregate_cases(cases):
        if tc['name'].split()[0] in AGGREGATES:
            # reported per case and asserted through the aggregate, but for the figures the
            # case declares itself (P2PMatrix between nodes: its ratios to raw TCP)
            own = declared_between_nodes(tc)
            if not own:
                continue
            tc = dict(tc, portable_variables=sorted(own),
                      perfvalues={k: v for k, v in (tc.get('perfvalues') or {}).items()
                                  if results.variable(k) in own})
        injected = float(tc.get('injected_slowdown') or 1.0) != 1.0   # a slowed run: never
        # A figure that missed its reference is still a measurement (that is how a band
        # learns the machine's spread); a run that failed anything else is not used.
        measured = tc['result'] == 'pass' or tc.get('fail_phase') == 'performance'
        if tc.get('perfvalues') and tc.get('reference_case') and measured \
                and tc.get('assert_performance', True) and not injected:
            # a figure whose same-job baseline did not hold (checks.py drop_judgement) was
            # not judged, and makes or widens no row either
            held = {k: v for k, v in tc['perfvalues'].items()
                    if results.variable(k) not in (tc.get('not_held') or {})}
            if held:
                yield session, dict(tc, perfvalues=held)


def declared_between_nodes(tc):
    """The figures a P2PMatrix case asserts itself: those it declares (portable_variables);
    in a report made before it declared any, its ratios to raw TCP when it ran between nodes
    over a shaped link (a cluster partition but the native profile's), its ratio to busy-poll
    raw TCP, which is what it declares now (the ratio to blocking TCP is reported only)."""
    own = set(tc.get('portable_variables') or [])
    if not own and tc.get('system', 'testbed-local') != 'testbed-local' and \
            not tc.get('partition', '').endswith('_native'):
        own = {v for v in results.perf(tc) if v == 'time_over_tcp_poll'}
    return own


#: tests reported per case and asserted as the median over their cases: the figures of every
#: P2PMatrix mode of one stack and size range make one P2PStack case (reframe/tests/p2p_matrix.py)
AGGREGATES = {'P2PMatrix': 'P2PStack'}
P2P_MODES = 12


def median_over_modes(values):
    """The figure P2PStack asserts: the median over the modes (shared with the test)."""
    if len(values) < 1 or any(v is None for v in values):
        raise ValueError(f'median over modes: a mode has no figure ({values})')
    return results.median(values)


def _aggregate_cases(cases):
    """P2PStack cases made from the P2PMatrix cases of a report that ran no P2PStack (reports
    made before it existed): the same figures, the same median as the test computes."""
    have = {(tc.get('stack_name'), tc.get('size_range')) for tc in cases
            if tc['name'].startswith('P2PStack')}
    groups = {}
    for tc in cases:
        # P2PStack runs on the embedded default only (its figures are ratios to the shared-
        # memory floor); a cluster's P2PMatrix cases make none
        if tc.get('system', 'testbed-local') != 'testbed-local':
            continue
        if not tc['name'].startswith('P2PMatrix') or not tc.get('perfvalues') or \
                not (tc['result'] == 'pass' or tc.get('fail_phase') == 'performance'):
            continue
        key = (results.case_stack(tc), tc['size_range'], tc.get('cache', 'warm'))
        if key[:2] not in have:
            groups.setdefault(key, []).append(tc)
    out = []
    for (stack, rng, cache), tcs in groups.items():
        if len(tcs) != P2P_MODES:
            continue
        first = tcs[0]
        perf = {}
        for pkey, entry in first['perfvalues'].items():
            vals = [tc['perfvalues'].get(pkey, [None])[0] for tc in tcs]
            if all(v is not None for v in vals):
                perf[pkey] = [median_over_modes(vals), None, None, None, entry[4], 'pass']
        out.append({'name': f'P2PStack %size_range={rng}', 'environ': first['environ'],
                    'stack_name': stack, 'size_range': rng, 'reference_case': f'{rng}/{cache}',
                    'reference_file': first.get('reference_file', 'p2p.csv'),
                    'machine_type': first.get('machine_type'),
                    'machine_id': first.get('machine_id'), 'result': 'pass',
                    'injected_slowdown': first.get('injected_slowdown'),
                    'portable_variables': [], 'perfvalues': perf})   # as P2PStack declares
    return out


def narrow_floor(test):
    """Whether a machine's own rows of this test get the W_MIN floor (NARROW_FLOOR_TESTS)."""
    return test in NARROW_FLOOR_TESTS


def floor_of(test, variable, portable):
    """The floor of a row's tolerance: W_MIN for a machine's own rows of NARROW_FLOOR_TESTS,
    a figure's own floor where FIGURE_FLOORS has one (its rows that travel and its own),
    W_MIN_PORTABLE for every other row."""
    if not portable and narrow_floor(test):
        return W_MIN
    for (name, prefix), w in FIGURE_FLOORS.items():
        if test == name and variable.startswith(prefix):
            return w
    return W_MIN_PORTABLE


def tolerance(values, k=3.0, floor=W_MIN):
    """Half-width in log space of the band around the median of `values`: the larger of
    k standard deviations of ln(value), 1.5 times the largest measured distance from the
    median, and `floor` (`floor_of`: W_MIN_PORTABLE, a figure's own in FIGURE_FLOORS, W_MIN
    for a machine's own rows of the tests in NARROW_FLOOR_TESTS)."""
    logs = [math.log(v) for v in values]
    mid = statistics.median(logs)
    sd = statistics.stdev(logs) if len(logs) > 1 else 0.0
    return max(k * sd, 1.5 * max(abs(x - mid) for x in logs), floor)


def row_key(tc, system, partition, machine, var):
    """The KEY of the reference row a report's test case looks up for `var`."""
    return (system, partition, machine, results.case_stack(tc), results.test_of(tc),
            tc['reference_case'], var)


def derive(report_paths, k=3.0, min_runs=3, portability=None):
    """Reference rows from run reports, each with the reference file its test names, and the
    figures left out (too few runs, or a spread so wide that the row would accept 2x). A dict
    given as `portability` gets, for every figure's row key, whether its row travels.

    value = median of the runs' figures; tolerance = `tolerance()` of this variable's own
    figures (never pooled with other variables)."""
    if len(report_paths) < min_runs:
        raise ReferenceError(f'a tolerance is measured from the spread between runs: give at '
                             f'least {min_runs} run reports (got {len(report_paths)})')
    groups = {}
    for report_path in report_paths:
        for session, tc in _report_cases(report_path):
            for pkey, entry in tc['perfvalues'].items():
                system, partition, var = results.parse_key(pkey)
                value, unit = entry[0], entry[4]
                if value is None or value <= 0:
                    continue
                # A figure its test never looks up (su3's `speedup`, say) is reported only: a
                # row for it would never be asserted. Reports made before the field: all.
                if 'looked_up_variables' in tc and var not in tc['looked_up_variables']:
                    continue
                # Reports made before the field existed: ratios travelled, but for P2PStack
                # (which declares none portable since: reframe/tests/p2p_matrix.py).
                portable = var in tc['portable_variables'] if 'portable_variables' in tc \
                    else unit == RATIO_UNIT and not tc['name'].startswith('P2PStack')
                # Every figure gets this machine's own row; a ratio that travels also gets
                # its machine type's (for_test asserts the own row where there is one).
                for machine, travels in ([(tc.get('machine_type'), True)] if portable else []) \
                        + [(tc.get('machine_id'), False)]:
                    if not machine:
                        continue
                    gkey = row_key(tc, system, partition, machine, var)
                    g = groups.setdefault(gkey, {'values': [], 'unit': unit, 'runs': [],
                                                 'file': tc.get('reference_file'),
                                                 'portable': travels})
                    g['values'].append(float(value))
                    if session not in g['runs']:
                        g['runs'].append(session)
    rows, left_out = [], []
    for gkey, g in sorted(groups.items()):
        if portability is not None:
            portability[gkey] = g['portable']
        vals = g['values']
        if len(vals) < min_runs:
            left_out.append((gkey, f'measured in {len(vals)} run(s), fewer than {min_runs}'))
            continue
        w = tolerance(vals, k, floor_of(gkey[4], gkey[6], g['portable']))
        if math.exp(w) >= MAX_FACTOR:
            left_out.append((gkey, f'{TOO_WIDE}: a band of x{math.exp(w):.2f} '
                                   f'from values {", ".join(f"{v:.4g}" for v in vals)}'))
            continue
        rows.append(dict(zip(KEY, gkey), value=f'{statistics.median(vals):.6g}',
                         lower=f'{math.exp(-w) - 1:.4f}', upper=f'{math.exp(w) - 1:.4f}',
                         unit=g['unit'], runs=' '.join(g['runs']), file=g['file'],
                         portable=g['portable']))
    return rows, left_out


def transfer(table, report_paths, variables=None):
    """Portable rows of `table` checked against runs on another machine of their type: each
    row the reports measure keeps its value (the median of the runs that made it) and each side
    of its band gets the band the same rule gives across machines, w = max(that side's own w,
    1.5 x the largest distance in log space of the new figures on that side of the value), with
    the new sessions added to its runs. Per side, because a figure's tails need not match: a
    ratio whose baseline is sometimes slow falls below its value only, and a symmetric band
    would give up the catch above for it. `variables`: only these figures (the others in the
    reports are left out: a figure whose test changed how it is made since some of the runs).
    Returns (changed rows as dicts, a line per row measured, the rows that would accept 2x:
    left as they were). A row never narrows."""
    seen = {}
    for report_path in report_paths:
        for session, tc in _report_cases(report_path):
            for pkey, entry in tc['perfvalues'].items():
                system, partition, var = results.parse_key(pkey)
                if variables and var not in variables:
                    continue
                if var not in tc.get('portable_variables', []) or not entry[0] or \
                        entry[0] <= 0 or not tc.get('machine_type'):
                    continue
                key = row_key(tc, system, partition, tc['machine_type'], var)
                if key in table:
                    got = seen.setdefault(key, ([], []))
                    got[0].append(float(entry[0]))
                    if session not in got[1]:
                        got[1].append(session)
    changed, lines, refused = [], [], []
    for key, (vals, sessions) in sorted(seen.items()):
        ref = table[key]
        below_old, above_old = -math.log1p(ref.lower), math.log1p(ref.upper)
        dist = [math.log(v / ref.value) for v in vals]
        below = max(below_old, 1.5 * max([-d for d in dist] + [0.0]))
        above = max(above_old, 1.5 * max(dist + [0.0]))
        ratios = ', '.join(f'{v / ref.value:.3f}' for v in vals)
        line = (f'{"/".join(key)}: new figures {ratios} x the value; band '
                f'{ref.lower:+.1%}/{ref.upper:+.1%}')
        if math.exp(max(below, above)) >= MAX_FACTOR:
            refused.append(key)
            lines.append(f'{line}: would accept 2x, left as it was')
            continue
        if (below, above) == (below_old, above_old):
            lines.append(f'{line}: covers them, unchanged')
            continue
        runs = ' '.join([ref.runs] + [x for x in sessions if x not in ref.runs.split()])
        lower, upper = math.exp(-below) - 1, math.exp(above) - 1   # a side kept stays as it was
        changed.append(dict(zip(KEY, key), value=f'{ref.value:.6g}', lower=f'{lower:.4f}',
                            upper=f'{upper:.4f}', unit=ref.unit, runs=runs))
        lines.append(f'{line}: widened to {lower:+.1%}/{upper:+.1%}')
    return changed, lines, refused


def write(path, rows, keep=None):
    """Write `rows`, keeping the rows of `keep` (an existing table) that `rows` do not replace."""
    merged = {}
    for key, ref in (keep or {}).items():
        merged[key] = dict(zip(KEY, key), value=f'{ref.value:.6g}', lower=f'{ref.lower:.4f}',
                           upper=f'{ref.upper:.4f}', unit=ref.unit, runs=ref.runs)
    for row in rows:
        merged[tuple(row[f] for f in KEY)] = row
    with open(path, 'w', newline='') as fh:
        fh.write(HEADER_COMMENT)
        writer = csv.DictWriter(fh, FIELDS, lineterminator='\n', extrasaction='ignore')
        writer.writeheader()
        for key in sorted(merged):
            writer.writerow(merged[key])


def retire(folder, test, variable):
    """Remove the rows of `test`'s `variable` from every reference file in `folder` (the
    files stay written by this module only); an error if there is none, so a misspelt name
    is not taken for done."""
    removed = 0
    for path in sorted(Path(folder).glob('*.csv')):
        table = load(path)
        keep = {k: v for k, v in table.items() if (k[4], k[6]) != (test, variable)}
        if len(keep) < len(table):
            write(path, [], keep)
            print(f'{path}: removed {len(table) - len(keep)} row(s) of {test} {variable}')
            removed += len(table) - len(keep)
    if not removed:
        raise ReferenceError(f'{folder}: no row of test {test} variable {variable}')
    return 0


def status(machine, shipped=SHIPPED):
    """Which references this machine has (its type's and its own), ending with the notice."""
    portable = own = own_ratios = 0
    mine, others = set(), set()     # (test, variable) with rows for this type, for others
    for folder in folders(shipped):
        for path in sorted(folder.glob('*.csv')):
            for key, ref in load(path).items():
                portable += key[2] == machine['machine_type']
                if key[2] == machine['machine_id']:
                    own += 1
                    own_ratios += ref.unit == RATIO_UNIT
                    mine.add((key[4], key[6]))
                if key[2] == machine['machine_type']:
                    mine.add((key[4], key[6]))
                elif MACHINE_TYPE.fullmatch(key[2]):    # another machine type
                    others.add((key[4], key[6]))
    lines = [f"machine: {machine['cpu_model']}, {machine['cpus']} CPUs, "
             f"{machine['memory_bytes'] / 2**30:.1f} GiB, kernel {machine['kernel']}, "
             f"virtualised: {machine['virtualised']} (type {machine['machine_type']}, "
             f"id {machine['machine_id']})",
             'reference files: ' + ', '.join(str(f) for f in folders(shipped)),
             f'references for this machine type (ratios to same-job baselines, asserted): '
             f'{portable}']
    if own:
        lines.append(f'this machine\'s own references (asserted, made here by {MAKE_ROWS}; '
                     f'a ratio with an own row is asserted against it, not the type\'s): {own}, '
                     f'{own_ratios} of them ratios')
    if others - mine:
        lines.append('ratios with rows for other machine types only, so reported here, not '
                     'asserted: ' + ', '.join(f'{t} {v}' for t, v in sorted(others - mine)))
    lines.append(notice(machine, portable, own))
    return '\n'.join(lines)


def notice(machine, type_rows, own_rows):
    """The one line a run starts with: what it asserts and what it only reports here."""
    if not type_rows and not own_rows:
        return (f"notice: no reference rows for machine type {machine['machine_type']} or "
                f"for this machine: every performance figure is reported without a reference; "
                f"correctness, agreement with IMB and NetPIPE, physical bounds and the studies' "
                f"directions are asserted; `{MAKE_ROWS}` makes this machine's rows")
    if not own_rows:
        return (f"notice: {type_rows} rows of machine type {machine['machine_type']} are "
                f"asserted; the figures without a row (the point-to-point matrix in one host, "
                f"PVM, start-up, every absolute figure) are reported without a reference until "
                f"`{MAKE_ROWS}` makes this machine's own rows")
    return (f"notice: {type_rows} rows of machine type {machine['machine_type']} and "
            f"{own_rows} of this machine's own are asserted; figures without a row are reported "
            f"without a reference (`{MAKE_ROWS}` remakes this machine's rows)")


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog='python3 -m testbed.references',
        description='Regenerate reference files from ReFrame run reports. value = median over '
                    'the reports; tolerance in log space = max(K x standard deviation of '
                    f'ln(value), 1.5 x the largest distance from the median, {W_MIN_PORTABLE}; '
                    + ''.join(f'{w} for {test} {prefix}*; '
                              for (test, prefix), w in FIGURE_FLOORS.items())
                    + f'{W_MIN} for a machine\'s own rows of {", ".join(NARROW_FLOOR_TESTS)}), per '
                    'variable; a figure whose band would accept 2x is left out, and said.')
    sub = ap.add_subparsers(dest='cmd', required=True)
    default_dir = str(SHIPPED)
    try:
        site_dir = own_dir()
    except ReferenceError as err:
        print(f'error: {err}', file=sys.stderr)
        return 2
    up = sub.add_parser('update', help='write references from run reports')
    up.add_argument('reports', nargs='+', help='ReFrame JSON run reports')
    up.add_argument('--dir', default=str(site_dir or SHIPPED),
                    help='folder of the reference files (each test names its file; default: '
                         'TESTBED_REFERENCES_DIR where set, else the shipped folder)')
    up.add_argument('--k', type=float, default=3.0, help='standard deviations (default 3)')
    up.add_argument('--min-runs', type=int, default=3, help='runs a figure needs (default 3)')
    up.add_argument('--only', choices=['ratio', 'absolute', 'all'], default='all',
                    help="ratio: only the portable rows (ratios that travel, keyed by machine "
                         "type); absolute: only this machine's own rows (keyed by its id: "
                         "absolute figures, the ratios that do not travel, and its own rows of "
                         "the ratios that do, asserted here before the type's)")
    up.add_argument('--variable', action='append', default=[], metavar='NAME',
                    help='only the rows of this variable (repeatable; default: every one), '
                         'so that a new figure gets rows without remaking the others')
    up.add_argument('--replace', action='store_true',
                    help='drop rows the reports do not measure (default: keep them)')
    up.add_argument('--drop-too-wide', action='store_true',
                    help='drop the rows of figures these reports spread too wide to assert '
                         '(default: such a row is kept as it was): runs in a state the rows '
                         'never saw can show that a figure cannot be asserted at all')
    tr = sub.add_parser('transfer', help="widen the shipped ratio rows to cover runs on "
                        "another machine of their type (values kept)")
    tr.add_argument('reports', nargs='+', help='ReFrame JSON run reports from that machine')
    tr.add_argument('--dir', default=default_dir)
    tr.add_argument('--variable', action='append', default=[], metavar='NAME',
                    help='only this figure (repeat for more; default every figure)')
    chk = sub.add_parser('check', help='validate reference files')
    chk.add_argument('files', nargs='+')
    st = sub.add_parser('status', help='which references this machine has')
    st.add_argument('--dir', default=default_dir)
    rt = sub.add_parser('retire', help='remove every row of a figure that its test no longer '
                        'asserts (it stays reported)')
    rt.add_argument('--test', required=True, help='test name, e.g. Su3Run')
    rt.add_argument('--variable', required=True, help='variable, e.g. gather_over_memcpy')
    rt.add_argument('--dir', default=default_dir)
    args = ap.parse_args(argv)
    try:
        if args.cmd == 'retire':
            return retire(args.dir, args.test, args.variable)
        if args.cmd == 'check':
            for f in args.files:
                print(f'{f}: {len(load(f))} references, all valid')
            return 0
        if args.cmd == 'status':
            from testbed import machine
            print(status(machine.record(), args.dir))
            return 0
        if args.cmd == 'transfer':
            for path in sorted(Path(args.dir).glob('*.csv')):
                table = load(path)
                changed, lines, _ = transfer(table, args.reports, args.variable)
                for line in lines:
                    print(f'{path.name}: {line}')
                if changed:
                    write(path, changed, table)
                    print(f'{path}: widened {len(changed)} row(s)')
            return 0
        portability = {}
        rows, left_out = derive(args.reports, args.k, args.min_runs, portability)
        if args.only != 'all':
            rows = [r for r in rows if r['portable'] == (args.only == 'ratio')]
            left_out = [(g, why) for g, why in left_out
                        if portability[g] == (args.only == 'ratio')]
        if args.variable:
            rows = [r for r in rows if r['variable'] in args.variable]
            left_out = [(g, why) for g, why in left_out if g[-1] in args.variable]
        for gkey, why in left_out:
            print(f'not written: {"/".join(gkey)}: {why}')
        too_wide = {g for g, why in left_out if why.startswith(TOO_WIDE)} \
            if args.drop_too_wide else set()
        if not rows and not too_wide:
            raise ReferenceError('no performance figures to write from ' +
                                 ', '.join(args.reports))
        by_file = {}
        for row in rows:
            if not row.get('file'):
                raise ReferenceError(f'test {row["test"]} names no reference_file')
            by_file.setdefault(row['file'], []).append(row)
        if too_wide:        # the files that hold such rows are rewritten even with no new row
            for path in sorted(Path(args.dir).glob('*.csv')):
                if set(load(path)) & too_wide:
                    by_file.setdefault(path.name, [])
        Path(args.dir).mkdir(parents=True, exist_ok=True)
        for name, file_rows in sorted(by_file.items()):
            path = Path(args.dir) / name
            keep = None if args.replace or not path.exists() else load(path)
            dropped = sorted(set(keep or {}) & too_wide)
            for key in dropped:
                del keep[key]
                print(f'dropped: {"/".join(key)}: {TOO_WIDE} over these reports')
            write(path, file_rows, keep)
            print(f'{path}: wrote {len(file_rows)} references from {len(args.reports)} '
                  f'report(s); {len(left_out)} figure(s) left out (above), {len(dropped)} '
                  f'row(s) dropped')
        return 0
    except ReferenceError as err:
        print(f'error: {err}', file=sys.stderr)
        return 2


if __name__ == '__main__':
    sys.exit(main())
