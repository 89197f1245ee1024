"""Keep every run's ReFrame report and summary, so that any figure can be traced to the run and
the machine that produced it.

    python3 -m testbed.archive --profile quick --summary SUMMARY_PREFIX REPORT
    python3 -m testbed.archive --profile cluster-quick --summary SUMMARY_PREFIX REPORT...

copies REPORT, SUMMARY_PREFIX.md/.csv and the machine record into
reframe/archive/<UTC time>-<profile>-<session>/ and keeps the newest TESTBED_ARCHIVE_KEEP
(default 20) runs of each profile, removing older ones. A run of several reports (the
emulated cluster's, one per link profile) keeps each under its own name, the first also as
report.json. The archive is outside git (.gitignore).
"""
import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

from testbed import machine

ARCHIVE = Path(__file__).resolve().parents[1] / 'archive'


def keep_count():
    text = os.environ.get('TESTBED_ARCHIVE_KEEP', '20')
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise ValueError(f'TESTBED_ARCHIVE_KEEP: {text!r} is not a whole number >= 1')
    return n


def _session(report):
    try:
        return json.loads(Path(report).read_text()).get('session_info', {}).get('uuid', 'nouuid')
    except (OSError, json.JSONDecodeError) as err:
        raise ValueError(f'{report}: cannot read run report: {err}') from None


def store(reports, summary_prefix, profile, archive=ARCHIVE, keep=None):
    """Archive one run (a report, or a list of the reports one run wrote); returns its
    folder. Prunes the profile's runs to the newest `keep`."""
    keep = keep or keep_count()
    reports = [Path(r) for r in ([reports] if isinstance(reports, (str, Path)) else reports)]
    if not reports:
        raise ValueError(f'{profile}: no run report to archive')
    sessions = [_session(r) for r in reports]
    stamp = time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())
    folder = Path(archive) / f"{stamp}-{profile}-{sessions[0][:8].replace('-', '')}"
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy2(reports[0], folder / 'report.json')
    if len(reports) > 1:
        for report in reports:
            shutil.copy2(report, folder / report.name)
    for ext in ('.md', '.csv'):
        src = Path(str(summary_prefix) + ext)
        if src.exists():
            shutil.copy2(src, folder / f'summary{ext}')
    (folder / 'machine.json').write_text(json.dumps(machine.record(), indent=1) + '\n')
    for old in runs_of(profile, archive)[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return folder


def runs_of(profile, archive=ARCHIVE):
    """The archived runs of one profile, oldest first ('quick' is not 'cluster-quick')."""
    return sorted(p for p in Path(archive).glob(f'*-{profile}-*') if p.is_dir()
                  and p.name.split('-', 1)[1].rsplit('-', 1)[0] == profile)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('reports', nargs='+', metavar='REPORT', help='the run\'s reports')
    ap.add_argument('--summary', required=True, metavar='PREFIX',
                    help='the summary tables PREFIX.md and PREFIX.csv')
    ap.add_argument('--profile', default='run')
    args = ap.parse_args(argv)
    try:
        folder = store(args.reports, args.summary, args.profile)
    except ValueError as err:
        print(f'error: {err}', file=sys.stderr)
        return 2
    print(f'archived: {folder}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
