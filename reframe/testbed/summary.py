"""Summary of a ReFrame run report: stack x pair tables of small-message latency (us) and
large-message bandwidth (MB/s = 10^6 bytes/s), printed and written as Markdown and CSV.

    python3 -m testbed.summary REPORT.json --out reframe/summary
writes reframe/summary.md and reframe/summary.csv.
"""
import argparse
import csv
import json
import sys
from pathlib import Path

from testbed import peer_table
from testbed.results import case_stack, final_cases, median, perf


def cases(report):
    return final_cases(report)         # a retried test case counts as its retry left it


def library_versions(report):
    """{stack: the version its library reported at run time}, from any test that read it."""
    versions = {}
    for tc in cases(report):
        version = tc.get('library_version')
        if version not in (None, 'unknown', '<undefined>') and not tc.get('fixture'):
            versions.setdefault(case_stack(tc), version)
    return versions


def collect(report):
    rows, builds, stacks = [], [], []
    versions = library_versions(report)
    for tc in cases(report):
        env = case_stack(tc)
        if tc.get('fixture'):
            builds.append(tc)
            continue
        if not tc['name'].startswith('P2PMatrix'):
            continue
        if env not in stacks:
            stacks.append(env)
        pair, variant = tc['mode'].split('/') if '/' in str(tc.get('mode')) else (tc['mode'], '')
        for var, pv in perf(tc).items():
            value, ref, lower, upper, unit, result = pv
            rows.append({'stack': env, 'library_version': versions.get(env, ''),
                         'pair': pair, 'variant': variant, 'size_range': tc['size_range'],
                         'variable': var, 'value': value, 'unit': unit, 'reference': ref,
                         'lower': lower, 'upper': upper, 'result': tc['result']})
        # per size, where the range is the quick one (the peers' sizes): the 8-byte latency
        # floor and the 1 MiB bandwidth, from the samples the case kept
        if tc['size_range'] == 'quick' and tc['result'] == 'pass':
            if tc.get('shm_floor_8B_us'):
                rows.append({'stack': env, 'library_version': versions.get(env, ''),
                             'pair': pair, 'variant': variant, 'size_range': 'quick',
                             'variable': 'shm_floor_8B', 'value': tc['shm_floor_8B_us'],
                             'unit': 'us', 'reference': None, 'lower': None, 'upper': None,
                             'result': tc['result']})
            for size, var in ((8, 'latency_8B'), (1048576, 'bandwidth_1MiB')):
                mid = median(tc.get('figure_samples', {}).get(f'half_round_trip_us@{size}', []))
                if mid:
                    value = mid if size == 8 else size / mid    # bytes/us = MB/s
                    rows.append({'stack': env, 'library_version': versions.get(env, ''),
                                 'pair': pair, 'variant': variant, 'size_range': 'quick',
                                 'variable': var, 'value': value,
                                 'unit': 'us' if size == 8 else 'MB/s', 'reference': None,
                                 'lower': None, 'upper': None, 'result': tc['result']})
        if not tc.get('perfvalues'):
            rows.append({'stack': env, 'library_version': versions.get(env, ''), 'pair': pair,
                         'variant': variant, 'size_range': tc['size_range'],
                         'variable': '', 'value': None, 'unit': '', 'reference': None,
                         'lower': None, 'upper': None, 'result': tc['result'],
                         'fail_reason': tc.get('fail_reason')})
    return rows, builds, stacks, versions


def cell(rows, stack, mode, size_range, var):
    for r in rows:
        if (r['stack'], f"{r['pair']}/{r['variant']}", r['size_range']) == (stack, mode,
                                                                              size_range):
            if r['result'] != 'pass' and not r['variable']:
                return 'FAILED'
            if r['variable'] == var and r['value'] is not None:
                mark = '' if r['result'] == 'pass' else ' (FAIL)'
                text = f"{r['value']:,.0f}" if var.startswith('bandwidth') else \
                    f"{r['value']:.3f}"
                return text + mark
    return '-'


def tables(rows, stacks):
    modes = []
    for r in rows:
        m = f"{r['pair']}/{r['variant']}"
        if m not in modes:
            modes.append(m)
    out = []
    for title, rng, var in [
            ('Half round trip at 8 bytes (us, median of the samples)', 'quick', 'latency_8B'),
            ('Shared-memory floor at 8 bytes in the same jobs (us, median): where the two '
             'ranks\' CPUs sat on the host; the 8-byte latencies above move with it',
             'quick', 'shm_floor_8B'),
            ('Bandwidth at 1,048,576 bytes (MB/s = 10^6 bytes/s, from the median half round '
             'trip)', 'quick', 'bandwidth_1MiB'),
            ('MPI time over the shared-memory floor, quick range, 8 B..1 MiB (ratio, same job; '
             'geometric mean over the sizes)', 'quick', 'time_over_shm'),
            ('Latency over the small range, 300..4,800 bytes (us, geometric mean of the '
             'per-size medians of the half round trip)', 'small', 'latency'),
            ('MPI time over the shared-memory floor, small range (ratio, same job; the '
             'portable reference)', 'small', 'time_over_shm'),
            ('Bandwidth over the large range, 200,000..2,000,000 bytes (MB/s = 10^6 bytes/s, '
             'geometric mean of the per-size medians)', 'large', 'bandwidth'),
            ('MPI time over the shared-memory floor, large range (ratio, same job)', 'large',
             'time_over_shm')]:
        present = [m for m in modes if any(cell(rows, s, m, rng, var) != '-' for s in stacks)]
        if not present:
            continue
        out.append(f'### {title}\n')
        out.append('| pair/variant | ' + ' | '.join(stacks) + ' |')
        out.append('|---|' + '---:|' * len(stacks))
        for m in present:
            out.append(f'| {m} | ' + ' | '.join(cell(rows, s, m, rng, var) for s in stacks)
                       + ' |')
        out.append('')
    return out


