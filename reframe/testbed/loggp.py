"""LogGP and Streams' mechanics (reframe/tests/loggp.py says what is measured and asserted):
reading the LogGP parameters off apps/p2p's records (overheads off the CPU-overlap ladder, the
per-byte gap fitted in two segments with the protocol change found in the data, the g/G
crossover), the "within noise" rule of every asserted inequality, the peers' tables (IMB-MPI1
Uniband/Biband, NetPIPE) and the ReFrame bases that launch p2p's modes and the peers in one job.
docs/loggp.md tells how each parameter is measured and how it differs from Bell et al."""
import os
import pwd
import re

import numpy as np
import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.builtins import run_before, variable
from scipy import stats

from testbed import binding
from testbed.checks import APPS, records, shm_floor_8B_us, stack_of
from testbed.launch import StackLaunch, baseline_line, drop_privileges, extra_launch
from testbed.peer_compare import IMB, PYTHON, PeerCompareBase, library_path
from testbed.peer_table import STEADY, one_state, parse_netpipe
from testbed.perf import set_perf_variables
from testbed.registry import PEER_PROGRAMS, shell_join

#: the G fit starts here: below it the time per message is the per-message gap, flat in size
FIT_MIN_BYTES = 1024
#: each protocol range holds at least this many sizes
MIN_SEGMENT = 3
#: a protocol change is detected when the two-segment fit beats one line at this level (F test)
CHANGE_P = 0.01
#: the peers within a factor 1.1 either way (docs/peers.md), ours over theirs
PEER_BAND = 1.1
#: IMB's Uniband and Biband keep 64 messages in flight per window (IMB_uni_bandwidth.c)
IMB_WINDOW = 64


class LogGPError(ValueError):
    """The records do not hold what a parameter is read off."""


def quartiles(values):
    """(25th, 75th) percentile, numpy's linear interpolation."""
    a = np.asarray(values, dtype=float)
    return float(np.percentile(a, 25)), float(np.percentile(a, 75))


def above_within_noise(a, b, factor=1.0):
    """Whether samples `a` lie above factor x samples `b` beyond their noise: the lower
    quartile of a above factor x the upper quartile of b (the inter-quartile ranges apart).
    Every inequality LogGP and Streams assert fails only so: a VM's burst in a few samples
    moves neither quartile, and a real violation moves both."""
    return quartiles(a)[0] > factor * quartiles(b)[1]


def overhead(points):
    """o (us) off the CPU-overlap ladder of one side: `points` are P2P-OVERLAP records, each
    with the busy loop's w (work_us_measured: timed alone on the rank that runs it), the time
    per message T(w) (median_us) and its samples. T0 = T(0). Once w >= T0 the loop cannot hide
    in the wait (the message is done before the wait is called), so T(w) = w + o, o being
    what the starting and the completing call cost the CPU; o is the median of T(w) - w over
    those points (at least 2). Bell et al. read o = T0 - w*, w* the most work that leaves T at
    T0: the same o where T is flat up to w* and then w + o, and less sensitive to where the
    ladder's steps fall. Returns {'o_us', 'samples_us' (o per sample index), 't0_us',
    'hidden_us' (T0 - o: the work a message hides), 'points' (w's used)}."""
    base = [p for p in points if p['work_iters'] == 0]
    if not base:
        raise LogGPError('no point at w = 0 on the ladder')
    t0 = float(base[0]['median_us'])
    linear = sorted((p for p in points if p['work_us_measured'] >= t0),
                    key=lambda p: p['work_us_measured'])
    if len(linear) < 2:
        raise LogGPError(f'{len(linear)} ladder points with w >= T0 = {t0:.4g} us; need 2')
    o = float(np.median([p['median_us'] - p['work_us_measured'] for p in linear]))
    n = min(len(p['samples_us']) for p in linear)
    per_sample = [float(np.median([p['samples_us'][s] - p['work_us_measured'] for p in linear]))
                  for s in range(n)]
    return {'o_us': o, 'samples_us': per_sample, 't0_us': t0, 'hidden_us': t0 - o,
            'points': [p['work_us_measured'] for p in linear]}


def _line(x, y):
    """Least squares of y = a + b x with relative residuals (weights 1/y): every size counts
    alike over five decades. Returns (a, b, sum of squared relative residuals)."""
    b, a = np.polyfit(x, y, 1, w=1.0 / y)
    return float(a), float(b), float(np.sum(((y - (a + b * x)) / y) ** 2))


