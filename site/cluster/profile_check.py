#!/usr/bin/env python3
"""What the link profiles do to the figures, from the cluster runs' ReFrame reports.

    python3 site/cluster/profile_check.py REPORT.json... [--out FILE.md]

Reads the Send-Recv/complete cases of the 'quick' size range (8 B .. 1 MiB) of each partition
(link profile and MTU) and stack, from the per-size table each case keeps (p2p_sizes.csv), and
prints:
  - MPI over TCP: MPI's speed as a percentage of raw TCP's (blocking and busy-polled) at 8 B and
    at 1 MiB (100 / time_over_tcp), per profile and stack; and MPI's time over busy-poll raw
    TCP's at every size of the range (time_over_tcp_poll);
  - the 8-byte half round trip under each shaped profile against native (reported: the
    kernel here has no netem, so a profile adds no delay; links.toml);
  - MTU 9000 against 1500 on the same profile (1 MiB bandwidth), where both were run;
  - with --startup REPORT: start-up against np on the cluster (StartupTime's warm medians: to
    the return of MPI_Init on the slowest rank, and to the launcher's exit; a daemon boot
    apart), per stack and how it was launched;
  - PVM's routes between the two nodes, where PvmMatrix ran on both (quick range): the 1 MiB
    half round trip through the daemons over the direct route's (pvm_send/pvm_recv), per
    encoding, beside the study's 4x (seed 001: 90 against 330 Mbps on GigE).
Large-message bandwidth at or below the shaped rate is asserted by P2PMatrix itself, in every
run. Asserted here: every report holds its cases (a profile whose run measured nothing fails),
MPI over a shaped link is slower at 1 MiB than over native, and on the native profile (the link
not the bound) PVM's direct route is faster than the daemons' at 1 MiB for every encoding (the
study's finding, in its direction; measured 4.5x for Default, 19x for InPlace). Under gige both
routes fill the link (100-117 MB/s): reported only. Exit 1 when an assertion fails,
2 on bad input (named).
"""
import argparse
import csv
import json
import math
import os
import sys
import tomllib

HERE = os.path.dirname(os.path.abspath(__file__))
from testbed import results
from testbed.held import why_not_held
SIZES = (8, 1048576)


class InputError(Exception):
    pass


def testcases(report_path):
    """The test cases of a ReFrame report that count (a retried case as its final attempt:
    testbed.results)."""
    try:
        with open(report_path) as fh:
            report = json.load(fh)
    except (OSError, json.JSONDecodeError) as e:
        raise InputError(f'{report_path}: {e}')
    return results.final_cases(report)


def kept_table(report_path, tc, name):
    """The rows of a CSV table a test case kept in its output directory (comment lines
    skipped)."""
    path = os.path.join(tc['outputdir'], name)
    try:
        with open(path) as fh:
            return list(csv.DictReader(line for line in fh if not line.startswith('#')))
    except OSError as e:
        raise InputError(f'{report_path}: case {tc["display_name"]}: {e}')


def cases(report_path):
    """(partition, stack) -> {size: row of the mpi transport} for Send-Recv/complete, quick."""
    out = {}
    for tc in testcases(report_path):
        if (not tc.get('name', '').startswith('P2PMatrix') or tc.get('result') != 'pass'
                or tc.get('size_range') != 'quick'
                or tc.get('mode') not in ('Send-Recv/complete', ['Send-Recv', 'complete'])):
            continue
        table = {}
        for r in kept_table(report_path, tc, 'p2p_sizes.csv'):
            if r['transport'] == 'mpi':
                table[int(r['size_bytes'])] = r
        missing = [s for s in SIZES if s not in table]
        if missing:
            raise InputError(f'{os.path.join(tc["outputdir"], "p2p_sizes.csv")}: no mpi row '
                             f'for size(s) {missing}')
        out[(tc['partition'], results.case_stack(tc))] = table
    return out


