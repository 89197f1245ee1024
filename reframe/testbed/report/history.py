"""The report's history section: figures against time over the stored sessions of this machine
type and the quick profile (testbed/history.py), each change point marked. Drawn: the headline
figures (Send-Recv latency at 8 B and 1 MiB, every stack a line) and every other figure with a
change point (the first MAX_CHANGED), so that the page stays small."""
import re
from html import escape

from testbed import history, machine, results
from testbed.report import svg
from testbed.report.page import note, slug

HEADLINE = re.compile(r'P2PMatrix %mode=Send-Recv/complete %size_range=quick$')
HEADLINE_FIGURES = ('half_round_trip_us@8', 'half_round_trip_us@1048576')
MAX_CHANGED = 12
DAY = 86400.0


def unit_text(fig):
    unit = results.SAMPLE_UNITS.get(results.split_figure(fig)[0].rpartition('_')[2], '')
    return {'us': 'microseconds (us)', 's': 'seconds', 'ms': 'milliseconds', 'ns':
            'nanoseconds', 'MB/s': 'MB/s (10^6 bytes per second)'}.get(unit, 'value')


def chart(fid, title, lines, changes, t0, fig, stamp):
    """lines: [(label, [Point])]; changes: [(label, [Point], Change)] marked as bands. The
    x-axis in hours since the first session, in days when they span more than two."""
    span = max(p.session.start for _, pts in lines for p in pts) - t0
    scale, name = (DAY, 'days') if span > 2 * DAY else (3600.0, 'hours')

    def x(p):
        return (p.session.start - t0) / scale
    marks = [(x(pts[ch.index - 1]), x(pts[ch.index]), f'x{ch.ratio:.2f}', '#d55e00')
             for _, pts, ch in changes]
    return svg.line_chart(fid, title, [(label, [[(x(p), p.value) for p in pts]])
                                       for label, pts in lines],
                          f'{name} since the first session (each point a session)',
                          f'{unit_text(fig)}, median per session', stamp, logx=False,
                          logy=True, marks=marks)


def change_text(key, pts, chs):
    return f'{key[2]}: ' + ('; '.join(
        f'change x{c.ratio:.3f} (95 % interval {c.low:.3f}..{c.high:.3f}) between '
        f'{history.side(pts[c.index - 1])} and {history.side(pts[c.index])}'
        for c in chs) or 'no change point') + '.'


def caption(key, pts, chs):
    return (f'<figcaption>{escape(key[0])}, {escape(key[1])}. '
            f'{escape(change_text(key, pts, chs))}'
            f'<span class="stamp">Sessions {escape(pts[0].session.uuid[:8])} '
            f'({escape(pts[0].session.when)}) to {escape(pts[-1].session.uuid[:8])} '
            f'({escape(pts[-1].session.when)}).</span></figcaption>')


def section(profile='quick', mtype=None, db=None, archive=None):
    """The section's HTML parts; a sentence instead when there is no history to draw."""
    mtype = mtype or machine.record()['machine_type']
    try:
        sessions = history.select(history.load_sessions(db, archive), profile, mtype)
        series, notes = history.build_series(sessions)
        found, level, short = history.judge(series)
    except history.HistoryError as err:
        return [note(f'No history drawn: {err}')]
    t0 = sessions[0].start
    stamp = f'make history PROFILE={profile} MACHINE={mtype}: {len(sessions)} sessions'
    out = [f'<p>{len(sessions)} stored sessions of profile {escape(profile)} on machine type '
           f'{escape(mtype)}, {escape(sessions[0].when)} to {escape(sessions[-1].when)}; '
           f'{len(series)} series, {len(series) - len(short)} long enough to judge at p &lt;= '
           f'{level:.2g} each; {sum(map(len, found.values()))} change point(s) '
           '(make history prints them; docs/history.md says how they are found).</p>']
    out += [note(n) for n in notes[:5]]
    for fig in HEADLINE_FIGURES:
        keys = [k for k in series if k[1] == fig and HEADLINE.match(k[0])]
        if keys:
            lines = [(k[2], series[k]) for k in keys]
            chs = [(k[2], series[k], c) for k in keys for c in found.get(k, [])]
            drawn = chart(f'history-{slug(fig)}', f'Send-Recv/complete, {fig}', lines, chs, t0,
                          fig, stamp)
            said = ' '.join(change_text(k, series[k], found.get(k, [])) for k in keys
                            if found.get(k))
            out.append(f'<figure>{drawn}<figcaption>Every stack a line. {escape(said)}'
                       '</figcaption></figure>')
    headline = {k for k in found if k[1] in HEADLINE_FIGURES and HEADLINE.match(k[0])}
    for n, (key, chs) in enumerate((k, v) for k, v in found.items() if k not in headline):
        if n == MAX_CHANGED:
            out.append(note(f'{len(found) - len(headline) - MAX_CHANGED} more figures with a '
                            'change point: make history lists them.'))
            break
        pts = series[key]
        drawn = chart(f'history-{slug(" ".join(key))}', f'{key[2]}: {key[1]}', [(key[2], pts)],
                      [(key[2], pts, c) for c in chs], t0, key[1], stamp)
        out.append(f'<figure>{drawn}{caption(key, pts, chs)}</figure>')
    return out