def two_segments(sizes, times_us, min_bytes=FIT_MIN_BYTES, min_points=MIN_SEGMENT):
    """The per-byte gap G in two protocol ranges (eager, rendezvous), the change found in the
    data: time per message T(s) from `min_bytes` on, every split with at least `min_points`
    sizes on each side fitted by two straight lines (relative least squares), the split of
    least total error kept, and the two lines tested against one (F test, 5 against 2
    parameters: two lines and the split, one line). An exhaustive search is exact for one
    change over 20-30 sizes; ruptures' costs assume a piecewise constant or a linear model in
    the index, not in the size. Returns G_eager and G_rndv (ns per byte), their intercepts
    (us), eager_last_bytes and rndv_first_bytes (the sizes either side of the change),
    change_p and change_detected, G_one (ns per byte: one line over every size)."""
    pairs = sorted((s, t) for s, t in zip(sizes, times_us) if s >= min_bytes)
    x = np.array([p[0] for p in pairs], dtype=float)
    y = np.array([p[1] for p in pairs], dtype=float)
    n = len(x)
    if n < 2 * min_points:
        raise LogGPError(f'{n} sizes of at least {min_bytes} bytes; the fit needs '
                         f'{2 * min_points}')
    a1, b1, sse1 = _line(x, y)
    best = None
    for k in range(min_points, n - min_points + 1):
        left, right = _line(x[:k], y[:k]), _line(x[k:], y[k:])
        sse = left[2] + right[2]
        if best is None or sse < best[0]:
            best = (sse, k, left, right)
    sse2, k, (ae, be, _), (ar, br, _) = best
    dof = n - 5
    if dof > 0 and sse2 > 0:
        f = ((sse1 - sse2) / 3) / (sse2 / dof)
        p = float(stats.f.sf(f, 3, dof))
    else:
        p = 0.0 if sse2 < sse1 else 1.0
    return {'G_eager': be * 1e3, 'G_rndv': br * 1e3, 'a_eager_us': ae, 'a_rndv_us': ar,
            'eager_last_bytes': int(x[k - 1]), 'rndv_first_bytes': int(x[k]),
            'change_p': p, 'change_detected': p < CHANGE_P, 'G_one': b1 * 1e3}


def crossover(g_us, fit):
    """The size M = g / G at which the per-byte term equals the per-message gap (Bell et al.,
    section 5.5: a message larger is 'large'), with G of the range M falls in: the eager G
    where g / G_eager lies below the change, else the rendezvous G. Bytes."""
    for key in ('G_eager', 'G_rndv'):
        if fit[key] <= 0:
            raise LogGPError(f'{key} = {fit[key]:.4g} ns/B: no crossover')
    m = g_us * 1e3 / fit['G_eager']
    return m if m <= fit['eager_last_bytes'] else g_us * 1e3 / fit['G_rndv']


def parse_imb_band(text, benchmark):
    """Rows of IMB-MPI1's Uniband or Biband table: size_bytes, repetitions, MBps (10^6 bytes/s,
    both directions for Biband) and msg_per_s; the rows between its '# Benchmarking' line and
    the next section."""
    found = re.search(rf'^# Benchmarking {benchmark}\s*$(.*?)(?=^# Benchmarking |^# All |\Z)',
                      text, re.M | re.S)
    if not found:
        return []
    row = re.compile(r'^\s+(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s*$', re.M)
    return [{'size_bytes': int(m[1]), 'repetitions': int(m[2]), 'MBps': float(m[3]),
             'msg_per_s': float(m[4])} for m in row.finditer(found.group(1))]


def loggp_depths(quick):
    """The flood's queue depths: Bell et al.'s 1 to 64 (the short variant three of them)."""
    return [1, 8, 64] if quick else [1, 2, 4, 8, 16, 32, 64]


def loggp_sizes(quick):
    """The flood's sizes: powers of two to 512 B, then 2^k and 1.5 x 2^k to 1 MiB."""
    if quick:
        return [8, 1024, 4096, 16384, 65536, 262144, 1048576]
    small = [2 ** k for k in range(3, 10)]
    large = sorted({s for k in range(10, 21) for s in (2 ** k, 3 * 2 ** (k - 1))
                    if s <= 1048576})
    return small + large


def pair_options(test, pair):
    """p2p's words for `pair` with the receive completed, on the test's stack (self-bound where
    the registry says the ranks pin themselves)."""
    stack = stack_of(test)[1]
    return ['--pair', pair, '--variant', 'complete', '--stack', stack.name] + \
        (['--bind-self'] if stack.self_bind else [])


