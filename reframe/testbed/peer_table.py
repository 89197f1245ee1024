"""The peers of apps/p2p: read the tables IMB-MPI1 PingPong and NetPIPE 3.7.2 print, and render
the summary's side-by-side table from a run report (PeerCompare, reframe/tests/peers.py).

Units: us = microseconds, half of a round trip; MB/s = 10^6 bytes/s.
"""
import math
import re
import statistics

from testbed import results

#: a round of a peer counts when the 8-byte shared-memory floors our p2p measured just before
#: and just after the peer's launches agree within this factor: it sits between the moves seen
#: within one placement of the vCPUs and the jump between two placements (docs/verification.md,
#: "Figures the code comments carried").
STEADY = 2.0

# PeerCompare's perf variables: <peer>_<size>B_<kind>, kind ours | peer (us) | ratio (ours/peer)
PERF_VAR = re.compile(r'^(imb|netpipe)_(\d+)B_(ours|peer|ratio)$')


def parse_imb(text):
    """Rows of the PingPong table: size_bytes, repetitions, t_avg_us (and t_min_us, t_max_us
    under -multi 0) and MBps. IMB's t is the loop time / repetitions / 2 (scale_time 0.5 for
    PingPong); without -multi 0 it prints one t, the largest of the two ranks' loop means."""
    rows, columns, inside = [], None, False
    for line in text.splitlines():
        if line.startswith('# Benchmarking '):
            inside = line.split()[2] == 'PingPong'
            columns = None
        elif inside and line.strip().startswith('#bytes'):
            columns = line.split()
        elif inside and columns and line.strip():
            if line.startswith('#'):
                inside = False
                continue
            values = dict(zip(columns, line.split()))
            row = {'size_bytes': int(values['#bytes']),
                   'repetitions': int(values['#repetitions']),
                   'MBps': float(values['Mbytes/sec'])}       # 10^6 bytes/s (IMB_output.c)
            for name, key in (('t_avg[usec]', 't_avg_us'), ('t[usec]', 't_avg_us'),
                              ('t_min[usec]', 't_min_us'), ('t_max[usec]', 't_max_us')):
                if name in values:
                    row[key] = float(values[name])
            rows.append(row)
    return rows


def imb_version(text):
    found = re.search(r'Intel\(R\) MPI Benchmarks (\d[\d.]*\d)', text)
    return found.group(1) if found else 'unknown'


def parse_netpipe(text):
    """Rows of NetPIPE's output file (-o): bytes, Mbps, time. Time is one way (half the round
    trip), the least of the trials' loop means, in seconds with 8 decimals; Mbps is
    bits / time / 2^20. time_us is taken from Mbps, which has more digits (%lf), and checked
    against the time column within its rounding."""
    rows = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) != 3 or not fields[0].isdigit():
            continue
        size, mbps, seconds = int(fields[0]), float(fields[1]), float(fields[2])
        time_us = size * 8 / (mbps * 2 ** 20) * 1e6
        if abs(time_us - seconds * 1e6) > 0.006 + 1e-6 * time_us:
            raise ValueError(f'NetPIPE line {line.strip()!r}: Mbps gives {time_us:.4f} us, '
                             f'the time column {seconds * 1e6:.4f} us')
        rows.append({'size_bytes': size, 'Mbps_2to20': mbps, 'time_us': time_us,
                     'MBps': size / time_us})
    return rows