def startup_lines(report_path):
    """Start-up against np from the StartupTime cases of a report (their startup.json)."""
    lines = ['', '| link profile | stack | launch | np | to MPI_Init (s) | to exit (s) | '
             'daemon boot (s) |', '|---|---|---|---:|---:|---:|---:|']
    for tc in testcases(report_path):
        if not tc.get('name', '').startswith('StartupTime') or tc.get('result') != 'pass':
            continue
        path = os.path.join(tc['outputdir'], 'startup.json')
        try:
            with open(path) as fh:
                data = json.load(fh)
            launcher = data['launcher'].split()[0]
            boot = data['boot']['boot_s']
            for row in data['summary']:
                lines.append(f"| {tc['partition']} | {results.case_stack(tc)} | "
                             f"{'srun' if launcher == 'srun' else 'fallback: ' + launcher} "
                             f"| {row['np']} | {row['warm_median_init_s']:.3f} | "
                             f"{row['warm_median_exit_s']:.3f} | "
                             f"{'' if boot is None else f'{boot:.3f}'} |")
        except (OSError, json.JSONDecodeError, KeyError, TypeError) as e:
            raise InputError(f'{path}: {e!r}')
    if len(lines) == 3:
        raise InputError(f'{report_path}: no passed StartupTime case')
    return lines


def pvm_routes(report_paths):
    """(partition, encoding) -> {route: 1 MiB median half round trip in us, route + '_tcp':
    the raw TCP timed sample by sample beside it (the case's tcp row of that size, listed after
    its PVM rows)}, from the passed
    PvmMatrix cases of the quick range (their pvm_sizes.csv), pvm_send/pvm_recv."""
    out = {}
    for report_path in report_paths:
        for tc in testcases(report_path):
            if (not tc.get('name', '').startswith('PvmMatrix') or tc.get('result') != 'pass'
                    or tc.get('size_range') != 'quick'):
                continue
            rows = kept_table(report_path, tc, 'pvm_sizes.csv')
            for i, r in enumerate(rows):
                if (r['transport'], r['pair'], r['size_bytes']) == ('pvm', 'send-recv',
                                                                     '1048576'):
                    route, _, enc = r['variant'].partition('-')
                    t = out.setdefault((tc['partition'], enc), {})
                    t[route] = float(r['median_us'])
                    tcp = next((x for x in rows[i + 1:] if x['transport'] == 'tcp' and
                                x['size_bytes'] == '1048576'), None)
                    if tcp:
                        t[f'{route}_tcp'] = float(tcp['median_us'])
    return out


#: the two routes' cases are compared only when the raw TCP timed beside each agrees within
#: this factor: a link or host that slowed during one case slows its TCP baseline too
TCP_HELD = 2.0


def route_lines(routes, failures):
    lines = ['', '| link profile | PVM encoding | 1 MiB through the daemons (us) | direct (us) | '
             'daemons over direct (study: 4x) |', '|---|---|---:|---:|---:|']
    for (part, enc), t in sorted(routes.items()):
        if not {'daemon', 'direct'} <= set(t):
            continue
        ratio = t['daemon'] / t['direct']
        tcp = {k: t[k] for k in ('daemon_tcp', 'direct_tcp') if k in t}
        held = len(tcp) < 2 or why_not_held(tcp, 'us', math.log(TCP_HELD)) is None
        lines.append(f"| {part} | {enc} | {t['daemon']:.0f} | {t['direct']:.0f} | "
                     f'{ratio:.2f}' + ('' if held else
                                       f' (not held: raw TCP beside the two cases '
                                       f'{t["daemon_tcp"]:.0f} and {t["direct_tcp"]:.0f} us)')
                     + ' |')
        if part.endswith('_native') and ratio <= 1 and held:
            failures.append(f'PVM on {part}, {enc}: the direct route ({t["direct"]:.0f} us) is '
                            f'not faster than the daemons\' ({t["daemon"]:.0f} us) at 1 MiB')
    return lines if len(lines) > 3 else []


def per_size_lines(data):
    """MPI's time over busy-poll raw TCP's at each size of the quick range, per profile and
    stack: the per-size figures P2PMatrix asserts between nodes on a shaped link
    (time_over_tcp_poll@SIZE, reframe/testbed/p2p.py) where the machine type has rows."""
    sizes = sorted({s for t in data.values() for s in t})
    lines = ['', '| link profile | stack | ' + ' | '.join(f'{s} B: MPI over busy-poll TCP'
                                                          for s in sizes) + ' |',
             '|---|---|' + '---:|' * len(sizes)]
    for (part, stack), t in sorted(data.items()):
        cells = [(t[s].get('time_over_tcp_poll') or '') if s in t else '' for s in sizes]
        lines.append(f'| {part} | {stack} | ' + ' | '.join(
            f'{float(c):.3f}' if c else 'n/a' for c in cells) + ' |')
    return lines


