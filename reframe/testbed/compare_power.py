"""How small a slowdown does testbed.compare catch, and how often does it cry wolf?

    python3 -m testbed.compare_power DIR [--threshold 0.05]

DIR holds run reports made by ci/compare_power.sh: clean-K.json (no injection) and
slow-F-K.json (every MPI call slowed by the factor F, apps/slowdown). Every pair of clean
sessions is one clean comparison (5 sessions: 10 pairs); every (clean, slowed) pair is one
chance to detect F. The injected factor is not the figure's slowdown (apps/slowdown/README.md:
the shim's clock reads add tens of ns a call, and an application spends most of its time
outside MPI), so each cell also gives the median ratio B/A the injection caused. Per family (p2p latency = sizes up to 1 KiB, p2p bandwidth = 64 KiB and up,
su3_rmd seconds per trajectory; each per stack) it counts the comparisons that called it slower.
This is a measurement, not a test: its table goes in docs/compare.md with its date.
"""
import argparse
import itertools
import json
import re
import statistics
import sys
from pathlib import Path

from testbed import compare


def family_label(verdict_row):
    """('p2p latency' | 'p2p bandwidth' | 'su3_rmd s/traj' | other, stack) of a verdict."""
    fig = verdict_row['figure']
    stack, _, name = fig.partition(': ')
    m = re.search(r'half_round_trip_us@(\d+)', name)
    if m:
        return ('p2p latency' if int(m.group(1)) <= 1024 else 'p2p bandwidth'), stack
    test = verdict_row.get('family') or verdict_row.get('test', '')
    return (f"{test.split()[0]} {name}" if test else name), stack


def slower_families(a, b, threshold, ratios=None):
    """The set of (family, stack) labels judged slower in one comparison, and all labels;
    each label's ratio B/A is appended to ratios[label] (the effective slowdown)."""
    rows = compare.compare(a, b, threshold=threshold)
    fams, singles = compare.families(rows, threshold, 0.95)
    judged = fams + singles
    labels = {family_label(x) for x in judged}
    slow = {family_label(x) for x in judged if x['verdict'] == 'slower'}
    if ratios is not None:
        for x in judged:
            ratios.setdefault(family_label(x), []).append(x['ratio'])
    return slow, labels, compare.decide(fams, singles)


def median(values):
    """The effective slowdown the injection caused in a family, as text ('-' if none)."""
    return f'{statistics.median(values):.3f}' if values else '-'


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('dir')
    ap.add_argument('--threshold', type=float, default=0.05)
    args = ap.parse_args(argv)
    d = Path(args.dir)
    clean = sorted(d.glob('clean-*.json'))
    slowed = {}
    for p in sorted(d.glob('slow-*.json')):
        slowed.setdefault(p.stem.split('-')[1], []).append(p)
    if len(clean) < 2:
        print(f'{d}: fewer than two clean-*.json reports', file=sys.stderr)
        return 2
    load = {p: json.loads(p.read_text()) for p in clean + sum(slowed.values(), [])}
    counts, labels, exits = {}, set(), {}
    for a, b in itertools.combinations(clean, 2):
        slow, seen, rc = slower_families(load[a], load[b], args.threshold)
        labels |= seen
        exits.setdefault('clean', []).append(rc)
        for lab in slow:
            counts[('clean', lab)] = counts.get(('clean', lab), 0) + 1
    n_clean = len(exits['clean'])
    effective = {}
    def order(kv):        # factors (1.1) first, then fixed waits (+20ns), each by size
        f = kv[0]
        return (1, float(f[1:-2])) if f.startswith('+') else (0, float(f))
    for factor, paths in sorted(slowed.items(), key=order):
        for a, b in itertools.product(clean, paths):
            slow, seen, rc = slower_families(load[a], load[b], args.threshold,
                                             effective.setdefault(factor, {}))
            labels |= seen
            exits.setdefault(factor, []).append(rc)
            for lab in slow:
                counts[(factor, lab)] = counts.get((factor, lab), 0) + 1
    factors = [f for f in exits if f != 'clean']
    head = ['family', 'stack', f'false alarms ({n_clean} clean comparisons)'] + \
        [f"caught at {f if f.startswith('+') else 'x' + f} ({len(exits[f])} comparisons; "
         'median B/A)' for f in factors]
    lines = ['| ' + ' | '.join(head) + ' |', '|' + '---|' * len(head)]
    for lab in sorted(labels):
        cells = [lab[0], lab[1], str(counts.get(('clean', lab), 0))] + \
            [f"{counts.get((f, lab), 0)} ({median(effective[f].get(lab))})" for f in factors]
        lines.append('| ' + ' | '.join(cells) + ' |')
    cells = ['exit status 1 (any family)', 'all', str(sum(exits['clean']))] + \
        [str(sum(exits[f])) for f in factors]
    lines.append('| ' + ' | '.join(cells) + ' |')
    print('\n'.join(lines))
    print(f'\nthreshold {args.threshold:.0%}, family-wise confidence 95 %; clean sessions: '
          f'{len(clean)}, slowed: ' + ', '.join(f'x{f}: {len(p)}' for f, p in slowed.items()))
    return 0


if __name__ == '__main__':
    sys.exit(main())