def median_interval(values, confidence=0.9):
    """The distribution-free interval for the median of `values`: the k-th smallest and k-th
    largest, k as large as keeps P(the median lies between them) >= confidence (a binomial
    tail; math.comb is all it takes, and the ReFrame environment has no scipy). None when
    even the least and the largest cannot cover it (4 values cover 87.5 %, 5 cover 93.8 %)."""
    n, ordered = len(values), sorted(values)
    best = None
    for k in range(1, n // 2 + 1):
        outside = 2 * sum(math.comb(n, i) for i in range(k)) / 2 ** n
        if 1 - outside < confidence:
            break
        best = (ordered[k - 1], ordered[n - k])
    return best


def one_state(floors, steady=STEADY):
    """Whether shared-memory floors (us, each positive) were measured in one placement state
    of the machine: the largest within `steady` of the smallest."""
    floors = list(floors)
    return max(floors) <= steady * min(floors)


def paired_rounds(rounds, factor, half_unit_us=0.0, steady=STEADY, confidence=0.9):
    """Agreement of ours with a peer over rounds, each round one peer launch and our launch just
    before it: rounds = [{'ours': us, 'peer': us, 'floor_before': us, 'floor_after': us}].
    Rounds whose floors differ by more than `steady` (the machine moved) are left out; the
    figure is the median over the rest of ours, of the peer's, and of the per-round ratios.
    half_unit_us: half the last printed digit of the peer (IMB prints t_avg with 2 decimals,
    +-0.005 us, 4% of 0.12 us): a round's ratio may lie anywhere its rounding allows, and the
    agreement is judged on the value of that interval nearest 1.
    `agrees`: the median of those values lies within 1/factor..factor. `disagrees`: the
    interval that holds the median with `confidence` (median_interval) lies wholly outside
    the band, so the disagreement is not a draw of the machine: on this VM type one launch
    draws a state of its own (single launches at 1 MiB moved +-15 %, docs/peers.md), and a
    median of a few such rounds outside 1.1 is as often a draw as a difference. Neither: the
    comparison did not hold (too few rounds, or rounds that straddle the band).
    Returns None if no round is steady."""
    kept = [r for r in rounds if r['floor_before'] and r['floor_after'] and
            one_state((r['floor_before'], r['floor_after']), steady)]
    if not kept:
        return None
    nearest = []
    for r in kept:
        low = r['ours'] / (r['peer'] + half_unit_us)
        high = r['ours'] / (r['peer'] - half_unit_us) if r['peer'] > half_unit_us else \
            float('inf')
        nearest.append(min(max(1.0, low), high))
    judged = statistics.median(nearest)
    ratios = [r['ours'] / r['peer'] for r in kept]
    interval = median_interval(nearest, confidence)
    agrees = 1 / factor <= judged <= factor
    return {'ours': statistics.median(r['ours'] for r in kept),
            'peer': statistics.median(r['peer'] for r in kept),
            'ratio': statistics.median(ratios),
            'judged_ratio': judged, 'steady_rounds': len(kept),
            'spread': max(ratios) / min(ratios), 'interval': interval,
            'agrees': agrees,
            'disagrees': not agrees and interval is not None and
            (interval[0] > factor or interval[1] < 1 / factor)}


def netpipe_repetitions(log):
    """Round trips per trial, from NetPIPE's progress lines ('  0:   8 bytes  87967 times -->')."""
    return {int(m.group(1)): int(m.group(2))
            for m in re.finditer(r'^\s*\d+:\s+(\d+) bytes\s+(\d+) times -->', log, re.M)}


def _figures(tc):
    """{(peer, size): {kind: value}} of one PeerCompare test case: the perf values, or when
    sanity failed (no perf stage) the figures it recorded in its peer_figures variable."""
    out = {}
    flat = {var: pv.value for var, pv in results.perf(tc).items() if pv.value is not None}
    for key, value in (flat or tc.get('peer_figures') or {}).items():
        m = PERF_VAR.match(key)
        if m and value is not None:
            out.setdefault((m.group(1), int(m.group(2))), {})[m.group(3)] = value
    return out


def render(report):
    """Markdown lines: per stack and size, ours (mean and min), IMB t_avg, NetPIPE time, and
    the ratios; [] when the report has no PeerCompare or PvmPeerCompare case."""
    # PvmPeerCompare (tests/pvm_peers.py): p2p-pvm against NetPIPE's PVM module, same columns
    cases = [tc for tc in results.final_cases(report)
             if tc['name'].startswith(('PeerCompare', 'PvmPeerCompare')) and not tc.get('fixture')]
    if not cases:
        return []
    lines = ['### Peers: apps/p2p Send-Recv beside IMB-MPI1 PingPong and NetPIPE 3.7.2\n',
             'Half round trip in us (microseconds). Ours: mean against IMB t_avg (IMB times '
             'one loop), minimum against NetPIPE (the least of its trials); MPI stacks: '
             'medians over the rounds in which the machine stayed put (docs/peers.md). '
             'Asserted: within a factor 1.1 at every size on the MPI stacks; on pvm-3.4 (p2p-pvm '
             'send-recv direct-inplace against NetPIPE\'s PVM module, NPpvm) at 8 and '
             '1,048,576 bytes.\n',
             '| stack | bytes | ours mean | IMB t_avg | ours/IMB | ours min | NetPIPE | '
             'ours/NetPIPE | result |', '|---|---:|---:|---:|---:|---:|---:|---:|---|']
    for tc in cases:
        stack = results.case_stack(tc)
        figures = _figures(tc)
        result = 'pass' if tc['result'] == 'pass' else 'FAIL'
        if not figures:
            reason = (tc.get('fail_reason') or '').splitlines()[0][:120] \
                if tc.get('fail_reason') else ''
            lines.append(f'| {stack} | - | - | - | - | - | - | - | {result}: {reason} |')
            continue
        for size in sorted({s for _, s in figures}):
            imb, net = figures.get(('imb', size), {}), figures.get(('netpipe', size), {})
            cells = [_num(imb.get('ours')), _num(imb.get('peer')), _num(imb.get('ratio')),
                     _num(net.get('ours')), _num(net.get('peer')), _num(net.get('ratio'))]
            lines.append(f'| {stack} | {size:,} | ' + ' | '.join(cells) + f' | {result} |')
    lines.append('')
    return lines


def _num(value):
    return '-' if value is None else f'{value:.4g}' if value < 1000 else f'{value:,.0f}'
