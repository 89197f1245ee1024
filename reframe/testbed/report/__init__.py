"""One static HTML page of a set of ReFrame run reports (docs/report.md): inline SVG figures,
no script, no network, every figure stamped with session, date, machine and stack versions.

    python3 -m testbed.report --out reframe/report REPORT.json [REPORT.json ...]

writes reframe/report/index.html and series.html (the version series alone). Modules: data
(reading), svg (drawing), page (the sections of one report), studies (the four studies beside
the originals: testbed/studies.py), series (the version series across
releases), browser (headless Chromium: screenshots and the check).
"""
import time
from html import escape
from pathlib import Path

from testbed.report import data, history, page, series, studies

CSS = """body{font-family:sans-serif;margin:1.2em;max-width:1500px;color:#222}
h1{font-size:1.5em}h2{border-bottom:1px solid #aaa;margin-top:1.6em}
figure{display:inline-block;vertical-align:top;margin:0 12px 16px 0;max-width:640px}
figcaption{font-size:11px;color:#333}.stamp{display:block;color:#666;font-size:10px}
.missing{color:#8a4b00;font-style:italic}table{border-collapse:collapse;font-size:12px}
td,th{border:1px solid #ccc;padding:2px 6px;text-align:left}th{background:#f3f3f3}
nav li{margin:2px 0}"""


def overview(runs):
    rows = []
    for i, run in enumerate(runs):
        stacks = ', '.join(page.label(run, s) if run.versions.get(s) else
                           f'{s} (version not reported)' for s in run.stacks)
        rows.append(f'<tr><td><a href="#r{i}">{escape(str(run.path))}</a></td>'
                    f'<td>{escape(run.session)}</td><td>{escape(run.time_start)}</td>'
                    f'<td>{escape(page.machine_text(run))}</td>'
                    f'<td style="text-align:left">{escape(stacks)}</td></tr>')
    return ('<table><tr><th>report</th><th>ReFrame session</th><th>started</th><th>machine'
            '</th><th>stacks (library version reported at run time; in full under each figure)</th>'
            '</tr>'
            + ''.join(rows) + '</table>')


def render(runs, stored=(), past=()):
    toc, body = [], []
    for i, run in enumerate(runs):
        pre = f'r{i}'
        parts = page.run_section(run, pre)
        toc.append(f'<li><a href="#{pre}">{escape(run.path.name)}</a>: ' + ', '.join(
            f'<a href="#{a}">{escape(t)}</a>' for a, t, _ in parts) + '</li>')
        body.append(f'<h2 id="{pre}">{escape(str(run.path))}: session '
                    f'{escape(run.session[:8])}, {escape(run.time_start)}</h2>')
        for anchor, title, html in parts:
            body.append(f'<h3 id="{anchor}">{escape(title)}</h3>' + ''.join(html))
    toc.append('<li><a href="#studies">The four studies beside the originals</a></li>')
    body.append('<h2 id="studies">The four studies: each finding beside the original</h2>'
                + ''.join(studies.section(runs)))
    toc.append('<li><a href="#series">Version series</a> (also alone: '
               '<a href="series.html">series.html</a>)</li>')
    body.append('<h2 id="series">Version series (stacks named family-X.Y.Z)</h2>'
                + stored_note(stored) + ''.join(series.section(runs + list(stored))))
    if past:
        toc.append('<li><a href="#history">History of the quick profile</a></li>')
        body.append('<h2 id="history">History: the stored quick sessions of this machine type, '
                    'change points marked</h2>' + ''.join(past))
    head = (f'Made {time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())} from {len(runs)} '
            'ReFrame run report(s). Units: us = microseconds, half of a round trip; MB/s = 10^6 '
            'bytes per second; size ranges as in docs/measurement.md.')
    return document('MPI testbed report', f'<p>{head}</p>' + overview(runs) + '<nav><ul>'
                    + ''.join(toc) + '</ul></nav>' + ''.join(body))


def document(title, body):
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{title}'
            f'</title><style>{CSS}</style></head><body><h1>{title}</h1>{body}</body></html>\n')


def render_series(runs, stored=()):
    """The version series alone: a page that opens on it (a headless browser does not scroll
    to an anchor before its screenshot)."""
    return document('MPI testbed report: version series', '<p><a href="index.html">The whole '
                    'report</a>.</p>' + overview(runs) + stored_note(stored)
                    + ''.join(series.section(runs + list(stored))))


def stored_note(stored):
    if not stored:
        return ''
    return (f'<p>Also from the results storage (read-only), {len(stored)} stored session(s) '
            'that ran releases site/versions.toml lists: '
            + ', '.join(escape(f'{r.session[:8]} ({r.time_start})') for r in stored) + '.</p>')


def release_names():
    """The stacks of the version series: every stack site/versions.toml lists."""
    from testbed import registry
    try:
        return set(registry.load(registry.REPO / 'site' / 'versions.toml').stacks)
    except registry.RegistryError as err:
        raise data.ReportError(str(err)) from None


def build(paths, out_dir, stored=False):
    """Read every report (a bad one raises data.ReportError) and, where `stored` (the command
    line's default), the stored sessions that ran a release of site/versions.toml (for the
    version series) and the history of the quick profile (report/history.py); write
    out_dir/index.html and out_dir/series.html; return the first."""
    runs = [data.load(p) for p in paths]
    given = {r.session for r in runs}
    kept = [r for r in data.stored_releases(release_names()) if r.session not in given] \
        if stored else []
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    past = history.section() if stored else []
    (out / 'index.html').write_text(render(runs, kept, past))
    (out / 'series.html').write_text(render_series(runs, kept))
    return out / 'index.html'