def app_tables(report, stacks):
    """Every other test: one table per test, rows (case, variable), columns stacks."""
    by_test = {}
    for tc in cases(report):
        test = tc['name'].split()[0]
        if tc.get('fixture') or test == 'P2PMatrix':
            continue
        stack = case_stack(tc)
        if stack not in stacks:
            stacks.append(stack)
        t = by_test.setdefault(test, {})
        case = tc.get('reference_case') or '-'
        if tc['result'] == 'skip':
            t.setdefault((case, ''), {})[stack] = 'skipped'
        elif tc['result'] != 'pass' and not tc.get('perfvalues'):
            t.setdefault((case, ''), {})[stack] = 'FAILED'
        if tc['result'] == 'pass' and not tc.get('perfvalues'):
            t.setdefault((case, 'sanity'), {})[stack] = 'passed'
        for var, pv in perf(tc).items():
            text = '-' if pv.value is None else f'{pv.value:.4g}'
            if tc['result'] != 'pass':
                text += ' (FAIL)'
            t.setdefault((case, f'{var} ({pv.unit})'), {})[stack] = text
    out = []
    for test, rows in by_test.items():
        cols = [s for s in stacks if any(s in r for r in rows.values())]
        out += [f'### {test}\n', '| case | figure | ' + ' | '.join(cols) + ' |',
                '|---|---|' + '---:|' * len(cols)]
        for (case, var), cells in rows.items():
            out.append(f'| {case} | {var} | ' + ' | '.join(cells.get(c, '-') for c in cols)
                       + ' |')
        out.append('')
    return out


def startup_table(report, stacks):
    """The MPI stacks' start-up beside PVM's: per np, the warm median time to a first message
    from every rank (StartupTime: from the launch; PvmStartup: from pvm_spawn in a running
    pvmd). Daemon boots (lamboot, the pvmd) are timed apart and not in these figures."""
    found = {}
    for tc in cases(report):
        test = tc['name'].split()[0]
        if tc.get('fixture') or test not in ('StartupTime', 'PvmStartup') or \
                tc['result'] != 'pass':
            continue
        for name, pv in perf(tc).items():
            if name.startswith('first_np') and pv.value is not None:
                found.setdefault(int(name[len('first_np'):]), {})[case_stack(tc)] = pv.value
    if not found:
        return []
    cols = [s for s in stacks if any(s in row for row in found.values())]
    cols += sorted({s for row in found.values() for s in row} - set(cols))
    out = ['### Start-up: to a first message from every rank (s, median of the warm launches)\n',
           'MPI stacks from the launch (StartupTime), PVM from pvm_spawn in the job\'s running '
           'pvmd (PvmStartup); daemon boots (lamboot, pvmd) are timed apart.\n',
           '| ranks | ' + ' | '.join(cols) + ' |', '|---:|' + '---:|' * len(cols)]
    for n in sorted(found):
        out.append(f'| {n} | ' + ' | '.join(f'{found[n][c]:.4f}' if c in found[n] else '-'
                                         for c in cols) + ' |')
    return out + ['']


def builds_of(report):
    """{stack: (origin, configure flags)} as the tests recorded them from the registry."""
    out = {}
    for tc in cases(report):
        if tc.get('stack_name') and tc.get('stack_origin'):
            out.setdefault(tc['stack_name'], (tc['stack_origin'], tc.get('stack_configure', '')))
    return out


# per-size figures set side by side when the run measured them (the 'quick' and 'netpipe'
# size ranges do): the latency floor and the bandwidth plateau
SIDE_BY_SIDE_SIZES = (8, 1048576)


