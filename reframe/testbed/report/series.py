"""The version series: for stacks named family-X.Y.Z (the release sweeps), each headline figure
against release, with consecutive releases marked where testbed.compare finds a figure slower
or faster (on the samples, not on the plotted summary)."""
from html import escape

from testbed.report import svg
from testbed.report.data import perf, releases, stack_of
from testbed.report.page import (BASE_MODE, MBS, US, figure, machine_text, note, slug,
                                 stack_text)

SLOWER, FASTER = '#c0392b', '#1f5fbf'


def _p2p(var):
    return lambda tc: ({tc.get('size_range'): var} if tc.get('mode') == BASE_MODE else {})


def _numbered(prefix, fmt):
    return lambda tc: {fmt(tc, k[len(prefix):]): k for k in perf(tc)
                       if k.startswith(prefix) and k[len(prefix):].isdigit()}


# (id, title, test name prefix, case -> {line label: perf variable}, y label, log y)
CHARTS = [
    ('p2p-lat', f'Latency, {BASE_MODE} (geometric mean per range)', 'P2PMatrix',
     _p2p('latency'), US, True),
    ('p2p-bw', f'Bandwidth, {BASE_MODE} (geometric mean per range)', 'P2PMatrix',
     _p2p('bandwidth'), MBS, True),
    ('p2p-shm', f'Time over the shared-memory floor, {BASE_MODE}', 'P2PMatrix',
     _p2p('time_over_shm'), 'ratio (MPI time / shared-memory floor, same job)', False),
    ('hpl', 'HPL rate per grid and N', 'HplRun',
     _numbered('gflops_N', lambda tc, n: f"{tc.get('grid')} N={n}"),
     'rate (Gflop/s = 10^9 floating-point operations per second)', False),
    ('su3', 'su3_rmd time per trajectory', 'Su3Run',
     lambda tc: {f"{tc.get('num_tasks')} ranks {tc.get('comm')}": 's_per_traj'},
     'time per trajectory (seconds)', False),
    ('startup', 'Start-up: launch to MPI_Init', 'StartupTime',
     _numbered('init_np', lambda tc, n: f'{n} ranks'), 'time (seconds)', False),
]


def compare_pairs(rels):
    """[rows or None] for each pair of consecutive releases, and a sentence when there are no
    marks (testbed.compare absent or failing)."""
    try:
        from testbed.compare import compare
    except Exception as err:          # absent, or broken while someone edits it
        return [None] * (len(rels) - 1), (f'No marks: testbed.compare cannot be used '
                                          f'({type(err).__name__}: {err}).')
    out, problems = [], []
    for (va, run_a, sa), (vb, run_b, sb) in zip(rels, rels[1:]):
        try:
            out.append(compare(run_a.report, run_b.report, stack_a=sa, stack_b=sb))
        except Exception as err:
            out.append(None)
            problems.append(f'{sa} to {sb}: {type(err).__name__}: {err}')
    return out, ('No marks where testbed.compare raised: ' + '; '.join(problems) + '.'
                 if problems else '')


def _marks(pairs, prefix):
    marks = []
    for i, rows in enumerate(pairs):
        rows = [r for r in rows or [] if str(r.get('test', '')).startswith(prefix)]
        slow = sum(r.get('verdict') == 'slower' for r in rows)
        fast = sum(r.get('verdict') == 'faster' for r in rows)
        if slow or fast:
            text = ', '.join(t for t in (f'{slow} slower' if slow else '',
                                         f'{fast} faster' if fast else '') if t)
            marks.append((i, i + 1, text, SLOWER if slow else FASTER))
    return marks


def _chart(family, rels, pairs, spec, stamp, cap):
    fid, title, prefix, pick, ylab, logy = spec
    values = {}                       # line -> {release index: value}
    for i, (_, run, stack) in enumerate(rels):
        for tc in run.cases:
            if stack_of(tc) == stack and tc['name'].startswith(prefix):
                for line, var in pick(tc).items():
                    v = perf(tc).get(var)
                    if v is not None and (v[0] > 0 or not logy):
                        values.setdefault(str(line), {})[i] = v[0]
    if not values:
        return note(f'{family}: {title}: no release has this figure.')
    series = []
    for line, pts in values.items():
        segs, seg = [], []
        for i in range(len(rels)):    # a release without the figure breaks the line
            if i in pts:
                seg.append((i, pts[i]))
            elif seg:
                segs, seg = segs + [seg], []
        series.append((line, segs + ([seg] if seg else [])))
    ticks = [(i, v) for i, (v, _, _) in enumerate(rels)]
    chart = svg.line_chart(f'series-{slug(family)}-{fid}', f'{family}: {title}', series,
                           f'{family} release (oldest left)', ylab, stamp, logx=False,
                           logy=logy, xticks=ticks, marks=_marks(pairs, prefix),
                           categorical=True)
    return figure(chart, cap)


def _mark_table(rels, pairs):
    rows = []
    for (va, _, _), (vb, _, _), found in zip(rels, rels[1:], pairs):
        for r in found or []:
            if r.get('verdict') in ('slower', 'faster'):
                rows.append(f"<tr><td>{escape(va)} to {escape(vb)}</td><td>"
                            f"{escape(str(r.get('test')))}</td><td>{escape(str(r.get('figure')))}"
                            f"</td><td>{r.get('ratio') or 0:.3f} ({r.get('lo') or 0:.3f}-"
                            f"{r.get('hi') or 0:.3f})</td><td>{escape(r['verdict'])}</td></tr>")
    if not rows:
        return ''
    more = f'<p>{len(rows) - 40} more rows not shown.</p>' if len(rows) > 40 else ''
    return ('<table><tr><th>releases</th><th>test</th><th>figure</th><th>ratio new/old '
            '(interval)</th><th>verdict</th></tr>' + ''.join(rows[:40]) + '</table>' + more)


def section(runs):
    fams = releases(runs)
    if not fams:
        return [note('No stack in these reports is named family-X.Y.Z (a release sweep, '
                     'reframe/reports/sweep-*.json): no version series.')]
    out = []
    for family, rels in fams.items():
        out.append(f'<h3 id="series-{slug(family)}">{escape(family)}</h3>')
        if len(rels) < 2:
            out.append(note(f'{family}: only release {rels[0][0]}; a series needs two.'))
            continue
        pairs, why = compare_pairs(rels)
        if why:
            out.append(note(why))
        sessions = sorted({run.session[:8] for _, run, _ in rels})
        types = sorted({run.machine.get('machine_type', '?') for _, run, _ in rels})
        stamp = f"ReFrame session(s) {', '.join(sessions)} | {', '.join(types)}"
        by_session = {}
        for _, run, stack in rels:
            by_session.setdefault(run.session, (run, []))[1].append(stack)
        cap = ('<figcaption>Shaded: testbed.compare judged figures of that test slower (red) '
               'or faster (blue) from one release to the next.<span class="stamp">' +
               ' '.join(escape(f'ReFrame session {sid}, {run.time_start}, '
                               f'{machine_text(run)}: ' + '; '.join(
                                   stack_text(run, s) for s in stacks) + '.')
                        for sid, (run, stacks) in by_session.items()) + '</span></figcaption>')
        out += [_chart(family, rels, pairs, spec, stamp, cap) for spec in CHARTS]
        out.append(_mark_table(rels, pairs))
    return out