def loggp_mode_options(test):
    """p2p's words for the LogGP modes of a test with `quick`, `samples`, `min_time_ms` and
    `fit_q` (its depths always hold fit_q, the depth G is fitted on)."""
    quick = test.quick == 'yes'
    depths = sorted(set(loggp_depths(quick)) | {test.fit_q})
    return ['--mode', 'loggp', '--sizes', ','.join(map(str, loggp_sizes(quick))),
            '--queue-depths', ','.join(map(str, depths)),
            '--samples', str(5 if quick else test.samples),
            '--min-time-ms', f'{test.min_time_ms:g}']


def loggp_figures(path, transport, fit_q):
    """The LogGP parameters off the records of one launch of p2p --mode loggp (`transport`'s
    records): ({name: (unit, value)}, the two-segment fit, {q: the 8-byte flood record})."""
    pp = {r['size_bytes']: r for r in records(path, 'P2P') if r['transport'] == transport}
    flood = [r for r in records(path, 'P2P-FLOOD') if r['transport'] == transport]
    over = [r for r in records(path, 'P2P-OVERLAP') if r['transport'] == transport]
    if 8 not in pp:
        raise LogGPError(f'{os.path.basename(path)}: no 8-byte {transport} ping-pong record')
    o = {side: overhead([r for r in over if r['side'] == side]) for side in ('send', 'recv')}
    g = {r['q']: r for r in flood if r['size_bytes'] == 8}
    if fit_q not in g:
        raise LogGPError(f'{os.path.basename(path)}: no 8-byte {transport} flood at q = {fit_q}')
    sweep = sorted((r['size_bytes'], r['median_us']) for r in flood if r['q'] == fit_q)
    fit = two_segments([s for s, _ in sweep], [t for _, t in sweep])
    fig = {'eel': ('us', pp[8]['median_us']),
           'o_s': ('us', o['send']['o_us']), 'o_r': ('us', o['recv']['o_us']),
           'G_eager': ('ns/B', fit['G_eager']), 'G_rndv': ('ns/B', fit['G_rndv']),
           'eager_last': ('bytes', fit['eager_last_bytes']),
           # the F test's p of two lines against one: below 0.01 the change is detected
           'change_p': ('p', fit['change_p']),
           'crossover': ('bytes', crossover(g[fit_q]['median_us'], fit))}
    fig.update({f'g_q{q}': ('us', r['median_us']) for q, r in sorted(g.items())})
    # reported, not asserted: "pipelining does not slow" is a library's property, not the
    # machine's (LAM 7.1's usysv slows as q grows: docs/loggp.md)
    lo, hi = min(g), max(g)
    fig[f'g_q{hi}_over_q{lo}'] = ('ratio', g[hi]['median_us'] / g[lo]['median_us'])
    return fig, fit, g


def launch_problems(path, tags, self_bind, one_per_node=False):
    """A launch of p2p's modes that fell short, as sanity messages: no end record, a mode or
    transport unsupported or unavailable, a record with fewer payloads checked than samples
    (every record of `tags` checks at least one received message per sample on each
    receiving rank), ranks not placed as asked."""
    why = binding.launch_placement_problem(path, self_bind, one_per_node)
    if why and not records(path, 'P2P-END'):
        return [why]
    out = [f"{r['transport']} {r['mode']}: unsupported: {r['reason']}"
           for r in records(path, 'P2P-UNSUPPORTED')]
    out += [f"{r['transport']}: unavailable: {r['reason']}"
            for r in records(path, 'P2P-UNAVAILABLE')]
    for tag in tags:
        for r in records(path, tag):
            if r['checked_messages'] < r['samples']:
                out.append(f"{tag} {r.get('style', r['transport'])} {r['size_bytes']} "
                           f"bytes: {r['checked_messages']} payloads checked, fewer than "
                           f"{r['samples']} samples")
    return out + ([why] if why else [])


def parameter_problems(test):
    """The test's parameters read (its read_parameters, which sets its `fit`) and G_eager and
    G_rndv positive, as sanity messages."""
    try:
        test.read_parameters()
    except (LogGPError, KeyError, ValueError) as err:
        return [f'LogGP parameters: {err}']
    return [f'{key} = {test.fit[key]:.4g} ns/B, not positive'
            for key in ('G_eager', 'G_rndv') if not test.fit[key] > 0]


def rma_cannot_run(*paths):
    """Why p2p said MPI one-sided cannot run in a launch (its 'transport rma cannot run'
    line: a library without one-sided on the path, e.g. Open MPI 4.1 between nodes over TCP,
    fails MPI_Win_create), or None."""
    for path in paths:
        try:
            with open(path, errors='replace') as fh:
                for line in fh:
                    if line.startswith('p2p: transport rma cannot run: '):
                        return line.split(': ', 2)[2].strip()
        except OSError:
            pass
    return None