def pct(row, layer):
    v = row.get(f'time_over_{layer}')
    return f'{100 / float(v):.0f}%' if v not in (None, '') else 'n/a'


def shaping_verdict(bw, native_bw, rate_mbit):
    """Whether a shaped profile's 1 MiB MPI rate (MB/s) is below native's: judged only where
    the link's rate sits 10 % (the noise between two runs) below what native carried; a native
    path no faster than the link (a VM's veth may carry less than 10gige's rate) cannot show
    the shaping. 'ok', 'FAIL: ...' or 'not judged: ...'."""
    if rate_mbit and rate_mbit / 8 >= 0.9 * native_bw:
        return "not judged: native carried no more than the link's rate"
    return 'ok' if bw < native_bw else 'FAIL: not slower than native'


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('reports', nargs='+')
    ap.add_argument('--out')
    ap.add_argument('--startup', help='a report with StartupTime cases of the cluster')
    a = ap.parse_args(argv)
    with open(os.path.join(HERE, 'links.toml'), 'rb') as fh:
        profiles = tomllib.load(fh)
    data, failures = {}, []
    try:
        for path in a.reports:
            found = cases(path)
            if not found:
                failures.append(f'{path}: no passed Send-Recv/complete case of the quick range')
            data.update(found)
    except InputError as e:
        print(f'error: {e}', file=sys.stderr)
        return 2
    if not data:
        print('error: no passed P2PMatrix Send-Recv/complete case of the quick range in '
              f'{", ".join(a.reports)}', file=sys.stderr)
        return 2
    lines = ['| link profile | stack | 8 B half round trip (us) | 8 B: % of raw TCP (blocking / '
             'busy-poll) | 1 MiB (MB/s) | 1 MiB: % of raw TCP (blocking / busy-poll) |',
             '|---|---|---:|---|---:|---|']
    for (part, stack), t in sorted(data.items()):
        s, b = t[8], t[1048576]
        lines.append(f"| {part} | {stack} | {float(s['median_us']):.2f} | {pct(s, 'tcp')} / "
                     f"{pct(s, 'tcp_poll')} | {float(b['bandwidth_MBps']):.0f} | "
                     f"{pct(b, 'tcp')} / {pct(b, 'tcp_poll')} |")
    lines += per_size_lines(data)
    lines.append('')
    for (part, stack), t in sorted(data.items()):
        mtu, _, profile = part.partition('_')           # partition mtu<MTU>_<profile>
        native = data.get((f'{mtu}_native', stack))
        if profile == 'native' or native is None:
            continue
        lat, base = float(t[8]['median_us']), float(native[8]['median_us'])
        bw, nbw = float(t[1048576]['bandwidth_MBps']), float(native[1048576]['bandwidth_MBps'])
        rate = profiles.get(profile, {}).get('rate_mbit')
        verdict = shaping_verdict(bw, nbw, rate)
        lines.append(f'- {stack} under {part}: 8 B {lat:.2f} us (native {base:.2f} us); 1 MiB '
                     f'{bw:.0f} MB/s against native {nbw:.0f} MB/s and a link of '
                     f'{rate / 8 if rate else float("nan"):.0f} MB/s: {verdict}')
        if verdict.startswith('FAIL'):
            failures.append(f'{stack} {part}: 1 MiB {bw:.0f} MB/s, native {nbw:.0f} MB/s')
    for (part, stack), t in sorted(data.items()):
        if part.startswith('mtu9000_'):
            other = data.get((part.replace('mtu9000_', 'mtu1500_'), stack))
            if other:
                hi, lo = float(t[1048576]['bandwidth_MBps']), float(other[1048576]['bandwidth_MBps'])
                lines.append(f'- {stack}: 1 MiB on {part.replace("mtu9000_", "")}: MTU 9000 '
                             f'{hi:.0f} MB/s, MTU 1500 {lo:.0f} MB/s (x{hi / lo:.2f})')
    if a.startup:
        try:
            lines += startup_lines(a.startup)
        except InputError as e:
            failures.append(str(e))
    try:
        lines += route_lines(pvm_routes(a.reports), failures)
    except InputError as e:
        failures.append(str(e))
    text = '\n'.join(lines) + '\n'
    print(text, end='')
    if a.out:
        with open(a.out, 'w') as fh:
            fh.write(text)
    if failures:
        print('error: ' + '; '.join(failures), file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
