"""PeerCompare's verdicts, from the figures its job printed: per peer and size, our p2p against
IMB or NetPIPE over the rounds (paired_rounds decides), each launch's ranks and libraries, and
the side-by-side table peers.csv. reframe/tests/peers.py reads the outputs and says what is
asserted; the rules live here, where unit tests can reach them."""
import csv

from testbed.peer_table import STEADY, paired_rounds

#: a peer and our p2p agree when the median ratio of the steady rounds is within this factor
FACTOR = 1.10
#: what of ours each peer is compared with: the same statistic as the peer prints
OURS = {'imb': 'mean_us', 'netpipe': 'min_us'}
NAMES = {'imb': 'IMB t_avg', 'netpipe': 'NetPIPE time'}
#: half the last digit each peer prints, in us: IMB's t_avg has 2 decimals; NetPIPE's time is
#: taken from its Mbps column, 9 digits (parse_netpipe)
HALF_UNIT = {'imb': 0.005, 'netpipe': 0.0}
CSV_HEADER = ['stack', 'peer', 'size_bytes', 'ours_statistic', 'ours_us', 'peer_statistic',
              'peer_us', 'ratio', 'judged_ratio', 'steady_rounds',
              'rounds_ours/peer_x_repetitions@floors_us', 'asserted', 'agrees']


def judge(stack, peer, size, rounds, shown, asserted, rounds_run, min_steady, confidence):
    """The verdict at one size: (figures, the table's row, why it was not held or None, the
    problem sanity reports or None). rounds: [{'ours', 'peer', 'floor_before',
    'floor_after'}]; shown: the same rounds as text for the messages."""
    got = paired_rounds(rounds, FACTOR, HALF_UNIT[peer], confidence=confidence)
    steady = got['steady_rounds'] if got else 0
    figures = {f'{peer}_{size}B_ours': got['ours'], f'{peer}_{size}B_peer': got['peer'],
               f'{peer}_{size}B_ratio': got['ratio']} if got else {}
    fmt = {k: f'{got[k]:.4f}' if got else '' for k in ('ours', 'peer', 'ratio', 'judged_ratio')}
    row = [stack, peer, size, OURS[peer], fmt['ours'], NAMES[peer], fmt['peer'], fmt['ratio'],
           fmt['judged_ratio'], f'{steady}/{rounds_run}', ' '.join(shown), asserted,
           got['agrees'] if asserted and got else '']
    if not asserted:
        return figures, row, None, None
    if steady < min_steady:
        return figures, row, (
            f'{steady} of {rounds_run} rounds steady, {min_steady} needed (the 8-byte shm floor '
            f'moved by more than {STEADY}x across the peer\'s launch; rounds ours/peer@floors: '
            f'{" ".join(shown)})'), None
    if got['agrees']:           # the median of the steady rounds lies within the band
        return figures, row, None, None
    if not got['disagrees']:
        reach = (f'its {confidence:.0%} interval {got["interval"][0]:.3f}..'
                 f'{got["interval"][1]:.3f} reaches into the band' if got['interval'] else
                 f'{steady} steady rounds, too few for a {confidence:.0%} interval')
        return figures, row, (
            f'median ratio {got["judged_ratio"]:.3f}, outside 1/{FACTOR}..{FACTOR}, but '
            f'{reach}: the launches drew states a 10 % verdict cannot see through (rounds '
            f'ours/peer@floors: {" ".join(shown)})'), None
    # the median's interval wholly outside the band
    return figures, row, None, (
        f'{stack}: p2p {OURS[peer].replace("_us", "")} {got["ours"]:.3f} us vs {NAMES[peer]} '
        f'{got["peer"]:.3f} us at {size} bytes: median ratio of {steady} steady rounds '
        f'{got["ratio"]:.3f} (nearest 1 within the peer\'s rounding {got["judged_ratio"]:.3f}, '
        f'its {confidence:.0%} interval {got["interval"][0]:.3f}..{got["interval"][1]:.3f}), '
        f'outside 1/{FACTOR}..{FACTOR}')


def launch_problems(launches, expected, self_bind, runs):
    """Each launch: two ranks, each on one CPU of its own; every peer on our p2p's library.
    launches: {tag: [rank records]}; expected: the tags that must have run; runs: {our
    launch tag: its P2P-RUN record} (a self-binding stack pins after its record)."""
    problems = []
    ours = {lib for tag, ranks in launches.items() if tag.startswith('p2p-')
            for r in ranks for lib in r['mpi_libraries'].values()}
    for tag in expected:
        ranks = launches.get(tag, [])
        cpus = [tuple(r['cpus']) for r in ranks]
        if tag.startswith('p2p-') and self_bind:
            cpus = [(c,) for c in runs.get(tag, {}).get('cpus_start', [None, None])]
        if len(ranks) != 2:
            problems.append(f'{tag}: {len(ranks)} rank records, expected 2')
        elif any(len(c) != 1 for c in cpus) or cpus[0] == cpus[1]:
            problems.append(f'{tag}: ranks not each on a CPU of its own: {cpus}')
        for r in ranks:
            libs = set(r['mpi_libraries'].values())
            if r['ldd_problems']:
                problems.append(f'{tag} rank {r["rank"]}: {r["ldd_problems"][0]}')
            elif not tag.startswith('p2p-') and ours and libs != ours:
                problems.append(f'{tag} rank {r["rank"]} loads {sorted(libs)}, '
                                f'our p2p {sorted(ours)}')
    return problems


def write_csv(path, stack, version, imb_version, launches, table):
    """peers.csv: a comment line per launch, then the medians over the steady rounds; each
    round as ours/peer x the peer's repetitions @ the 8-byte shm floor (us) of our launches
    just before and just after the peer."""
    with open(path, 'w', newline='') as fh:
        fh.write(f'# {stack} {version}; IMB {imb_version}; half round trip in us '
                 f'(microseconds); asserted within a factor {FACTOR}\n')
        for tag, ranks in sorted(launches.items()):
            fh.write(f'# launch {tag}: ' + '; '.join(
                f'rank {r["rank"]} cpus {r["cpus"]} {sorted(r["mpi_libraries"].values())}'
                for r in sorted(ranks, key=lambda r: str(r['rank']))) + '\n')
        w = csv.writer(fh, lineterminator='\n')
        w.writerow(CSV_HEADER)
        w.writerows(table)
