"""KnobSweep's mechanics (reframe/tests/knob_sweep.py says what is measured and asserted): the
sweeps on one host, each point's two launches (Send-Recv, then Ssend-Recv) and their figures,
where the eager/rendezvous step sits in a point's run, and the table of every point.

A sweep sets one knob of the registry (site/stacks.toml: eager_threshold, transport) to a few
values around its default, through the library's own variables as every test sets knobs
(testbed.launch.apply_knobs). Each value is a point, a parameter of the test, so a case of its
own, with its own rows in the results (the knob values in the case's name and in its knobs) and
its own reference rows (the case column is the point's knobs).

Where the step sits: below a library's eager threshold MPI_Send returns once the message is
buffered, MPI_Ssend only once the receiver has matched it; above it Send waits for the receiver
too (rendezvous), so its time jumps toward Ssend's: the dip of the Send curve. The step is read
from Send's own curve: where its time rises faster than its size between two neighbouring
sizes (a handshake paid at once) or falls although the size grew (a cheaper path). Send's sizes
are measured in one launch, pass by pass, so the machine's state moves no step; Ssend-Recv, a
second launch of the same job, is reported beside it (Ssend over Send before the step and at
it). step_position reads one point's curve (the step_bytes it reports); sweep_steps reads each
point against the sweep's other points, so that a step the knob does not move cancels (what
KnobSweepTrend asserts).

    python3 -m testbed.knob_sweep REPORT...     # the sweep table: knob value -> step, per stack
"""
import argparse
import math
import os
import re
import statistics
import sys
from dataclasses import dataclass

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import performance_function, run_after, run_before

from testbed import binding, registry, results
from testbed.checks import AppBuild, ReferenceLookup, payload_problem, records, stack_of
from testbed.launch import StackLaunch, after_launch, extra_launch
from testbed.p2p import geomean_of, physical_bound_problem
from testbed.peer_table import STEADY, one_state


class KnobSweepBuild(AppBuild):
    app = 'p2p'