#: the parameters set side by side with a lower layer's (MPI over TCP, two-sided over one-sided)
COMPARED = ('eel', 'o_s', 'o_r', 'g_q1', 'G_eager', 'G_rndv')


def flush_skipped(test):
    """Why the test's stack must not be asked for MPI_Win_flush (its skip_calls in
    site/stacks.toml), as the report says it, or None."""
    why = stack_of(test)[1].skip_calls.get('MPI_Win_flush')
    return f'MPI_Win_flush: {why} (site/stacks.toml skip_calls)' if why else None


def beside(fig, name, lower):
    """`lower`'s figures into `fig` as NAME_x, and each of COMPARED as fig's over lower's
    (x_over_NAME) where both are positive."""
    fig.update({f'{name}_{k}': v for k, v in lower.items()})
    for k in COMPARED:
        if lower[k][1] > 0 and fig[k][1] > 0:
            fig[f'{k}_over_{name}'] = ('ratio', fig[k][1] / lower[k][1])


def kib(size):
    return f'{size // 1048576}MiB' if size >= 1048576 else f'{size // 1024}KiB'


class PeersInJob(StackLaunch, rfm.RunOnlyRegressionTest):
    """The peers of a LogGP or Streams job: NetPIPE and IMB-MPI1 launched before our own launch
    in the same job, as PeerCompare launches them (extra_launch, pin_exec.py, the ABI shim, the
    hang bound), each peer of the stack's `peers` in site/stacks.toml. Two ranks on one host."""
    num_tasks = 2
    num_tasks_per_node = 2
    time_limit = '10m'
    sourcesdir = str(APPS / 'peers')         # pin_exec.py and page_alloc.c for the peers
    #: 'yes': a peer ratio outside 1/1.1..1.1 fails the test; 'no': reported only
    assert_peers = variable(str, value='no')
    #: 'yes': the short variant (fewer sizes, depths and samples) the studies helper runs
    quick = variable(str, value='no')
    #: why the peers' ratios were not judged ('' when they were, or were not asked to be)
    peers_not_held = variable(str, value='')
    #: our 8-byte shared-memory floor before the peers and in our launch (us)
    floors_us = variable(typ.List[float], value=[])

    def imb_benchmarks(self):
        return []

    def netpipe_sizes(self):
        return []

    @run_before('run')
    def launch_peers(self):
        reg, stack = stack_of(self)
        self.peer_logs = {}
        out = os.path.join(self.stagedir, 'peers')
        os.makedirs(out, exist_ok=True)
        if drop_privileges(reg):
            account = pwd.getpwnam(reg.run_as)
            os.chown(out, account.pw_uid, account.pw_gid)
        # First our blocking ping-pong at 8 bytes with the shared-memory floor beside it: the
        # EEL of blocking calls (the figure NetPIPE times), and the floor just before the
        # peers, which set beside the floor of our own launch tells whether the VM's vCPUs
        # stayed put between them (PeerCompare's rounds say why it matters: docs/peers.md)
        pre = [self.build.executable_path, *self.p2p_options('Send-Recv'), '--sizes', '8',
               '--samples', '15', '--min-time-ms', '2', '--baselines', 'shm']
        self.prerun_cmds.append(baseline_line(self, PeerCompareBase.bounded(
            self, 'p2p-pre', shell_join(extra_launch(self, 2) + pre) + ' > p2p-pre.log 2>&1')))
        if 'no-peers' in stack.features:
            return
        for name, needs in stack.peers.items():
            peer = PEER_PROGRAMS[name]
            if peer == 'imb' and self.imb_benchmarks() and 'intel-mpi-2021' in reg.stacks:
                program = IMB.format(intel=reg.stacks['intel-mpi-2021'].prefix)
                sizes = os.path.join(out, 'imb-sizes.txt')
                with open(sizes, 'w') as fh:
                    fh.write(''.join(f'{s}\n' for s in self.imb_sizes()))
                pre = PeerCompareBase.preload(self, stack, ['peers/page_alloc.c'], 'imb-alloc')
                self._peer_line('imb', needs, [program, *self.imb_benchmarks(), '-msglen',
                                               sizes], pre)
            elif peer == 'netpipe':
                for size in self.netpipe_sizes():
                    tag = f'netpipe-{size}'
                    self._peer_line(tag, needs, [name, '-l', str(size), '-u', str(size), '-p',
                                                 '0', '-o', os.path.join(out, f'{tag}.out')],
                                    PeerCompareBase.preload(self, stack))

    def _peer_line(self, tag, needs, argv, preload):
        stack = stack_of(self)[1]
        pin = (['--pin'] if stack.self_bind else []) + preload
        cmd = [PYTHON, '--', os.path.join(self.stagedir, 'pin_exec.py'), *pin, '--record',
               os.path.join(self.stagedir, 'peers', tag), '--', *argv]
        env = {'LD_LIBRARY_PATH': library_path(os.path.join(self.stagedir, 'abi', tag), needs)} \
            if needs else {}
        line = PeerCompareBase.bounded(self, tag, shell_join(extra_launch(self, 2, env=env) + cmd)
                                       + f' > {tag}.log 2>&1')
        self.prerun_cmds.append(baseline_line(self, line))
        self.peer_logs[tag] = os.path.join(self.stagedir, f'{tag}.log')

    def imb_rows(self, benchmark):
        path = self.peer_logs.get('imb')
        if not path:
            return {}
        with open(path) as fh:
            return {r['size_bytes']: r for r in parse_imb_band(fh.read(), benchmark)}

    def netpipe_us(self, size):
        """NetPIPE's time at `size` (us, half round trip, the least of its trials), or None."""
        path = os.path.join(self.stagedir, 'peers', f'netpipe-{size}.out')
        if f'netpipe-{size}' not in self.peer_logs or not os.path.exists(path):
            return None
        with open(path) as fh:
            rows = [r for r in parse_netpipe(fh.read()) if r['size_bytes'] == size]
        return rows[0]['time_us'] if rows else None

    def peers_steady(self):
        """Why the peers' ratios cannot be judged, or None: our 8-byte shared-memory floor just
        before the peers and in our own launch differ more than peer_table.STEADY (the vCPUs
        moved between host placements, whose floors and MPI latencies differ several-fold)."""
        try:
            before = shm_floor_8B_us(records(self.pre_path(), 'P2P'))
        except OSError:
            before = None
        ours = shm_floor_8B_us(records(self.out_path(), 'P2P'))
        self.floors_us = [before or 0.0, ours or 0.0]
        if not before or not ours:
            return 'no 8-byte shared-memory floor before the peers or in our launch'
        if not one_state((before, ours)):
            return (f'the floor moved from {before:.3f} us before the peers to {ours:.3f} us '
                    f'in our launch (more than {STEADY}x): the VM changed placement')
        return None

    def peer_problems(self, ratios):
        """Ratios (ours over the peer) outside the band, as sanity messages, when asserted and
        the machine stayed put (peers_steady)."""
        self.peers_not_held = (self.peers_steady() if ratios else None) or ''
        if self.assert_peers != 'yes' or self.peers_not_held:
            return []
        return [f'{name}: ours/peer {r:.3f}, outside 1/{PEER_BAND}..{PEER_BAND}'
                for name, r in ratios.items() if r is not None and not
                1 / PEER_BAND <= r <= PEER_BAND]

    def p2p_options(self, pair):
        return pair_options(self, pair)

    def out_path(self):
        return os.path.join(self.stagedir, self.stdout.evaluate())

    def pre_path(self):
        return os.path.join(self.stagedir, 'p2p-pre.log')

    def pre_eel(self):
        """Our blocking ping-pong's 8-byte record from the launch before the peers."""
        rows = [r for r in records(self.pre_path(), 'P2P') if r['transport'] == 'mpi']
        if not rows or not records(self.pre_path(), 'P2P-END'):
            raise LogGPError('the blocking ping-pong before the peers (p2p-pre.log) did not end')
        return rows[0]

    def common_problems(self, tags):
        """Exit, end record, placement, payloads: every record of `tags` checked at least one
        received message per sample on each receiving rank; no mode unsupported."""
        if self.exit_status_after('P2P-END') != 0:
            return [f'p2p exited with {self.exit_status_after("P2P-END")}']
        return launch_problems(self.out_path(), tags, stack_of(self)[1].self_bind)


