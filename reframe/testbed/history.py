"""History: every stored session of one machine type and profile as a time series per figure,
and the change points in each (docs/history.md).

    python3 -m testbed.history [--since YYYY-MM-DD] [--stack NAME] [--profile quick]
                               [--machine TYPE|ALL] [--figure REGEX] [--order time|version]

A series is one figure (a test case's figure_samples key) of one stack (--order version: of
one family, the x-axis the release order); its value per session is the median of the figure's
samples. Sessions come from ReFrame's results storage, read-only (testbed/storage.py), and from
the archived runs (reframe/archive/) the storage lacks. Change points: testbed/changepoints.py.
Exit status: 0, also when changes are found; 2 on bad input (one line on stderr).
"""
import argparse
import datetime
import fnmatch
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from testbed import archive, changepoints, machine, results, storage


class HistoryError(ValueError):
    """Input history cannot judge; the message names the file or field and the fix."""


@dataclass(eq=False)
class Session:
    uuid: str
    start: float                # Unix time the session started
    profile: str
    profile_from: str           # tag | archive | cmdline | '' (unknown)
    machine_type: str
    case_types: set
    commit: str
    report: dict = field(repr=False)

    @property
    def when(self):
        return datetime.datetime.fromtimestamp(self.start, datetime.timezone.utc) \
            .strftime('%Y-%m-%d %H:%M UTC')


@dataclass
class Point:
    session: Session
    value: float                # median of the samples
    samples: tuple
    version: str                # the library version the case recorded
    commit: str


# --- sessions ------------------------------------------------------------------------------

def _start(report):
    info = report.get('session_info') or {}
    if isinstance(info.get('time_start_unix'), (int, float)):
        return float(info['time_start_unix'])
    try:
        return datetime.datetime.strptime(info.get('time_start', ''), '%Y%m%dT%H%M%S%z') \
            .timestamp()
    except ValueError:
        return 0.0


def archived(folder=None):
    """{session UUID prefix (8 hex digits): (profile, report path)} of the archived runs."""
    out = {}
    for run in sorted(Path(folder or archive.ARCHIVE).glob('*-*-*')):
        stamp_profile, _, prefix = run.name.rpartition('-')
        if (run / 'report.json').is_file() and '-' in stamp_profile:
            out[prefix] = (stamp_profile.split('-', 1)[1], run / 'report.json')
    return out


def profile_of(report, runs):
    """(profile, how it was known): the session's tag; else the archived run that holds it
    (its folder is named by ci/ scripts' profile); else the report file ci/suite.sh names
    reports/last-PROFILE.json in the command line; else ('', '')."""
    info = report.get('session_info') or {}
    if info.get('profile'):
        return str(info['profile']), 'tag'
    prefix = str(info.get('uuid', ''))[:8].replace('-', '')
    if prefix and prefix in runs:
        return runs[prefix][0], 'archive'
    m = re.search(r'--report-file\s+\S*/reports/last-(quick|full)\.json', info.get('cmdline', ''))
    return (m[1], 'cmdline') if m else ('', '')


def session_of(report, runs):
    info = report.get('session_info') or {}
    cases = results.final_cases(report)
    types = {str(tc['machine_type']) for tc in cases
             if tc.get('machine_type') not in (None, '', results.UNDEFINED)}
    profile, how = profile_of(report, runs)
    mtype = str(info.get('machine_type') or '') or (min(types) if len(types) == 1 else '')
    commits = {str(tc['testbed_commit']) for tc in cases
               if tc.get('testbed_commit') not in (None, '', results.UNDEFINED)}
    return Session(uuid=str(info.get('uuid', '')), start=_start(report), profile=profile,
                   profile_from=how, machine_type=mtype, case_types=types,
                   commit=str(info.get('testbed_commit') or '') or ','.join(sorted(commits)),
                   report=report)


def load_sessions(db=None, folder=None, since=None):
    """Every stored session (and archived run the storage lacks), oldest first."""
    try:
        reports = storage.sessions(db, since=since)
    except storage.StorageError as err:
        raise HistoryError(str(err)) from None
    runs = archived(folder)
    seen = {str((r.get('session_info') or {}).get('uuid', ''))[:8].replace('-', '')
            for r in reports}
    for prefix, (_, path) in runs.items():
        if prefix not in seen:
            try:
                rep = json.loads(path.read_text())
            except (OSError, ValueError) as err:
                raise HistoryError(f'{path}: not a readable run report ({err}); move the '
                                   'archived run aside') from None
            if _start(rep) >= (since or 0):
                reports.append(rep)
    return sorted((session_of(r, runs) for r in reports), key=lambda s: s.start)