def flag_comparison(report, versions):
    """Stacks whose library reported the same version (say MPICH 4.0.2 from Debian, ch4, and
    built here with ch3:sock): every P2PMatrix case both ran, side by side, with the ratio."""
    by_version = {}
    for stack, version in versions.items():
        by_version.setdefault(version, []).append(stack)
    figures = {}        # (stack, case) -> {figure: value}
    for tc in cases(report):
        if tc.get('fixture') or not tc['name'].startswith('P2PMatrix') or tc['result'] != 'pass':
            continue
        got = figures.setdefault((case_stack(tc),
                                  f"{tc['mode']} {tc['size_range']}"), {})
        for var, pv in perf(tc).items():
            if var in ('latency', 'bandwidth') and pv.value is not None:
                got[f'{var} ({pv.unit})'] = pv.value
        for key, samples in (tc.get('figure_samples') or {}).items():
            name, _, size = key.partition('@')
            if name == 'half_round_trip_us' and size.isdigit() and \
                    int(size) in SIDE_BY_SIDE_SIZES:
                got[f'half round trip at {int(size):,} bytes (us, median)'] = median(samples)
    out = []
    for version, stacks in by_version.items():
        for i, a in enumerate(stacks):
            for b in stacks[i + 1:]:
                rows = []
                for (stack, case), figs in figures.items():
                    other = figures.get((b, case), {}) if stack == a else {}
                    rows += [f'| {case} | {f} | {v:.4g} | {other[f]:.4g} | {other[f] / v:.3f} |'
                             for f, v in figs.items() if f in other and v]
                if rows:
                    out += [f'### Same library ({version.splitlines()[0]}), two builds: '
                            f'{b} over {a}\n',
                            f'| case | figure | {a} | {b} | {b} / {a} |',
                            '|---|---|---:|---:|---:|', *rows, '']
    return out


def render(report):
    rows, builds, stacks, versions = collect(report)
    stacks += [s for s in versions if s not in stacks]
    info = report.get('session_info', {})
    lines = ['## Summary', '',
             f"ReFrame session {info.get('uuid', '?')}, {info.get('time_start', '?')}; "
             f"run wall time {info.get('time_elapsed', 0):.0f} s; "
             f"builds {sum((b.get('time_compile') or 0) for b in builds):.0f} s in "
             f"{len(builds)} fixture(s); test cases {info.get('num_cases', '?')}, "
             f"failures {info.get('num_failures', '?')}.", '']
    built = builds_of(report)
    lines += ['| stack (ReFrame environment) | library version reported at run time | origin '
              '| configure flags |', '|---|---|---|---|']
    lines += [f'| {s} | {versions.get(s, "not reported (no passing run)")} | '
              f'{built.get(s, ("?", ""))[0]} | {built.get(s, ("", ""))[1] or "-"} |'
              for s in stacks]
    lines.append('')
    lines += tables(rows, stacks)
    lines += flag_comparison(report, versions)
    lines += app_tables(report, stacks)
    lines += startup_table(report, stacks)
    lines += peer_table.render(report)
    hung = [tc for tc in cases(report) if tc.get('finalize_hung')]
    if hung:
        lines.append(f'### MPI_Finalize hung after the measurement ({len(hung)})\n')
        lines.append('A library defect, not a figure: every record was complete and checked, '
                     'then MPI_Finalize did not return within its limit (10 s unless '
                     'TESTBED_FINALIZE_LIMIT_S says otherwise; apps/common/tb_finalize.h).')
        lines += [f"- {tc['name']} @{tc['environ']} ({tc.get('system')}:{tc.get('partition')})"
                  for tc in hung]
        lines.append('')
    held = [tc for tc in cases(report) if tc.get('not_held')]
    if held:
        lines.append(f'### Measurements that did not hold: reported, not judged ({len(held)})\n')
        lines.append('Their baseline in the same job moved, or they beat a physical bound: a '
                     'verdict on them would be one on the machine\'s state (docs/measurement.md). '
                     'A "side not judged" is judged on the other side of its row only.')
        lines += [f"- {tc['name']} @{tc['environ']}: {figure}: {why}"
                  for tc in held for figure, why in sorted(tc['not_held'].items())]
        lines.append('')
    failed = [tc for tc in cases(report) if tc['result'] in ('fail', 'fail_deps')]
    if failed:
        lines.append(f'### Failed ({len(failed)})\n')
        for tc in failed[:40]:
            reason = (tc.get('fail_reason') or '').splitlines()[0][:160] \
                if tc.get('fail_reason') else ''
            lines.append(f"- {tc['name']} @{tc['environ']}: {tc.get('fail_phase')}: {reason}")
        lines.append('')
    return '\n'.join(lines), rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('report')
    ap.add_argument('--out', help='path prefix for .md and .csv (default: print only)')
    args = ap.parse_args(argv)
    try:
        report = json.loads(Path(args.report).read_text())
    except (OSError, json.JSONDecodeError) as err:
        print(f'error: {args.report}: cannot read run report: {err}', file=sys.stderr)
        return 2
    text, rows = render(report)
    print(text)
    if args.out:
        Path(args.out + '.md').write_text(text + '\n')
        fields = ['stack', 'library_version', 'pair', 'variant', 'size_range', 'variable',
                  'value', 'unit', 'reference', 'lower', 'upper', 'result']
        with open(args.out + '.csv', 'w', newline='') as fh:
            w = csv.DictWriter(fh, fields, extrasaction='ignore', lineterminator='\n')
            w.writeheader()
            w.writerows(rows)
        print(f'written: {args.out}.md, {args.out}.csv')
    return 0


if __name__ == '__main__':
    sys.exit(main())
