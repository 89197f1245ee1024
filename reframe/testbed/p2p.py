"""P2PMatrix's mechanics (reframe/tests/p2p_matrix.py says what is measured and asserted): the
send modes, the build of apps/p2p, the command line of one case with its raw layers, the checks
of its records (payloads, placement, physical bounds, the link's rate) and the figures over
every size of its range."""
import json
import math
import os

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import performance_function, run_after, run_before

from testbed import binding
from testbed.held import why_below_its_layer
from testbed.checks import (AppBuild, ReferenceLookup, payload_problem, records,
                            shm_floor_8B_us, stack_of)
from testbed.launch import StackLaunch
from testbed.sizes import SCHEDULES

PAIRS = [f'{s}-{r}' for s in ('Send', 'Isend', 'Ssend', 'Issend') for r in ('Recv', 'Irecv')]
# 'preposted' posts the next Irecv before the partner can send: it exists for Irecv pairs only.
MODES = [(p, 'complete') for p in PAIRS] + [(p, 'preposted') for p in PAIRS
                                             if p.endswith('Irecv')]


class P2PBuild(AppBuild):
    app = 'p2p'


#: the sizes at which the shared-memory floor is a floor: the cache-line flag alone (at larger
#: sizes a library's single kernel copy may beat its two pipelined copies: 0.6x at 64 KiB)
SHM_FLOOR_SIZES = (8,)


def physical_bound_problem(rows):
    """Why a run broke a physical bound, or None: no MPI time may beat memcpy of the same
    bytes on one core at any size (a message is at least one copy), nor the cache-line flag
    ping-pong between the same two cores at 8 bytes. Both hold on any machine; a run that
    breaks one measured something else (a baseline slowed, a broken timer)."""
    for r in rows:
        if r['transport'] != 'mpi':
            continue
        for layer, sizes in (('memcpy', None), ('shm', SHM_FLOOR_SIZES)):
            ratio = r.get(f'time_over_{layer}')
            if ratio is not None and (sizes is None or r['size_bytes'] in sizes) and ratio < 1:
                return (f"MPI at {r['size_bytes']} bytes took {ratio:.3f} of the {layer} "
                        f"baseline's time: below a physical bound (a baseline that did not "
                        f"hold, or a broken timer)")
    return None


#: the size ranges whose ratio to busy-poll raw TCP is also a figure per size between nodes over
#: a shaped link (those the cluster runs there: ci/cluster.sh), not only the geometric mean
#: over the sizes (one run read mpich-4.0 on gige 1.35x raw TCP at 1 MiB, inside the mean), at
#: the sizes the link sets the time of: more than two token buckets (a smaller message leaves
#: an idle link at once, and the VM sets its time: 64 KiB on 10gige read 1.68x and 0.34x)
PER_SIZE_RANGES = ('quick', 'large')
#: the per-size figure's name: the ratio at one message size in bytes
PER_SIZE = 'time_over_tcp_poll@{}'


def geomean_of(rows, field):
    """The geometric mean of `field` over a run's records (a size each); every value must be
    positive (a missing one would move the mean)."""
    vals = [r[field] for r in rows]
    if not vals or any(v is None or v <= 0 for v in vals):
        raise ValueError(f'{field}: no positive value for every size')
    return math.exp(sum(math.log(v) for v in vals) / len(vals))


def per_size_of(name):
    """The message size of a per-size figure's name (PER_SIZE)."""
    return int(name.rsplit('@', 1)[1])


