"""The report's section of the four studies (testbed/studies.py, docs/studies.md): per study,
each finding with the original's figures (from reframe/studies/<id>.toml), the figure here with
stack and case, and whether its direction is asserted (passed or failed) or the figure reported;
the findings that cannot run here, with what is missing."""
from html import escape

from testbed import studies
from testbed.report.data import ReportError

STATUS_STYLE = {'FAILED': 'color:#b00000;font-weight:bold', 'passed': 'color:#006000',
                'reported': '', 'not run': 'color:#8a4b00', 'cannot run here': 'color:#666'}


def _row(o):
    f = o.finding
    original = '<br>'.join(escape(studies.original_text(e)) for e in f.original)
    here = escape(studies.here_summary(o.here, o.checks))
    if len(o.here) > 1:
        here += ('<details><summary>every case</summary>' + '<br>'.join(
            escape(f'{h.stack}, {h.where}, {h.case}: {h.value:.4g} {h.unit} ({h.detail})')
            for h in o.here) + '</details>')
    if len(o.checks) > 1:
        here += ('<details><summary>every pair of the direction</summary>' + '<br>'.join(
            escape(f"{'ok' if c['ok'] else 'FAIL'} {c['subject']}: {c['text']}")
            for c in o.checks) + '</details>')
    note = f'<br><i>{escape(f.note)}</i>' if f.note else ''
    return (f'<tr><td><b>{escape(f.id)}</b></td><td>{escape(f.claim)} ({escape(f.source)})'
            f'{note}</td><td>{original}</td><td>{here}</td>'
            f'<td style="{STATUS_STYLE.get(o.status, "")}">{escape(studies.asserted_text(o))}'
            '</td></tr>')


def section(runs, folder=None):
    """[html] of every study over the report's runs (testbed/report/data.py's Run)."""
    try:
        loaded = studies.load_studies(folder or studies.STUDIES_DIR)
    except studies.StudyError as err:
        raise ReportError(str(err)) from None
    reports = [(run.report, run.path if run.path.exists() else None) for run in runs]
    outcomes = studies.evaluate(loaded, reports)
    out = [f'<p>Each finding of the four studies (shared/seeds) beside the figure here, from '
           f'the {len(runs)} report(s) above; a direction (testbed/directions.py) fails only '
           f'beyond a factor {studies.directions.TOLERANCE} either way. The same per study in '
           'reframe/reports/studies/&lt;id&gt;.md (make studies).</p>']
    for study in loaded:
        mine = [o for o in outcomes if o.study is study]
        c = studies.counts(mine)
        out.append(f'<h3 id="study-{escape(study.id)}">Study {escape(study.id)}: '
                   f'{escape(study.authors)}, &ldquo;{escape(study.title)}&rdquo;</h3>'
                   f'<p>{escape(" ".join(study.setting.split()))}</p>'
                   f'<p>{len(mine)} findings: {c["passed"] + c["FAILED"]} asserted '
                   f'({c["passed"]} passed, {c["FAILED"]} failed), {c["reported"]} reported, '
                   f'{c["not run"]} not run in these reports, {c["cannot run here"]} cannot '
                   'run here.</p><table><tr><th>finding</th><th>the original says</th>'
                   '<th>original figures</th><th>here</th><th>asserted or reported</th></tr>'
                   + ''.join(_row(o) for o in mine) + '</table>')
    return out
