"""MPI one-sided (apps/p2p --transport rma) beside two-sided Send/Recv, on every stack.

One job per (stack, sync): MPI_Put and MPI_Get, each completed by the sync (fence: MPI_Win_fence;
pscw: post/start/complete/wait), each interleaved sample by sample with two-sided Send-Recv in
the same passes (--baselines mpi), so that the ratio of the two compares samples taken side by
side. A test of its own rather than parameters of P2PMatrix: its figures (two ops per job, a
ratio to Send-Recv) are not P2PMatrix's, and P2PStack's median over twelve modes would take it in.

Perf variables, per op (put, get): latency at 8 bytes (us, half round trip), bandwidth at 1 MiB
(MB/s = 10^6 bytes/s), and the ratios to Send-Recv of the same job: one-sided over two-sided
half round trip at 8 bytes, one-sided over two-sided bandwidth at 1 MiB (medians of the
per-sample ratios). Reported, not asserted: no reference has been measured for them yet
(docs/one-sided.md). The payload of every sample is checked by the program; the test asserts
every size of both ops and of Send-Recv was measured and checked.

The passive-target sync (flush, MPI-3) is skipped, with the reason, where it cannot run: LAM 7.1
has MPI-2 one-sided only (no lock_all/flush), which its skip_calls in site/stacks.toml says.
LAM runs fence and pscw.
"""
import os

import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.builtins import (fixture, parameter, run_after, run_before,
                                   sanity_function, variable)

from testbed import binding, samples
from testbed.checks import AppBuild, payload_problem, records, stack_of
from testbed.launch import StackLaunch
from testbed.sizes import SCHEDULES

OPS = ['Put', 'Get']
SMALL, LARGE = 8, 1048576


class RmaBuild(AppBuild):
    app = 'p2p'


@rfm.simple_test
class OneSided(StackLaunch, rfm.RunOnlyRegressionTest):
    descr = 'MPI one-sided Put/Get ping-pong beside two-sided Send-Recv, same job'
    sync = parameter(['fence', 'pscw', 'flush'])
    samples = variable(int, value=30)
    min_time_ms = variable(float, value=1.0)
    #: the summary's case column
    reference_case = variable(str, value='')
    #: every one-sided sample, for testbed.compare (testbed/samples.py names them)
    figure_samples = variable(typ.Dict[str, typ.List[float]], value={})
    valid_systems = ['*']
    valid_prog_environs = ['+mpi -no-p2p']   # the p2p family: a stack opts out with no-p2p
    num_tasks = 2
    num_tasks_per_node = 2
    time_limit = '2m'     # a sync that hangs costs this, not the suite's time
    build = fixture(RmaBuild, scope='environment')
    tags = {'p2p', 'rma'}

    @run_after('init')
    def name_case(self):
        self.reference_case = f'{self.sync}/quick'

    @run_after('setup')
    def place_ranks(self):
        self.spread_over_nodes()
        stack = stack_of(self)[1]
        # the stack's skip_calls in site/stacks.toml (why: docs/one-sided.md)
        why = stack.skip_calls.get('MPI_Win_flush')
        self.skip_if(self.sync == 'flush' and why is not None, f'flush: unsupported: {why}')

    @run_before('run')
    def set_command(self):
        self.executable = self.build.executable_path
        self.executable_opts = ['--transport', 'rma', '--rma-op', 'all', '--rma-sync', self.sync,
                                '--baselines', 'mpi', '--sizes', 'quick',
                                '--samples', str(self.samples),
                                '--min-time-ms', str(self.min_time_ms),
                                '--stack', self.stack_name]
        if stack_of(self)[1].self_bind:
            self.executable_opts += ['--bind-self']

    def _out(self):
        return os.path.join(self.stagedir, self.stdout.evaluate())

    @sanity_function
    def validate(self):
        return sn.all([
            sn.assert_eq(self.exit_status_after('P2P-END'), 0,
                         msg='benchmark exited with {0}, expected {1}'),
            sn.assert_found(r'^P2P-END \{', self.stdout, msg='no P2P-END record: run cut short'),
            sn.assert_not_found(r'^P2P-UNSUPPORTED', self.stdout,
                                msg='the library lacks this sync (see P2P-UNSUPPORTED)'),
            sn.assert_eq(self._checked(), True, msg='{0}'),
        ])

    def _rows(self):
        return records(self._out(), 'P2P')

    @sn.deferrable
    def _checked(self):
        """Every size of Put, Get and their Send-Recv baselines measured and payload-checked
        (at least one message per sample and rank); ranks bound and not moved."""
        rows = self._rows()
        want = SCHEDULES['quick']
        for op in OPS:
            got = sorted(r['size_bytes'] for r in rows
                         if r['transport'] == 'rma' and r['pair'] == op)
            if got != want:
                return f'rma {op}: sizes measured {got} differ from {want}'
        base = sorted(r['size_bytes'] for r in rows if r['transport'] == 'mpi')
        if base != sorted(want * len(OPS)):
            return f'Send-Recv baseline: sizes measured {base}'
        problem = payload_problem(rows, self.samples, lambda r: f"{r['transport']} {r['pair']}")
        if problem:
            return problem
        return binding.launch_placement_problem(self._out(), stack_of(self)[1].self_bind) \
            or True

    @run_after('sanity')
    def keep_version(self):
        self.library_version = records(self._out(), 'P2P-RUN')[0].get('library_version',
                                                                       'unknown')
        self.figure_samples = samples.rma(self._rows())     # for testbed.compare

    def _row(self, transport, op, size):
        """The record of (transport, size) in the measurement of `op`: the Send-Recv baseline
        of the Put measurement is the first mpi record of that size, of Get the second."""
        if transport == 'rma':
            rows = [r for r in self._rows() if r['transport'] == 'rma' and r['pair'] == op]
        else:
            rows = [r for r in self._rows() if r['transport'] == 'mpi'
                    and r['size_bytes'] == size][OPS.index(op):][:1]
        for r in rows:
            if r['size_bytes'] == size:
                return r
        raise ValueError(f'no {transport} {op} record at {size} bytes')

    @run_before('performance')
    def declare_figures(self):
        make = sn.make_performance_function
        for op in OPS:
            k = op.lower()
            self.perf_variables[f'{k}_latency_8B'] = make(
                self._field('rma', op, SMALL, 'median_us'), 'us')
            self.perf_variables[f'{k}_bandwidth_1MiB'] = make(
                self._field('rma', op, LARGE, 'bandwidth_MBps'), 'MB/s')
            self.perf_variables[f'{k}_over_sendrecv_latency_8B'] = make(
                self._field('rma', op, SMALL, 'time_over_mpi'), 'ratio')
            self.perf_variables[f'{k}_over_sendrecv_bandwidth_1MiB'] = make(
                self._inverse('rma', op, LARGE, 'time_over_mpi'), 'ratio')
        self.perf_variables['sendrecv_latency_8B'] = make(
            self._field('mpi', 'Put', SMALL, 'median_us'), 'us')
        self.perf_variables['sendrecv_bandwidth_1MiB'] = make(
            self._field('mpi', 'Put', LARGE, 'bandwidth_MBps'), 'MB/s')

    @sn.deferrable
    def _field(self, transport, op, size, name):
        return self._row(transport, op, size)[name]

    @sn.deferrable
    def _inverse(self, transport, op, size, name):
        """Bandwidth ratio = 1 / time ratio (same size, so size cancels)."""
        return 1.0 / self._row(transport, op, size)[name]

