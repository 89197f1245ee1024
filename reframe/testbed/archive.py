"""Keep every run's ReFrame report and summary, so that any figure can be traced to the run and
the machine that produced it.

    python3 -m testbed.archive REPORT SUMMARY_PREFIX --profile quick

copies REPORT, SUMMARY_PREFIX.md/.csv and the machine record into
reframe/archive/<UTC time>-<profile>-<session>/ and keeps the newest TESTBED_ARCHIVE_KEEP
(default 20) runs, removing older ones. The archive is outside git (.gitignore).
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


def store(report, summary_prefix, profile, archive=ARCHIVE, keep=None):
    """Archive one run; returns its folder. Prunes to the newest `keep` runs."""
    keep = keep or keep_count()
    report = Path(report)
    try:
        session = json.loads(report.read_text()).get('session_info', {}).get('uuid', 'nouuid')
    except (OSError, json.JSONDecodeError) as err:
        raise ValueError(f'{report}: cannot read run report: {err}') from None
    stamp = time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())
    folder = Path(archive) / f'{stamp}-{profile}-{session[:8]}'
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy2(report, folder / 'report.json')
    for ext in ('.md', '.csv'):
        src = Path(str(summary_prefix) + ext)
        if src.exists():
            shutil.copy2(src, folder / f'summary{ext}')
    (folder / 'machine.json').write_text(json.dumps(machine.record(), indent=1) + '\n')
    runs = sorted(p for p in Path(archive).iterdir() if p.is_dir())
    for old in runs[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return folder


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('report')
    ap.add_argument('summary_prefix')
    ap.add_argument('--profile', default='run')
    args = ap.parse_args(argv)
    try:
        folder = store(args.report, args.summary_prefix, args.profile)
    except ValueError as err:
        print(f'error: {err}', file=sys.stderr)
        return 2
    print(f'archived: {folder}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