def _samples(rec):
    return [float(v) for v in rec['samples_us']]


class LogGPBase(PeersInJob):
    """What LogGP runs and reads; its parameters and sanity are the test's."""
    #: samples per point (passes); the quick variant takes 5
    samples = variable(int, value=15)
    #: a sample lasts at least this long (ms): over 10,000 messages at 8 bytes here
    min_time_ms = variable(float, value=2.0)
    #: the queue depth whose size sweep G is fitted on
    fit_q = variable(int, value=8)
    #: 'yes': the same modes over MPI one-sided too (Put, passive-target flush), study 002's
    #: lower layer, in a launch before our own, each parameter set beside as NAME_over_rma
    one_sided = variable(str, value='yes')
    #: why the one-sided launch did not run on this stack ('' when it ran), in the report
    one_sided_not_run = variable(str, value='')

    def imb_benchmarks(self):
        return ['Uniband']

    def rma_not_run(self):
        """Why the one-sided launch does not run on this stack, or None."""
        if self.one_sided != 'yes':
            return 'left out (-S one_sided=no)'
        return flush_skipped(self)

    def rma_path(self):
        return os.path.join(self.stagedir, 'p2p-rma.log')

    def imb_sizes(self):
        return [8, 1048576]

    def netpipe_sizes(self):
        return [8]

    @run_before('run')
    def set_command(self):
        self.executable = self.build.executable_path
        # non-blocking calls throughout, as Bell et al. (EEL with the calls o is measured with)
        self.executable_opts = self.p2p_options('Isend-Irecv') + loggp_mode_options(self) + \
            ['--baselines', 'shm']
        self.one_sided_not_run = self.rma_not_run() or ''
        if self.rma_not_run() is None:
            rma = [self.executable, *self.p2p_options('Isend-Irecv'), *loggp_mode_options(self),
                   '--transport', 'rma', '--rma-op', 'put', '--rma-sync', 'flush',
                   '--baselines', 'none']
            self.prerun_cmds.append(baseline_line(self, PeerCompareBase.bounded(
                self, 'p2p-rma', shell_join(extra_launch(self, 2) + rma) + ' > p2p-rma.log 2>&1')))

    @run_before('performance')
    def read_parameters(self):
        """Every parameter off the records, once; the perf variables are these figures."""
        path = self.out_path()
        fig, self.fit, self.g = loggp_figures(path, 'mpi', self.fit_q)
        flood = records(path, 'P2P-FLOOD')
        # the peers: the blocking EEL (ours the least sample, as NetPIPE takes the least of
        # its trials) and the flood at IMB's window against Uniband, message rate at 8 B and
        # bandwidth at 1 MiB
        self.ratios = {}
        blocking = self.pre_eel()
        fig['eel_blocking'] = ('us', blocking['median_us'])
        np_us = self.netpipe_us(8)
        if np_us:
            self.ratios['eel_over_netpipe'] = blocking['min_us'] / np_us
            fig['netpipe_8B'] = ('us', np_us)
        uni = self.imb_rows('Uniband')
        deep = {r['size_bytes']: r for r in flood if r['q'] == IMB_WINDOW}
        if 8 in uni and 8 in deep:
            rate = 1e6 / deep[8]['median_us']
            fig['rate_q64_8B'] = ('msg/s', rate)
            fig['uniband_rate_8B'] = ('msg/s', uni[8]['msg_per_s'])
            self.ratios['rate_over_uniband_8B'] = rate / uni[8]['msg_per_s']
        if 1048576 in uni and 1048576 in deep:
            fig['bw_q64_1MiB'] = ('MB/s', deep[1048576]['bandwidth_MBps'])
            fig['uniband_1MiB'] = ('MB/s', uni[1048576]['MBps'])
            self.ratios['bw_over_uniband_1MiB'] = deep[1048576]['bandwidth_MBps'] / \
                uni[1048576]['MBps']
        fig.update({k: ('ours/peer', v) for k, v in self.ratios.items()})
        cannot = rma_cannot_run(self.rma_path()) if self.rma_not_run() is None else None
        if cannot:
            self.one_sided_not_run = f'the library cannot: {cannot}'
        elif self.rma_not_run() is None and not self.rma_problems():
            beside(fig, 'rma', loggp_figures(self.rma_path(), 'rma', self.fit_q)[0])
        self.figures = fig
        set_perf_variables(self, {k: (u, sn.defer(v)) for k, (u, v) in fig.items()})

    def loggp_problems(self):
        """The checks that hold on any machine: the records complete, G_eager and G_rndv
        positive, the peers' ratios where asserted."""
        # o_s, o_r <= EEL is reported, not asserted: LAM 7.1 broke it beyond noise in one of
        # the runs of 2026-11-29 (docs/loggp.md, "Not asserted")
        out = self.common_problems(['P2P', 'P2P-FLOOD', 'P2P-OVERLAP']) + self.rma_problems()
        out = out or parameter_problems(self)
        return out or self.peer_problems(self.ratios)

    def rma_problems(self):
        """The one-sided launch, where it ran, as our own: it ended, every payload checked,
        every mode supported, ranks placed as asked."""
        if self.rma_not_run() is not None or rma_cannot_run(self.rma_path()):
            return []
        path = self.rma_path()
        if not os.path.exists(path) or not records(path, 'P2P-END'):
            return [f'rma: the one-sided launch did not end (see {os.path.basename(path)})']
        return [f'rma: {p}' for p in launch_problems(
            path, ['P2P', 'P2P-FLOOD', 'P2P-OVERLAP'], stack_of(self)[1].self_bind)]