def select(sessions, profile, mtype):
    """The sessions of one profile and machine type (mtype 'ALL': any); HistoryError when none
    or when one mixes machine types."""
    chosen = [s for s in sessions if fnmatch.fnmatchcase(s.profile, profile) and
              (mtype == 'ALL' or s.machine_type == mtype)]
    if not chosen:
        profiles = sorted({s.profile or '(none)' for s in sessions})
        types = sorted({s.machine_type or '(none)' for s in sessions
                        if fnmatch.fnmatchcase(s.profile, profile)})
        raise HistoryError(
            f'no stored session matches profile={profile!r} machine type={mtype!r} '
            f'({len(sessions)} sessions read; profiles: {", ".join(profiles) or "none"}; '
            f'machine types of that profile: {", ".join(types) or "none"}): set PROFILE=, '
            'MACHINE= (or ALL) or SINCE=')
    for s in chosen:
        other = s.case_types - {s.machine_type}
        if other and mtype != 'ALL':
            raise HistoryError(
                f'session {s.uuid[:8]} ({s.when}): tagged machine_type={s.machine_type!r} but '
                f'its test cases ran on {", ".join(sorted(other))}: history keeps one machine '
                'type (MACHINE=ALL mixes them)')
    return chosen


# --- series ---------------------------------------------------------------------------------

def failed_before_figures(tc):
    """A case whose figures are not to be trusted: failed before its figures were measured
    (a case that only missed a reference keeps them: a regression may be exactly that)."""
    return tc.get('result') != 'pass' and not (
        tc.get('result') == 'fail' and tc.get('fail_phase') == 'performance')


def family_of(stack):
    return re.sub(r'-\d[\w.]*$', '', stack)


def build_series(sessions, stack=None, figure=None, order='time'):
    """({(case, figure, stack or family): [Point]}, [notes]) with series in x order."""
    try:
        pattern = re.compile(figure) if figure else None
    except re.error as err:
        raise HistoryError(f'FIGURE={figure!r}: not a regular expression ({err})') from None
    series, failed = {}, {}
    for s in sessions:
        for tc in results.final_cases(s.report):
            if tc.get('fixture') or not isinstance(tc.get('figure_samples'), dict):
                continue
            name, st = str(tc.get('display_name') or tc.get('name')), str(results.case_stack(tc))
            if stack and st != stack:
                continue
            if failed_before_figures(tc):
                if tc.get('result') != 'skip':
                    failed.setdefault(s, []).append(f'{name} on {st} ({tc.get("result")}, '
                                                    f'phase {tc.get("fail_phase")})')
                continue
            for fig, values in tc['figure_samples'].items():
                if pattern and not pattern.search(f'{name} {fig}'):
                    continue
                vals = tuple(float(v) for v in values if isinstance(v, (int, float))
                             and not isinstance(v, bool) and v > 0) \
                    if isinstance(values, list) else ()
                if not vals:
                    continue
                key = (name, fig, family_of(st) if order == 'version' else st)
                series.setdefault(key, []).append(Point(
                    s, results.median(vals), vals, str(tc.get('library_version') or ''),
                    str(tc.get('testbed_commit') or s.commit)))
    if order == 'version':
        for points in series.values():
            points.sort(key=lambda p: (version_key(p.version), p.session.start))
    notes = [f'session {s.uuid[:8]} ({s.when}): {len(names)} test case(s) failed before their '
             f'figures were measured, their figures left out: {"; ".join(names[:3])}'
             + (f' and {len(names) - 3} more' if len(names) > 3 else '')
             for s, names in failed.items()]
    return series, notes


def version_key(text):
    """'MPICH Version: 4.3.2' -> (4, 3, 2): the first dotted number, as numbers."""
    m = re.search(r'\d+(?:\.\d+)+', text or '')
    return tuple(int(x) for x in m[0].split('.')) if m else ()


# --- judging and printing -------------------------------------------------------------------

def judge(series, alpha=changepoints.ALPHA, min_size=changepoints.MIN_SIZE):
    """({key: [Change]}, level, [keys too short to judge]): Bonferroni over the series that
    can reach the level with their length (Tarone)."""
    lengths = {k: len(p) for k, p in series.items()}
    level, judged = changepoints.reachable_level(lengths, alpha, min_size)
    found = {k: changepoints.find([p.value for p in series[k]], level, min_size)
             for k in judged}
    short = [k for k in series if k not in judged]
    return {k: v for k, v in found.items() if v}, level, short


def side(p):
    return (f'{p.session.when} session {p.session.uuid[:8]} commit {p.commit or "?"} '
            f'{p.version or "version not recorded"}')