def grid(values):
    """The message sizes of a sweep over the thresholds `values` (bytes): 7/8 and 9/8 of each
    (the last size each side of it, a step of 1/4 of the threshold: the resolution), half the
    least and twice the largest (a size well inside each protocol at either end)."""
    values = sorted(int(v) for v in values)
    sizes = {values[0] // 2, values[-1] * 2}
    for v in values:
        sizes.update((v * 7 // 8, v * 9 // 8))
    return sorted(sizes)


@dataclass(frozen=True)
class Point:
    """One point of a sweep: the stack, the sweep's name, the knob values set (name, value)
    and the sizes measured."""
    stack: str
    sweep: str
    knobs: tuple
    sizes: tuple

    @property
    def name(self):
        """The knob values as the case and the reference rows name them."""
        return ','.join(f'{k}={v}' for k, v in self.knobs)

    @property
    def label(self):
        return f'{self.stack}/{self.name}'

    @property
    def swept_value(self):
        """The value of the knob the sweep moves (its last knob)."""
        return self.knobs[-1][1]


#: the eager-threshold sweeps: stack -> the values (bytes), around the library's default (said
#: beside each; read from ompi_info, laminfo and the libraries' documentation)
EAGER_VALUES = {
    'openmpi-4.1': (2048, 4096, 8192, 16384),       # btl_vader_eager_limit, default 4096
    'openmpi-5.0': (2048, 4096, 8192, 16384),       # btl_sm_eager_limit, default 4096
    'lam-7.1': (2048, 4096, 8192),                  # rpi_usysv_short, default 8192 (16384
                                                    # hangs: docs/knob-sweeps.md)
    'mpich-4.0-ch3sock': (32768, 65536, 131072, 262144),  # CH3_EAGER_MAX_MSG_SIZE, 131072
    'mpich-4.0': (2048, 4096, 8192, 16384),         # UCX_RNDV_THRESH, default auto
    'mpich-5.0': (8192, 65536, 262144),             # UCX_RNDV_THRESH, CH4_OFI_EAGER_THRESHOLD
    'intel-mpi-2021': (65536, 262144, 1048576),     # I_MPI_EAGER_THRESHOLD, default 262144
}
#: LAM's RPIs (the transport knob) and rpi_tcp_short from 64 KB to 2 MB on rpi tcp
LAM_RPIS = ('usysv', 'sysv', 'tcp', 'lamd')
LAM_TCP_SHORT = (65536, 131072, 262144, 524288, 1048576, 2097152)
#: the sizes of the RPI sweep: 8 bytes, 1 KiB, 1 MiB and either side of the default short
#: limits (usysv and sysv 8192, tcp 65536): the step of each RPI where it has one
RPI_SIZES = tuple(sorted({8, 1024, 1048576, *grid((8192, 65536))}))

#: stacks whose registry knob does not move the step on one host, and why (measured: the
#: sweep table of docs/knob-sweeps.md); their points are reported, their direction not asserted
NOT_CONTROLLED = {
    'mpich-5.0': 'Send steps at 9216 bytes (above 8 KiB) with UCX_RNDV_THRESH and '
                 'MPIR_CVAR_CH4_OFI_EAGER_THRESHOLD at 8192, 65536 and 262144 alike: between '
                 'ranks of one host the messages go through CH4\'s POSIX shared memory, whose '
                 'own threshold neither netmod variable sets',
    'intel-mpi-2021': 'Send\'s time over the floor changes between 294912 and 917504 bytes '
                      'with I_MPI_EAGER_THRESHOLD at 65536, 262144 and 1048576 alike: the '
                      'shared-memory path (I_MPI_FABRICS=shm) keeps its own threshold',
}


#: sizes beyond the values' grid: LAM's usysv steps at twice rpi_usysv_short (measured), so its
#: sweep measures either side of twice its largest value too
EXTRA_SIZES = {'lam-7.1': grid((16384,))}


def points():
    """Every point of every sweep, in a stable order."""
    out = []
    for stack, values in EAGER_VALUES.items():
        sizes = tuple(sorted(set(grid(values)) | set(EXTRA_SIZES.get(stack, ()))))
        out += [Point(stack, 'eager_threshold', (('eager_threshold', str(v)),), sizes)
                for v in values]
    out += [Point('lam-7.1', 'rpi', (('transport', rpi),), RPI_SIZES) for rpi in LAM_RPIS]
    sizes = tuple(grid(LAM_TCP_SHORT))
    out += [Point('lam-7.1', 'rpi_tcp_short', (('transport', 'tcp'), ('eager_threshold', str(v))),
                  sizes) for v in LAM_TCP_SHORT]
    return out


def trends():
    """(stack, sweep) of the sweeps whose direction is asserted: the eager thresholds. LAM's
    rpi_tcp_short is reported only: above 512 KiB TCP's own step near 1 MiB (at every value)
    hides the handshake's on loopback (docs/knob-sweeps.md)."""
    return [(s, 'eager_threshold') for s in EAGER_VALUES]


def environ_of(stack):
    """The ReFrame environment of a registry stack ('mpich-4.0' -> 'mpich-4_0')."""
    try:
        return registry.load().stacks[stack].environ
    except KeyError:
        return stack.replace('.', '_')


# --- where the step sits (pure) --------------------------------------------------------------

#: the least change of Send's time between two neighbouring sizes, in log space, for a step to
#: count (10 %): a rise beyond the size's (a handshake paid at once) or a fall (a cheaper path)
MIN_JUMP = math.log(1.10)


def step_position(sizes, send_us, min_jump=MIN_JUMP):
    """Where Send's protocol changes, from the median time of Send-Recv at each size: (the
    first size of the upper protocol, the jump in log space, negative for a fall) or
    (None, None) with no step.

    Within one protocol a time grows with its size, at most as fast (a fixed cost and a part
    per byte): between neighbouring sizes a < b, 0 <= ln(t(b)/t(a)) <= ln(b/a). Where Send
    turns to rendezvous it either pays a handshake at once, and its time rises faster than its
    size (the rise ln(t(b)/t(a)) - ln(b/a) > 0), or takes a cheaper path for large messages (a
    single copy), and its time falls although the size grew (the fall -ln(t(b)/t(a)) > 0).
    The step is at the largest rise or fall, if it reaches `min_jump`. Send's sizes are
    measured in the same launch, pass by pass, so a change of the machine's state touches them
    all alike and moves no step."""
    if len(sizes) != len(send_us) or len(sizes) < 2:
        raise ValueError(f'step_position: {len(sizes)} sizes and {len(send_us)} times: give '
                         f'one time per size, two sizes or more')
    if any(not t or t <= 0 for t in send_us) or any(s <= 0 for s in sizes):
        raise ValueError('step_position: a size or a time is not positive')
    pairs = sorted(zip(sizes, send_us))
    best, where = None, None
    for (a, ta), (b, tb) in zip(pairs, pairs[1:]):
        growth = math.log(tb / ta)
        rise, fall = growth - math.log(b / a), -growth
        jump = rise if rise >= fall else growth
        if max(rise, fall) >= min_jump and (best is None or max(rise, fall) > abs(best)):
            best, where = jump, b
    return (where, best) if where is not None else (None, None)


def bracket(sizes, value):
    """(the largest size at or below `value`, the smallest above it): the resolution within
    which a step can be placed at a threshold `value` with these sizes (None where none)."""
    below = [s for s in sizes if s <= value]
    above = [s for s in sizes if s > value]
    return (max(below) if below else None, min(above) if above else None)


def jumps(sizes, send_us):
    """{size b: the change of Send's time from the size before, beyond its size's growth,
    ln(t(b)/t(a)) - ln(b/a)} over neighbouring sizes a < b (step_position's measure)."""
    pairs = sorted(zip(sizes, send_us))
    return {b: math.log(tb / ta) - math.log(b / a) for (a, ta), (b, tb) in zip(pairs, pairs[1:])}


def sweep_steps(curves, min_jump=MIN_JUMP):
    """Where each point of one sweep steps, relative to the sweep's other points: {knob value:
    (size, excess) or (None, None)}. `curves`: {knob value: (sizes, Send's median times)}, the
    same sizes for every point, three points or more.

    A step the knob does not move (MPICH 5's shared memory above 8 KiB, TCP's above 1 MiB on
    LAM's tcp RPI) sits at the same size in every point's curve; the knob's own sits at a size
    of its own in each. So at every size the jump of each point is taken against the median
    jump of the sweep's points there, and a point's step is where its jump exceeds that median
    most, by `min_jump` at least."""
    if len(curves) < 3:
        raise ValueError(f'sweep_steps: {len(curves)} points: the median of a sweep needs three '
                         f'or more')
    profiles = {v: jumps(*c) for v, c in curves.items()}
    sizes = set.intersection(*(set(p) for p in profiles.values()))
    mid = {b: statistics.median(p[b] for p in profiles.values()) for b in sizes}
    out = {}
    for v, p in profiles.items():
        times = dict(zip(*curves[v]))
        before = {b: max(a for a in times if a < b) for b in sizes}
        # a rise above the sweep's, or a fall below it where the time itself fell (after a
        # rise the next jump is lower than the sweep's without any step there)
        excess = {b: max(p[b] - mid[b],
                         mid[b] - p[b] if times[b] < times[before[b]] else 0.0)
                  for b in sizes}
        b = max(sorted(excess), key=lambda k: excess[k]) if excess else None
        out[v] = (b, excess[b]) if b is not None and excess[b] >= min_jump else (None, None)
    return out


def trend_steps(curves, floors, steady=STEADY):
    """({knob value: the step's first size or None}, how they were read) for one sweep.
    `curves` as sweep_steps takes them; `floors`: {knob value: the point's shared-memory floor
    at the sweep's smallest size, us}. Points whose floors lie within `steady` of each other
    ran in one state of the machine and are read against each other (sweep_steps: a step the
    knob does not move cancels). Otherwise a VM's state changed between their jobs and moved
    every size's time, not alike, so that a point's jumps no longer compare with the others':
    each point is read alone (step_position), as one launch measures all its sizes."""
    if one_state(floors.values(), steady):
        return ({v: s for v, (s, _) in sweep_steps(curves).items()},
                "each point against the sweep's others")
    lo, hi = min(floors.values()), max(floors.values())
    return ({v: step_position(*c)[0] for v, c in curves.items()},
            f'each point alone: their shared-memory floors read {lo:.3g}-{hi:.3g} us, more '
            f'than {steady:g}x apart (the machine changed state between their jobs)')


def trend_problem(steps):
    """Why a sweep's steps do not follow its knob, or None. `steps`: [(knob value, first size
    of the upper protocol or None)]. Every point must show a step, and the step must move up
    with the knob: a larger value, a step at a larger size (the sizes resolve it to the
    neighbouring sizes measured)."""
    if len(steps) < 2:
        return f'{len(steps)} point(s): a direction needs two or more'
    steps = sorted(steps)
    for value, step in steps:
        if step is None:
            return f'knob value {value}: no step in Send\'s time at any size measured'
    for (v1, s1), (v2, s2) in zip(steps, steps[1:]):
        if s2 <= s1:
            return (f'knob value {v2}: the step is at {s2} bytes, not above the step at '
                    f'{s1} bytes of knob value {v1}: it does not move with the knob')
    return None


# --- the test's base ---------------------------------------------------------------------------

class KnobSweepBase(StackLaunch, ReferenceLookup, rfm.RunOnlyRegressionTest):
    """What KnobSweep runs and computes; its parameter, variables and sanity are the test's."""

    SSEND_OUT = 'ssend.out'

    @run_after('init')
    def name_point(self):
        self.valid_prog_environs = [environ_of(self.point.stack)]
        self.reference_case = self.point.name
        self.knobs = dict(self.point.knobs)

    @run_after('setup')
    def keep_knobs(self):
        self.knobs = {**dict(self.point.knobs), **self.knobs}

    def p2p_options(self, pair, baselines):
        opts = ['--pair', pair, '--variant', 'complete',
                '--sizes', ','.join(str(s) for s in self.point.sizes),
                '--samples', str(self.samples), '--min-time-ms', str(self.min_time_ms),
                '--stack', stack_of(self)[1].name, '--baselines', baselines]
        return opts + (['--bind-self'] if stack_of(self)[1].self_bind else [])

    @run_before('run')
    def set_command(self):
        """Send-Recv with the shared-memory floor beside it, then in the same job, with the
        same knobs, Ssend-Recv (its output in ssend.out, its exit code after it)."""
        self.executable = self.build.executable_path
        self.executable_opts = self.p2p_options('Send-Recv', 'shm')
        line = registry.shell_join(extra_launch(self, 2) + [self.executable] +
                                   self.p2p_options('Ssend-Recv', 'none'))
        after_launch(self, f'{line} > {self.SSEND_OUT} 2> ssend.err; '
                           f'echo "SSEND-EXIT $?" >> {self.SSEND_OUT}')

    @run_before('run', always_last=True)
    def slow_one_point(self):
        """With -S KnobSweep.slowdown_at=POINT (a point's label, stack/knobs) and
        TESTBED_INJECT_SLOWDOWN set, only that point's job keeps the slowdown shim: every
        other point runs as it would without, and records no injected slowdown."""
        if not self.slowdown_at or self.slowdown_at == self.point.label or \
                not os.environ.get('TESTBED_INJECT_SLOWDOWN'):
            return
        for name in [n for n in self.env_vars if n == 'LD_PRELOAD' or
                     n.startswith('TESTBED_SLOWDOWN')]:
            del self.env_vars[name]
        self.postrun_cmds = [c for c in self.postrun_cmds if 'slowdown shim not active' not in c]
        self.injected_slowdown, self.injected_delay_ns = 1.0, 0
        self.injected_calls = self.injected_scope = ''

    def _rows(self, name):
        return records(os.path.join(self.stagedir, name), 'P2P')

    def _mpi(self, name):
        return {r['size_bytes']: r for r in self._rows(name) if r['transport'] == 'mpi'}

    def _out(self):
        return self.stdout.evaluate()

    @sn.deferrable
    def _ssend_exit(self):
        with open(os.path.join(self.stagedir, self.SSEND_OUT), errors='replace') as fh:
            codes = [line.split()[1] for line in fh if line.startswith('SSEND-EXIT ')]
        return int(codes[-1]) if codes else None

    @sn.deferrable
    def _checked(self):
        """Every size of both pairs measured, payload-checked, each rank on a core of its own
        (as P2PMatrix checks), and no MPI time below the shared-memory floor at 8 bytes."""
        for name, want in ((self._out(), ['mpi', 'shm']), (self.SSEND_OUT, ['mpi'])):
            rows = self._rows(name)
            for transport in want:
                got = sorted(r['size_bytes'] for r in rows if r['transport'] == transport)
                if got != list(self.point.sizes):
                    return f'{name}: {transport}: sizes measured {got} differ from the sweep\'s'
            problem = payload_problem(rows, self.samples, lambda r: f"{name}: {r['transport']}")
            if problem:
                return problem
            problem = binding.launch_placement_problem(os.path.join(self.stagedir, name),
                                                       stack_of(self)[1].self_bind)
            if problem:
                return f'{name}: {problem}'
        return physical_bound_problem(self._rows(self._out())) or True

    def floor_us(self):
        """The shared-memory floor at the sweep's smallest size (median, us) of this point's
        Send-Recv launch: the state of the machine the point ran in."""
        shm = [r for r in self._rows(self._out()) if r['transport'] == 'shm']
        return min(shm, key=lambda r: r['size_bytes'])['median_us']

    def send_curve(self):
        """(sizes, Send-Recv's median time at each, us) of this point's run."""
        send = self._mpi(self._out())
        return sorted(send), [send[s]['median_us'] for s in sorted(send)]

    def step(self):
        """(first size of the upper protocol, jump in log space) of this point's Send-Recv
        run, or (None, None)."""
        return step_position(*self.send_curve())

    def ssend_over_send(self, size):
        """Ssend-Recv's median time over Send-Recv's at `size`: above 1 where Send returns
        before the receiver matched (eager), about 1 where it waits too (rendezvous)."""
        return self._mpi(self.SSEND_OUT)[size]['median_us'] / \
            self._mpi(self._out())[size]['median_us']

    def below(self, size):
        """The size measured before `size`."""
        return max(s for s in self.point.sizes if s < size)

    @run_after('sanity')
    def keep_figures(self):
        """Library version for the report; every sample of both pairs (figure_samples)."""
        run = records(os.path.join(self.stagedir, self._out()), 'P2P-RUN')[0]
        self.library_version = run.get('library_version', 'unknown')
        self.figure_samples = {
            f'{pair}_half_round_trip_us@{s}': [float(v) for v in r['samples_us']]
            for pair, name in (('send', self._out()), ('ssend', self.SSEND_OUT))
            for s, r in self._mpi(name).items()}

    @run_before('performance')
    def step_reported(self):
        """The step's size and height are figures of a point whose run shows one; a run with
        none has neither (the sweep table says 'none'), rather than a made-up number."""
        if self.step()[0] is None:
            for name in ('step_bytes', 'step_jump', 'ssend_over_send_below',
                         'ssend_over_send_at'):
                self.perf_variables.pop(name, None)

    def perf_variable_names(self):
        """The figures references are looked up (and made) for: both pairs' times and Send's
        over the floor; the step's place and height are reported, never keyed."""
        return ['send_latency', 'ssend_latency', 'time_over_shm']

    @staticmethod
    def portable_variable(name):
        """None travels: these are one pair's figures on one host, which the VM's state moves
        (P2PStack's reason, reframe/tests/p2p_matrix.py): rows of one machine, made there."""
        return False

    def _geomean(self, name, field):
        return geomean_of(self._mpi(name).values(), field)

    @performance_function('us')
    def send_latency(self):
        return self._geomean(self._out(), 'median_us')

    @performance_function('us')
    def ssend_latency(self):
        return self._geomean(self.SSEND_OUT, 'median_us')

    @performance_function('ratio')
    def time_over_shm(self):
        return self._geomean(self._out(), 'time_over_shm')

    @performance_function('bytes')
    def step_bytes(self):
        return self.step()[0]

    @performance_function('ratio')
    def step_jump(self):
        """Send's rise at the step beyond its size's (above 1), or its fall (below 1)."""
        return math.exp(self.step()[1])

    @performance_function('ratio')
    def ssend_over_send_below(self):
        return self.ssend_over_send(self.below(self.step()[0]))

    @performance_function('ratio')
    def ssend_over_send_at(self):
        return self.ssend_over_send(self.step()[0])


def main(argv=None):
    ap = argparse.ArgumentParser(prog='python3 -m testbed.knob_sweep',
                                 description='The knob sweep table of run reports: per stack '
                                             'and point, where the Send-Ssend step sits')
    ap.add_argument('sources', nargs='+', metavar='SOURCE',
                    help='run report (JSON), archived run folder or stored session UUID')
    args = ap.parse_args(argv)
    try:
        rows = results.read(args.sources)
    except results.ResultsError as err:
        print(f'knob_sweep: {err}', file=sys.stderr)
        return 2
    cases = {}
    for r in rows:
        if r.test == 'KnobSweep' and r.source == 'perfvalue':
            cases.setdefault((r.session, r.stack, r.case, r.knobs, r.result), {})[r.variable] = r.value
    if not cases:
        print(f'knob_sweep: no KnobSweep case in {", ".join(args.sources)}', file=sys.stderr)
        return 2
    print(f'{"stack":18} {"knobs":40} {"step at (bytes)":>15} {"jump":>6} {"Ss/S below":>10} '
          f'{"Ss/S at":>8} {"Send (us)":>10} {"Ssend (us)":>10} {"over shm":>9} result')
    def order(item):        # by stack, then the knobs with their numbers as numbers
        return item[0][1], [int(w) if w.isdigit() else w for w in re.split(r'(\d+)', item[0][3])]

    for (session, stack, case, knobs, result), fig in sorted(cases.items(), key=order):
        step = fig.get('step_bytes')
        print(f'{stack:18} {knobs:40} {(f"{step:.0f}" if step else "none"):>15} '
              f'{fig.get("step_jump") or 0:>6.2f} {fig.get("ssend_over_send_below") or 0:>10.2f} '
              f'{fig.get("ssend_over_send_at") or 0:>8.2f} {fig.get("send_latency") or 0:>10.3f} '
              f'{fig.get("ssend_latency") or 0:>10.3f} {fig.get("time_over_shm") or 0:>9.3f} '
              f'{result}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