class StreamsBase(PeersInJob):
    """What Streams runs and reads; its sanity is the test's."""
    samples = variable(int, value=15)
    min_time_ms = variable(float, value=2.0)
    #: unidir/bidir's window: IMB's Uniband/Biband and OSU's bw keep 64 in flight
    window = variable(int, value=IMB_WINDOW)
    noise_factor = variable(float, value=1.0)
    #: the sizes of the perf variables
    REPORTED = (65536, 1048576)

    def sizes(self):
        if self.quick == 'yes':
            return [8, 65536, 1048576]
        return [2 ** k for k in range(3, 21)]

    def imb_benchmarks(self):
        return ['Uniband', 'Biband']

    def imb_sizes(self):
        return list(self.REPORTED)

    @run_before('run')
    def set_command(self):
        self.executable = self.build.executable_path
        self.executable_opts = self.p2p_options('Send-Recv') + [
            '--mode', 'pingpong,streams', '--sizes', ','.join(map(str, self.sizes())),
            '--window', str(self.window), '--baselines', 'shm,memcpy',
            '--samples', str(5 if self.quick == 'yes' else self.samples),
            '--min-time-ms', f'{self.min_time_ms:g}']

    def streams(self):
        rows = records(self.out_path(), 'P2P-STREAM')
        return {(r['style'], r['size_bytes']): r for r in rows}

    @run_before('performance')
    def read_figures(self):
        st = self.streams()
        mem = {r['size_bytes']: r for r in records(self.out_path(), 'P2P')
               if r['transport'] == 'memcpy'}
        fig, self.ratios = {}, {}
        uni, bi = self.imb_rows('Uniband'), self.imb_rows('Biband')
        for size in self.REPORTED:
            for style in ('stream', 'unidir', 'bidir'):
                if (style, size) in st:
                    fig[f'{style}_{kib(size)}'] = ('MB/s', st[(style, size)]['bandwidth_MBps'])
            if size in mem:
                fig[f'memcpy_{kib(size)}'] = ('MB/s', mem[size]['bandwidth_MBps'])
            if ('bidir', size) in st and ('unidir', size) in st:
                fig[f'bidir_over_unidir_{kib(size)}'] = (
                    'ratio', st[('bidir', size)]['bandwidth_MBps'] /
                    st[('unidir', size)]['bandwidth_MBps'])
            for style, peer in (('unidir', uni), ('bidir', bi)):
                if size in peer and (style, size) in st:
                    name = f"{style}_over_{'uniband' if style == 'unidir' else 'biband'}"
                    self.ratios[f'{name}_{kib(size)}'] = \
                        st[(style, size)]['bandwidth_MBps'] / peer[size]['MBps']
        fig.update({k: ('ours/peer', v) for k, v in self.ratios.items()})
        self.figures = fig
        set_perf_variables(self, {k: (u, sn.defer(v)) for k, (u, v) in fig.items()})

    def streams_problems(self):
        """Physical bounds, each within noise, at every size: a one-way stream or window moves
        no faster than memcpy on one core (a message is at least one copy, made by one core);
        the bidirectional window no faster in aggregate than two cores' memcpy (time per
        message per direction no less than memcpy's). Not asserted: bidir aggregate >= unidir
        (docs/loggp.md: LAM 7.1 and Open MPI 5 break it; bidir_over_unidir reports it)."""
        out = self.common_problems(['P2P', 'P2P-STREAM'])
        if out:
            return out
        st = self.streams()
        mem = {r['size_bytes']: r for r in records(self.out_path(), 'P2P')
               if r['transport'] == 'memcpy'}
        k = self.noise_factor
        for (style, size), r in sorted(st.items()):
            if size in mem and above_within_noise(_samples(mem[size]), _samples(r), k):
                bound = mem[size]['bandwidth_MBps'] * r['directions']
                out.append(f"{style} at {size} bytes: {r['bandwidth_MBps']:.1f} MB/s above "
                           f"{r['directions']} x memcpy's ({bound:.1f} MB/s) beyond noise")
        try:
            self.read_figures()
        except (KeyError, ValueError) as err:
            out.append(f'figures: {err}')
        return out + self.peer_problems(self.ratios)


