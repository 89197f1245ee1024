#!/usr/bin/python3
"""Whether a PeerCompare job has enough steady rounds, asked by the job itself between rounds
(reframe/tests/peers.py runs another round while this says no, up to its most rounds).

    steady_rounds.py --rounds K --need N --steady F --peers imb,netpipe --last-log LOG

A round of a peer is steady when the 8-byte shared-memory floor of our launch just before the
peer's launches and of our launch just after them agree within a factor F (the rule of
testbed.peer_table, which gives F): the machine stayed put. Our launches of round k are
p2p-r<k>.log (before IMB), p2p-shared-r<k>.log (after IMB, before NetPIPE; only when NetPIPE
runs) and p2p-r<k+1>.log (after NetPIPE, or after IMB when it runs alone; LOG where that is the
job's own launch): the pairs PeerCompare's verdict reads (testbed.peer_compare.compare). Exit 0
when every peer has N steady rounds among rounds 1..K, else 1. Debian's python, standard
library only: it runs as the job account in the stage.
"""
import argparse
import json
import os
import sys


def floor_us(path):
    """The median 8-byte shared-memory floor in a p2p log, None if it has none."""
    try:
        with open(path, errors='replace') as fh:
            for line in fh:
                if line.startswith('P2P {'):
                    rec = json.loads(line[4:])
                    if rec.get('transport') == 'shm' and rec.get('size_bytes') == 8:
                        return float(rec['median_us'])
    except (OSError, ValueError):
        return None
    return None


def steady(before, after, factor):
    return bool(before and after) and max(before, after) / min(before, after) <= factor


def count(rounds, peers, factor, last_log, folder='.'):
    """{peer: steady rounds among 1..rounds}."""
    def log(tag):
        path = os.path.join(folder, f'{tag}.log')
        return path if os.path.exists(path) else last_log
    out = {}
    for peer in peers:
        n = 0
        for k in range(1, rounds + 1):
            if peer == 'imb':
                # ours just after IMB: in NetPIPE's layout when NetPIPE runs next, else the
                # next round's first launch
                pair = (f'p2p-r{k}', f'p2p-shared-r{k}' if 'netpipe' in peers
                        else f'p2p-r{k + 1}')
            else:
                pair = (f'p2p-shared-r{k}', f'p2p-r{k + 1}')
            n += steady(floor_us(log(pair[0])), floor_us(log(pair[1])), factor)
        out[peer] = n
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--rounds', type=int, required=True)
    ap.add_argument('--need', type=int, required=True)
    ap.add_argument('--steady', type=float, required=True)
    ap.add_argument('--peers', required=True)
    ap.add_argument('--last-log', required=True)
    args = ap.parse_args(argv)
    got = count(args.rounds, args.peers.split(','), args.steady, args.last_log)
    print(f'steady rounds after {args.rounds}: ' +
          ', '.join(f'{p} {n} of {args.need} needed' for p, n in got.items()), file=sys.stderr)
    return 0 if all(n >= args.need for n in got.values()) else 1


if __name__ == '__main__':
    sys.exit(main())
