"""A link profile's rate, checked: a raw TCP stream from node1 to node2 of the emulated cluster
(site/cluster/linkprobe.c, one writer and one reader, each on its node's core) must carry at
least RATE_FLOOR of the most a stream can carry at the profile's rate, and at most RATE_MARGIN
above the rate.

    python3 site/cluster/cluster.py check [--seconds S]     (make cluster-check)

The rate is the wire's (links.toml: Mbit/s, 10^6 bit/s), the stream's figure the payload's
(MB/s, 10^6 bytes/s): at MTU 1500 headers take 4.4 % of every frame (payload at most 95.6 % of
the rate), at MTU 9000 0.7 %; the floor is taken of that payload ceiling. Up to TRIES streams
are run and the best is judged: a neighbour on the machine's cores can only slow a stream, never
speed it past the bucket. When the best misses the floor, the same stream is run once more from
this machine's own namespace to node2, which crosses the same bridge and veth and no token
bucket. A machine that cannot carry the ceiling even so (a slow or busy machine, a laptop) is
not judged: its line says the profile's figures are bounded by the machine, and it passes; a
machine that can carry it fails, since then the shaping costs the rest.
"""
import json
import os
import subprocess
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, 'linkprobe.c')
#: a profile holds its rate when a stream carries at least this share of its payload ceiling
RATE_FLOOR = 0.90
#: the bytes of a frame that are not TCP payload: IP 20, TCP 20 and its timestamps 12 (the
#: Ethernet header's 14 are counted by tbf beside the MTU)
TCP_IP_HEADERS = 52
ETHERNET_HEADER = 14
#: ... and at most this much above it (the bucket, the clock)
RATE_MARGIN = 0.02
#: streams run at most, the first that holds ends the check
TRIES = 3


class ProbeError(Exception):
    pass


def build(dest_dir):
    """linkprobe compiled into dest_dir (the cluster's folder), its path."""
    exe = os.path.join(dest_dir, 'linkprobe')
    r = subprocess.run(['cc', '-O2', '-o', exe, SOURCE], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    if r.returncode:
        raise ProbeError(f'{SOURCE}: cc failed: {r.stdout.strip()[:300]}')
    return exe


def in_netns(ns, cpu):
    """The command prefix that runs a program in a node's network namespace on its core
    (the root namespace when ns is None)."""
    pre = ['nsenter', f'--net=/run/netns/{ns}'] if ns else []
    return pre + ['taskset', '-c', str(cpu)]


def stream(exe, server, client, addr, seconds, extra=()):
    """One stream client -> server (each (netns, cpu)); the client's JSON record."""
    with tempfile.TemporaryDirectory(prefix='linkprobe-') as tmp:
        portfile = os.path.join(tmp, 'port')
        srv = subprocess.Popen(in_netns(*server) + [exe, 'serve', portfile, *extra],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            end = time.monotonic() + 10
            while not os.path.exists(portfile):
                if srv.poll() is not None or time.monotonic() > end:
                    raise ProbeError(f'linkprobe serve did not start: {srv.stderr.read().strip()}')
                time.sleep(0.02)
            with open(portfile) as fh:
                port = fh.read().strip()
            r = subprocess.run(in_netns(*client) + [exe, 'stream', addr, port, '--seconds',
                                                    str(seconds), *extra],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               timeout=seconds + 60)
            if r.returncode:
                raise ProbeError(f'linkprobe stream to {addr}: {r.stderr.strip()}')
            return json.loads(r.stdout)
        finally:
            try:
                srv.wait(timeout=10)
            except subprocess.TimeoutExpired:
                srv.kill()
                srv.wait()


def payload_ceiling(rate_mbit, mtu):
    """The most a TCP stream carries at this wire rate and MTU (MB/s): the rest are headers."""
    return rate_mbit / 8 * (mtu - TCP_IP_HEADERS) / (mtu + ETHERNET_HEADER)


def verdict(profile, mtu, rate_mbit, seen_MBps, capacity_MBps=None):
    """(holds, one line) for a profile's best stream; capacity_MBps: the unshaped path's."""
    where = f'link profile {profile} (MTU {mtu})'
    if not rate_mbit:
        return True, (f'{where}: no rate declared (unshaped); raw TCP stream node1 -> node2 '
                      f'{seen_MBps:.0f} MB/s')
    declared = rate_mbit / 8                      # MB/s
    ceiling = payload_ceiling(rate_mbit, mtu)
    head = (f'{where}: raw TCP stream node1 -> node2 {seen_MBps:.0f} MB/s, declared '
            f'{rate_mbit:g} Mbit/s ({declared:.0f} MB/s, {ceiling:.0f} MB/s of TCP payload '
            f'at most)')
    if seen_MBps > declared * (1 + RATE_MARGIN):
        return False, (f'{head}: FAIL, {seen_MBps / declared:.0%} of the rate, above it by more '
                       f'than {RATE_MARGIN:.0%}: the shaping is not in force')
    if seen_MBps >= ceiling * RATE_FLOOR:
        return True, f'{head}: holds ({seen_MBps / declared:.0%} of the rate)'
    short = (f'{seen_MBps / declared:.0%} of the rate, below {RATE_FLOOR:.0%} of the payload '
             f'ceiling')
    if capacity_MBps is not None and capacity_MBps < ceiling:
        return True, (f'{head}: not judged, {short}; unshaped (this machine\'s namespace to '
                      f'node2: the same bridge and veth, no bucket) {capacity_MBps:.0f} MB/s: '
                      f'the machine\'s CPUs cannot carry the declared rate now, so this '
                      f'profile\'s figures are bounded by the machine, not the link')
    tail = ''
    if capacity_MBps is not None:
        tail = (f'; unshaped (this machine\'s namespace to node2: the same bridge and veth, no '
                f'bucket) {capacity_MBps:.0f} MB/s: the machine can carry it, the shaping '
                f'costs the rest')
    return False, f'{head}: FAIL, {short}{tail}'


def check(seconds=1.0):
    """The profile of the cluster that is up, checked: (holds, one line)."""
    from testbed_site.cluster import cluster
    if not os.path.exists(cluster.STATE):
        return False, 'cluster check: no cluster is up (run `make cluster-up`)'
    with open(cluster.STATE) as fh:
        st = json.load(fh)
    nodes = st['nodes']
    if len(nodes) < 2:
        return False, (f"cluster check: {len(nodes)} node: the rate is checked between two "
                       f"nodes (make cluster-up NODES=2)")
    a, b = nodes[0], nodes[1]
    rate = st['link'].get('rate_mbit')
    floor = payload_ceiling(rate, st['mtu']) * RATE_FLOOR if rate else 0.0
    try:
        exe = build(cluster.RUN)
        best = 0.0
        for _ in range(TRIES):
            rec = stream(exe, (b['ns'], b['cpu']), (a['ns'], a['cpu']), b['addr'], seconds)
            best = max(best, rec['MBps'])
            if best >= floor:
                break
        capacity = None
        if best < floor:
            capacity = stream(exe, (b['ns'], b['cpu']), (None, a['cpu']), b['addr'],
                              seconds)['MBps']
    except (ProbeError, OSError, ValueError, subprocess.TimeoutExpired) as e:
        return False, f"cluster check: link profile {st['profile']}: {e}"
    return verdict(st['profile'], st['mtu'], rate, best, capacity)
