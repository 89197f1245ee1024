"""List the failed test cases of ReFrame reports, one line each, for the end of a CI log.

CI keeps only the tail of a run's output; the failures ReFrame prints mid-run scroll out of it.
`python3 -m testbed.failures REPORT...` prints every case whose last run failed: where it ran,
its name, the phase that failed and the first line of the reason. A report that cannot be read
is named and counted, never skipped in silence. Exit status: 0 always (this only reports).
"""
import json
import sys

REASON_CHARS = 300


def failed_cases(report):
    """(where, name, phase, reason) for each case failed in the report's last run."""
    runs = report.get('runs') or []
    if not runs:
        return []
    out = []
    for tc in runs[-1].get('testcases', []):
        if tc.get('result') not in ('fail', 'abort'):
            continue
        where = f"{tc.get('system')}:{tc.get('partition')}/{tc.get('environ')}"
        reason = (tc.get('fail_reason') or '').strip().splitlines()
        reason = reason[0] if reason else 'no reason recorded'
        if len(reason) > REASON_CHARS:
            reason = reason[:REASON_CHARS] + '...'
        out.append((where, tc.get('display_name') or tc.get('name'),
                    tc.get('fail_phase') or '?', reason))
    return out


def main(argv):
    total = 0
    for path in argv:
        try:
            with open(path) as f:
                report = json.load(f)
        except (OSError, ValueError) as err:
            print(f'{path}: cannot read the report: {err}')
            total += 1
            continue
        cases = failed_cases(report)
        total += len(cases)
        for where, name, phase, reason in cases:
            print(f'{path}: {where} {name} [{phase}] {reason}')
    print(f'failed test cases in {len(argv)} report(s): {total}')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