class LogGPNodesBase(StackLaunch, rfm.RunOnlyRegressionTest):
    """LogGP between two nodes, one rank on each: the same launch of p2p --mode loggp over
    MPI two-sided (the job's own launch), over raw TCP between the same two hosts (the layer
    MPI runs on there) and over MPI one-sided (Put with flush, where the stack can flush),
    each a launch just before it, a baseline of the job; each parameter set side by side as
    MPI over TCP and MPI two-sided over one-sided. Study 002 set MPI beside the lower layer it ran
    on; between nodes here that layer is the kernel's TCP. TCP busy-polls (tcp_poll), as the
    MPI libraries do: with blocking sockets the kernel's wake-up, not the layer, set its
    latency (docs/loggp.md)."""
    num_tasks = 2
    num_tasks_per_node = 1
    time_limit = '10m'
    samples = variable(int, value=15)
    min_time_ms = variable(float, value=2.0)
    fit_q = variable(int, value=8)
    #: 'yes': the short variant (fewer sizes, depths and samples), as LogGP's
    quick = variable(str, value='no')
    #: why the one-sided launch did not run or said it cannot ('' when it ran), in the report
    one_sided_not_run = variable(str, value='')

    def options(self, transport):
        rma = ['--rma-op', 'put', '--rma-sync', 'flush'] if transport == 'rma' else []
        opts = pair_options(self, 'Isend-Irecv') + loggp_mode_options(self) + \
            ['--transport', transport, *rma, '--baselines', 'none']
        networks = self.current_partition.extras.get('tcp_networks')
        if networks:        # the addresses raw TCP may use: the site's own (as P2PMatrix's)
            opts += ['--tcp-networks', ','.join(networks)]
        return opts

    @run_before('run')
    def set_command(self):
        self.executable = self.build.executable_path
        self.executable_opts = self.options('mpi')
        self.one_sided_not_run = flush_skipped(self) or ''
        for name, transport in self.lower_layers().items():
            line = shell_join(extra_launch(self, 2, over_the_nodes=True) +
                              [self.executable, *self.options(transport)])
            self.prerun_cmds.append(baseline_line(self, f'{line} > {name}.out 2> {name}.err'))

    def lower_layers(self):
        """The launches beside MPI two-sided's: raw TCP, and MPI one-sided where the stack can
        flush (not where its skip_calls in site/stacks.toml names MPI_Win_flush)."""
        return {'tcp': 'tcp_poll'} if flush_skipped(self) else {'tcp': 'tcp_poll', 'rma': 'rma'}

    def ran_layers(self):
        """lower_layers less a one-sided launch that said the library cannot run it (the
        reason goes to one_sided_not_run: reported, not failed)."""
        out = self.lower_layers()
        if 'rma' in out:
            cannot = rma_cannot_run(*(os.path.join(self.stagedir, f'rma.{x}')
                                      for x in ('err', 'out')))
            if cannot:
                self.one_sided_not_run = f'the library cannot: {cannot}'
                del out['rma']
        return out

    def paths(self):
        out = {'mpi': os.path.join(self.stagedir, self.stdout.evaluate())}
        out.update({name: os.path.join(self.stagedir, f'{name}.out')
                    for name in self.ran_layers()})
        return out

    @run_before('performance')
    def read_parameters(self):
        """Each transport's parameters (TCP's named tcp_NAME) and MPI over each lower layer for
        COMPARED."""
        paths = self.paths()
        mpi, self.fit, _ = loggp_figures(paths['mpi'], 'mpi', self.fit_q)
        fig = dict(mpi)
        for name, transport in self.ran_layers().items():
            beside(fig, name, loggp_figures(paths[name], transport, self.fit_q)[0])
        self.figures = fig
        set_perf_variables(self, {k: (u, sn.defer(v)) for k, (u, v) in fig.items()})

    def loggp_problems(self):
        """What holds on any machine: both launches complete, every payload checked, one rank
        on each node; G_eager and G_rndv positive for MPI."""
        if self.exit_status_after('P2P-END') != 0:
            return [f'p2p exited with {self.exit_status_after("P2P-END")}']
        self_bind = stack_of(self)[1].self_bind
        out = []
        for transport, path in self.paths().items():
            if not os.path.exists(path):
                out.append(f'{os.path.basename(path)}: missing: the {transport} launch did not '
                           f'run (see {transport}.err)')
                continue
            out += [f'{transport}: {p}' for p in launch_problems(
                path, ['P2P', 'P2P-FLOOD', 'P2P-OVERLAP'], self_bind, one_per_node=True)]
        return out or parameter_problems(self)