class P2PMatrixBase(StackLaunch, ReferenceLookup, rfm.RunOnlyRegressionTest):
    """What P2PMatrix runs and computes; its parameters, variables and sanity are the test's."""

    @run_after('init')
    def name_case(self):
        self.pair, self.variant = self.mode
        self.reference_case = f'{self.pair}/{self.variant}/{self.size_range}/{self.cache}'
        # per-size rows exist for some machine types only: asserted where the type has one
        self.optional_portable = self.optional_portable + self.per_size_names()

    def per_size_names(self, bucket=0):
        """The per-size figures of this size range (none outside PER_SIZE_RANGES), at sizes
        above LINK_RATE_MIN_BUCKETS token buckets of `bucket` bytes."""
        if self.size_range not in PER_SIZE_RANGES:
            return []
        return [PER_SIZE.format(size) for size in SCHEDULES[self.size_range]
                if size > self.LINK_RATE_MIN_BUCKETS * bucket]

    def perf_variable_names(self):
        """On one node: none (reported, never asserted per mode; P2PStack asserts their
        median). Between nodes over a shaped link (a partition with a link rate whose raw
        layers include busy-poll TCP): MPI's time over busy-poll raw TCP's, per mode. Both
        cross the same link in the same job, both poll (as MPICH and Open MPI progress), and
        the link sets their time. The ratio to *blocking* TCP is reported only: its
        denominator holds the receiver's wake-up, which the VM sets, not the link (mpich-4.0,
        gige, quick range: median 0.73 and lowest 0.64 over eight runs on one machine, 0.53
        on the CI machine, whose busy-poll ratios all stayed inside their bands;
        docs/cluster.md). On the native profile (no shaping) the VM's state sets both, so
        neither is asserted."""
        if not self.current_partition.extras.get('rate_mbit'):
            return []
        names = [f'time_over_{b}' for b in self.baseline_list() if b == 'tcp_poll']
        bucket = self.current_partition.extras.get('bucket_bytes') or 0
        return names + (self.per_size_names(bucket) if names else [])

    @run_before('performance', always_last=True)
    def raw_tcp_held(self):
        """time_over_tcp_poll below 1 is reported, not judged (drop_judgement): MPI cannot beat
        the socket path it runs on, so the raw-TCP baseline ran slow (docs/verification.md,
        "2026-11-28 (afternoon): the test command green from nothing, ...")."""
        names = self.perf_variable_names()
        if 'time_over_tcp_poll' in names:      # asserted: a shaped link
            why = why_below_its_layer(sn.evaluate(self._geomean('time_over_tcp_poll')),
                                      'busy-poll raw TCP over the same link')
            if why:
                self.drop_judgement('time_over_tcp_poll', why)
            for name in [n for n in names if '@' in n]:      # each size on its own
                why = why_below_its_layer(sn.evaluate(self._at_size('time_over_tcp_poll',
                                                                    per_size_of(name))),
                                          'busy-poll raw TCP over the same link')
                if why:
                    self.drop_judgement(name, why)

    @run_after('setup')
    def place_ranks(self):
        """Both ranks on one node, or one per node on a partition of several; the raw layers
        the partition names."""
        self.spread_over_nodes()
        self.baselines = self.run_baselines()

    def run_baselines(self):
        """--baselines as the run passes it: the test's, else the partition's extras
        'p2p_baselines', else shm,memcpy (also before place_ranks has set it)."""
        return self.baselines or self.current_partition.extras.get('p2p_baselines',
                                                                   'shm,memcpy')

    def baseline_list(self):
        """The raw layers, as apps/p2p reads --baselines ('both' and 'none' included)."""
        layers = self.run_baselines()
        return {'both': ['shm', 'memcpy'], 'none': []}.get(layers, layers.split(','))

    @run_before('performance')
    def ratio_per_baseline(self):
        """A time_over_<layer> ratio for each raw layer measured, and only those."""
        wanted = {f'time_over_{layer}' for layer in self.baseline_list()}
        per_size = [n for n in self.perf_variable_names() if '@' in n]
        for name in [n for n in self.perf_variables if n.startswith('time_over_')]:
            if name not in wanted and name not in per_size:
                del self.perf_variables[name]
        for name in sorted(wanted - set(self.perf_variables)):
            self.perf_variables[name] = sn.make_performance_function(self._geomean(name),
                                                                     'ratio')
        for name in per_size:
            self.perf_variables[name] = sn.make_performance_function(
                self._at_size('time_over_tcp_poll', per_size_of(name)), 'ratio')

    @run_before('run')
    def set_command(self):
        self.executable = self.build.executable_path
        self.executable_opts = ['--pair', self.pair, '--variant', self.variant,
                                '--sizes', self.size_range, '--samples', str(self.samples),
                                '--min-time-ms', str(self.min_time_ms), '--cache', self.cache,
                                '--stack', self.stack_name, '--baselines', self.baselines]
        if stack_of(self)[1].self_bind:
            self.executable_opts += ['--bind-self']
        # a site's nodes' network (make site), where raw TCP may go besides 198.18.0.0/15
        if self.current_partition.extras.get('tcp_networks'):
            self.executable_opts += ['--tcp-networks',
                                     ','.join(self.current_partition.extras['tcp_networks'])]
        if self.corrupt_at:
            self.executable_opts += ['--corrupt-at', str(self.corrupt_at)]

    def _out_path(self):
        return os.path.join(self.stagedir, self.stdout.evaluate())

    @sn.deferrable
    def _checked(self):
        """Every size of every transport measured and payload-checked; each rank on a core
        of its own, bound to it (one allowed CPU) and still there at the end."""
        rows = records(self._out_path(), 'P2P')
        want = SCHEDULES[self.size_range]
        for transport in ['mpi'] + self.baseline_list():
            got = sorted(r['size_bytes'] for r in rows if r['transport'] == transport)
            if got != want:
                return f'{transport}: sizes measured {got[:5]}... differ from the schedule'
        # memcpy has one receiver, the process itself
        problem = payload_problem(rows, self.samples,
                                  per_sample=lambda r: 1 if r['transport'] == 'memcpy' else 2) \
            or self._within_link_rate(rows) or physical_bound_problem(rows)
        if problem:
            return problem
        # The rule su3_rmd and HPL are judged by: distinct CPUs, each rank allowed its own
        # alone, none moved, self-bound ranks on the CPU asked for.
        return binding.launch_placement_problem(self._out_path(), stack_of(self)[1].self_bind,
                                                one_per_node=self.num_tasks_per_node == 1) \
            or True

    #: a shaped link carries at most its rate; 2% for the clock
    LINK_RATE_TOLERANCE = 0.02
    #: ... judged for messages of more than this many token buckets: a message can take a full
    #: bucket from an idle link at once (the bucket does not serialise a packet at the link
    #: rate as a wire does), so its least time is (size - bucket) / rate
    LINK_RATE_MIN_BUCKETS = 2

    def _within_link_rate(self, rows):
        """On a shaped link (partition extras 'rate_mbit', 'bucket_bytes'), no transport between
        the two nodes may move a large message faster than the link rate allows, a full
        bucket borrowed: if one does, the shaping is not in force and every figure of the run
        is of another network."""
        extras = self.current_partition.extras
        rate, bucket = extras.get('rate_mbit'), extras.get('bucket_bytes')
        if not rate or not bucket or self.num_tasks_per_node != 1:
            return None
        for r in rows:
            size = r['size_bytes']
            if r['transport'] == 'memcpy' or size <= self.LINK_RATE_MIN_BUCKETS * bucket:
                continue
            cap = rate / 8 * size / (size - bucket) * (1 + self.LINK_RATE_TOLERANCE)   # MB/s
            if r['bandwidth_MBps'] > cap:
                return (f"{r['transport']} at {size} bytes: {r['bandwidth_MBps']:.1f} MB/s, "
                        f"above the {rate} Mbit/s link ({cap:.1f} MB/s with a bucket of "
                        f"{bucket} bytes and {self.LINK_RATE_TOLERANCE:.0%}): is the link "
                        f"profile in force?")
        return None

    @run_after('sanity')
    def keep_tables(self):
        """Library version for the report; every size's statistics as a CSV beside the log;
        every MPI sample in the report (figure_samples) for a compare between runs."""
        run = records(self._out_path(), 'P2P-RUN')[0]
        rows = records(self._out_path(), 'P2P')
        self.library_version = run.get('library_version', 'unknown')
        cols = ['transport', 'size_bytes', 'samples', 'reps_per_sample', 'min_us', 'median_us',
                'mean_us', 'p95_us', 'cv', 'bandwidth_MBps'] + \
            [f'time_over_{b}' for b in self.baseline_list()] + ['checked_messages']
        with open(os.path.join(self.stagedir, 'p2p_sizes.csv'), 'w') as fh:
            fh.write('# ' + json.dumps(run) + '\n' + ','.join(cols) + '\n')
            for r in rows:
                fh.write(','.join(str(r.get(c, '')) for c in cols) + '\n')
        self.keep_files = ['p2p_sizes.csv']
        # float(): %g prints a whole value (104) as a JSON integer
        self.figure_samples = {f"half_round_trip_us@{r['size_bytes']}":
                               [float(v) for v in r['samples_us']]
                               for r in rows if r['transport'] == 'mpi'}
        self.shm_floor_8B_us = shm_floor_8B_us(rows) or 0.0

    @sn.deferrable
    def _at_size(self, field, size):
        """The MPI record's `field` at one message size."""
        vals = [r[field] for r in records(self._out_path(), 'P2P')
                if r['transport'] == 'mpi' and r['size_bytes'] == size]
        if len(vals) != 1 or vals[0] is None or vals[0] <= 0:
            raise ValueError(f'{field} at {size} bytes: not one positive value')
        return vals[0]

    @sn.deferrable
    def _geomean(self, field):
        return geomean_of([r for r in records(self._out_path(), 'P2P')
                           if r['transport'] == 'mpi'], field)

    @performance_function('us')
    def latency(self):
        return self._geomean('median_us')

    @performance_function('MB/s')
    def bandwidth(self):
        return self._geomean('bandwidth_MBps')

    @performance_function('ratio')
    def time_over_shm(self):
        return self._geomean('time_over_shm')

    @performance_function('ratio')
    def time_over_memcpy(self):
        return self._geomean('time_over_memcpy')