def describe(key, points, change):
    case, fig, stack = key
    before, after = points[change.index - 1], points[change.index]
    return (f'{stack} | {case} | {fig}: x{change.ratio:.3f} (95 % interval '
            f'{change.low:.3f}..{change.high:.3f}; p = {change.p:.2g}; segments of '
            f'{change.n_before} and {change.n_after} values)\n'
            f'    before: {side(before)}\n    after:  {side(after)}')


def run(args):
    mtype = args.machine or machine.record()['machine_type']
    since = None
    if args.since:
        try:
            since = datetime.datetime.strptime(args.since, '%Y-%m-%d').replace(
                tzinfo=datetime.timezone.utc).timestamp()
        except ValueError:
            raise HistoryError(f'SINCE={args.since!r}: not a date YYYY-MM-DD') from None
    sessions = select(load_sessions(args.db, args.archive, since), args.profile, mtype)
    series, notes = build_series(sessions, args.stack, args.figure, args.order)
    if not series:
        raise HistoryError(f'{len(sessions)} sessions of profile {args.profile!r} hold no '
                           f'figure_samples for stack={args.stack or "any"} figure='
                           f'{args.figure or "any"}: set STACK= or FIGURE= to ones they ran')
    found, level, short = judge(series)
    return sessions, series, notes, found, level, short


def report(args, sessions, series, notes, found, level, short):
    """Print what was read, what was left out, what could be judged and the change points."""
    inferred = sorted({s.profile_from for s in sessions} - {'tag'})
    types = sorted({s.machine_type for s in sessions})
    print(f'history: {len(sessions)} sessions of profile {args.profile!r}, machine type '
          f'{", ".join(types)}, {sessions[0].when} to {sessions[-1].when}; {len(series)} series '
          f'(figure and {"family, by version" if args.order == "version" else "stack"})'
          + (f'; profile of some sessions inferred from: {", ".join(inferred)}'
             if inferred else ''))
    for note in notes:
        print(f'  note: {note}')
    judged = len(series) - len(short)
    unit = 'sessions' if args.order == 'time' else 'runs (a release in a session)'
    if judged:
        print(f'{judged} series judged at p <= {level:.2g} each (1 % / '
              f'{round(changepoints.ALPHA / level)}: Bonferroni over the series that can reach '
              f'it; segments of at least {changepoints.MIN_SIZE} {unit}); {len(short)} too short '
              f'to reach it (need {changepoints.sessions_needed(level)} {unit} or more)')
    else:
        print(f'no series long enough to judge: {len(series)} series of at most '
              f'{max(len(p) for p in series.values())} {unit}; at 1 % (Bonferroni over the '
              f'series) one needs {changepoints.sessions_needed(changepoints.ALPHA / len(series))}'
              ' or more')
    partial = [k for k in series if len(series[k]) < len(sessions)] \
        if args.order == 'time' else []
    if partial:
        print(f'{len(partial)} series are in only some of the sessions (a figure renamed, a '
              'case added or left out): each is its own series, never joined to another')
    for key in partial[:8]:
        pts = series[key]
        print(f'  {" | ".join(reversed(key))}: {len(pts)} of {len(sessions)} sessions, '
              f'{pts[0].session.when} to {pts[-1].session.when}'
              + (', too short to judge' if key in short else ''))
    if len(partial) > 8:
        print(f'  and {len(partial) - 8} more (FIGURE= narrows the list)')
    print(f'{sum(len(v) for v in found.values())} change point(s)')
    for key, chs in found.items():
        for ch in chs:
            print(describe(key, series[key], ch))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--since', help='sessions started on or after this date (YYYY-MM-DD)')
    ap.add_argument('--stack', help='one stack (e.g. mpich-4.0)')
    ap.add_argument('--profile', default='quick',
                    help='the sessions\' profile tag (a shell pattern: sweep-mpich*)')
    ap.add_argument('--machine', help='machine type (default: this machine\'s), or ALL')
    ap.add_argument('--figure', help='regular expression over "CASE FIGURE"')
    ap.add_argument('--order', choices=('time', 'version'), default='time',
                    help='x-axis: session start, or the library version (a series per family)')
    ap.add_argument('--db', help='results storage (default: TESTBED_RESULTS_DB or '
                    'reframe/results/sessions.db)')
    ap.add_argument('--archive', help='archived runs (default: reframe/archive)')
    args = ap.parse_args(argv)
    try:
        sessions, series, notes, found, level, short = run(args)
    except HistoryError as err:
        print(f'history: {err}', file=sys.stderr)
        return 2
    report(args, sessions, series, notes, found, level, short)
    return 0


if __name__ == '__main__':
    sys.exit(main())
