"""List the failed test cases of ReFrame reports, one line each, for the end of a CI log.

CI keeps only the tail of a run's output; the failures ReFrame prints mid-run scroll out of it.
`python3 -m testbed.failures REPORT...` prints every case whose final attempt failed (the rule
for retries is testbed.results'): where it ran, its name, the phase that failed and the first
line of the reason. A report that cannot be read is named and counted, never skipped in
silence. It ends with one line that says how many figures went without a reference, by test,
and the command that makes this machine's rows.
Exit status: 0 always (this only reports).
"""
import json
import sys

from testbed import results

REASON_CHARS = 300


def failed_cases(report):
    """(where, name, phase, reason) for each case whose final attempt failed."""
    out = []
    for tc in results.final_cases(report):
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


def reference_counts(report):
    """{test: [figures with a reference, figures without]} over the final attempts of the
    report's cases that measured something (ReFrame writes a missing reference as 0, None,
    None)."""
    counts = {}
    for row in results.rows(report):
        if row.source != 'perfvalue' or row.value is None:
            continue
        without = row.reference in (0, None) and row.lower is None and row.upper is None
        counts.setdefault(row.test or '?', [0, 0])[without] += 1
    return counts


def unreferenced_line(counts):
    """The run's last line: what it reported without a reference, and how rows are made."""
    asserted = sum(c[0] for c in counts.values())
    without = {t: c[1] for t, c in sorted(counts.items()) if c[1]}
    if not without:
        return f'figures asserted against a reference: {asserted}; none went without one'
    return (f'figures asserted against a reference: {asserted}; reported without one: '
            f'{sum(without.values())} (' + ', '.join(f'{t} {n}' for t, n in without.items())
            + '); `make references` makes this machine\'s rows')


def main(argv):
    only_line = argv[:1] == ['--unreferenced']     # the line alone (a pass's last, ci/suite.sh)
    argv = argv[1:] if only_line else argv
    total = 0
    counts = {}
    for path in argv:
        try:
            with open(path) as f:
                report = json.load(f)
        except (OSError, ValueError) as err:
            print(f'{path}: cannot read the report: {err}')
            total += 1
            continue
        cases = failed_cases(report)
        for test, (with_ref, without) in reference_counts(report).items():
            got = counts.setdefault(test, [0, 0])
            got[0] += with_ref
            got[1] += without
        total += len(cases)
        for where, name, phase, reason in ([] if only_line else cases):
            print(f'{path}: {where} {name} [{phase}] {reason}')
    print(unreferenced_line(counts))
    if not only_line:
        print(f'failed test cases in {len(argv)} report(s): {total}')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
