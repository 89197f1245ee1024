"""PVM's tests' mechanics (reframe/tests/pvm_matrix.py says what is measured and asserted): the
cases one run of p2p-pvm measures, its builds, its command line, the checks of its records, the
study's directions (InPlace no slower than Raw, Raw faster than Default with doubles) and the
figures over the run's cases."""
import json
import os
import re

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import run_after, run_before

from testbed import samples
from testbed.binding import launch_placement_problem
from testbed.checks import (AppBuild, ReferenceLookup, compiler_of, payload_problem, records,
                            stack_of)
from testbed.launch import StackLaunch
from testbed.perf import set_perf_variables
from testbed.references import median_over_modes
from testbed.sizes import SCHEDULES

SENDS = [('send', 'default'), ('send', 'raw'), ('send', 'inplace'), ('psend', 'own')]
RECVS = ['recv', 'nrecv', 'trecv']
#: the cases one run measures, per packing: (pair, encoding) as the records name them.
#: Bytes: every call and encoding. Doubles (pvm_pkdouble, which XDR converts): pvm_send and
#: pvm_recv with each encoding, the cases the study's Raw-against-Default finding is about.
CASES = {'byte': [(f'{s}-{r}', e) for s, e in SENDS for r in RECVS],
         'double': [('send-recv', f'{e}-double') for e in ('default', 'raw', 'inplace')]}


class PvmBuild(AppBuild):
    """p2p-pvm, once per PVM stack: the MPI build of apps/p2p is not touched."""
    app = 'p2p'
    valid_prog_environs = ['+pvm']

    def make_options(self, stack):
        # -B: a p2p-pvm copied in with the sources is never taken for a fresh build
        return ['-B', 'p2p-pvm', f'PVM_CC={compiler_of(self, stack)}']

    @property
    def executable_path(self):
        return os.path.join(self.stagedir, 'p2p', 'p2p-pvm')


class PvmMatrixBase(StackLaunch, ReferenceLookup, rfm.RunOnlyRegressionTest):
    """What PvmMatrix runs and computes; its parameters, variables and sanity are the test's."""

    #: time limits per range where 20 minutes is too little: between two nodes through the
    #: daemons the netpipe range with bytes (12 cases to 4 MiB, 30 samples) ran past 20 min
    TIME_LIMITS = {'netpipe': '60m'}

    @run_after('init')
    def name_case(self):
        self.time_limit = self.TIME_LIMITS.get(self.size_range, self.time_limit)
        self.reference_case = f'{self.route}/{self.size_range}' + \
            ('/double' if self.pack == 'double' else '')

    def perf_variable_names(self):
        """Looked up: the medians over the cases and the boot (module docstring)."""
        return ['latency', 'bandwidth', 'pvmd_boot']

    @run_before('run')
    def set_command(self):
        self.spread_over_nodes()     # on a cluster: rank 1 spawned on the other node
        self.executable = self.build.executable_path
        self.executable_opts = ['--pvm-route', self.route, '--sizes', self.size_range,
                                '--samples', str(self.samples), '--min-time-ms',
                                str(self.min_time_ms), '--baselines', 'tcp',
                                '--stack', self.stack_name, '--bind-self']
        if self.current_partition.extras.get('tcp_networks'):     # as P2PMatrix's
            self.executable_opts += ['--tcp-networks',
                                     ','.join(self.current_partition.extras['tcp_networks'])]
        if self.pack == 'double':
            self.executable_opts += ['--pvm-pack', 'double', '--pvm-send', 'send',
                                     '--pvm-recv', 'recv']
        if self.kill_at:
            self.executable_opts += ['--pvm-kill-at', str(self.kill_at)]
        if self.corrupt_at:
            self.executable_opts += ['--corrupt-at', str(self.corrupt_at)]

    def _out(self):
        return os.path.join(self.stagedir, self.stdout.evaluate())

    @sn.deferrable
    def _checked(self):
        """Every case at every size measured and payload-checked, on this route; each rank
        bound to a core of its own."""
        rows = [r for r in records(self._out(), 'P2P') if r['transport'] == 'pvm']
        want = SCHEDULES[self.size_range]
        for pair, enc in CASES[self.pack]:
            variant = f'{self.route}-{enc}'
            got = sorted(r['size_bytes'] for r in rows
                         if r['pair'] == pair and r['variant'] == variant)
            if got != want:
                return f'{pair} {variant}: sizes measured {got[:5]}... differ from the schedule'
        problem = payload_problem(rows, self.samples, lambda r: f"{r['pair']} {r['variant']}") \
            or (self._inplace_not_slower() if self.pack == 'byte' else self._raw_not_faster())
        if problem:
            return problem
        # The rule of every MPI test: distinct CPUs, each task allowed its own alone, none
        # moved, and (p2p-pvm pins itself, --bind-self) each on the CPU asked for.
        return launch_placement_problem(self._out(), self_bind=True,
                                        one_per_node=self.num_tasks_per_node == 1) or True

    #: the study's finding asserted in its direction where it held in every run here
    #: (docs/pvm.md): PvmDataInPlace at least as fast as PvmDataRaw for a 1 MiB message
    DIRECTION_MIN_SIZE = 1048576
    #: ... and judged on minima over at least this many samples (the quick pass takes 15): the
    #: least of two is one draw of a busy machine, not the library's (a behaviour test's run)
    DIRECTION_MIN_SAMPLES = 5

    def _inplace_not_slower(self):
        if self.route == 'daemon' and self.num_tasks_per_node == 1:
            # Between two nodes through the daemons, the copy InPlace saves (about 0.1 ms at
            # 1 MiB) is about 1% of the transfer (7-8 ms here), under the spread between
            # samples (CV 5-11%): reported, not asserted (docs/pvm.md).
            return None
        return self._not_slower('inplace', 'raw', strictly=False)

    def _raw_not_faster(self):
        """The study's third finding: Raw faster than Default (XDR) for large messages. With
        doubles XDR converts every 8 bytes each way; asserted at the largest size, if at least
        1 MiB, on the direct route everywhere and through the daemons of one host (docs/pvm.md
        has the margins measured)."""
        if self.route == 'daemon' and self.num_tasks_per_node == 1:
            # Between two nodes through the daemons, XDR's conversion of 1 MiB is about 3 % of
            # the transfer, under the spread of the minima (docs/pvm.md): reported, not
            # asserted, as InPlace is there.
            return None
        return self._not_slower('raw-double', 'default-double', strictly=True)

    NAMES = {'inplace': 'InPlace', 'raw': 'Raw', 'raw-double': 'Raw',
             'default-double': 'Default (XDR)'}

    def _not_slower(self, fast, slow, strictly):
        """None if encoding `fast` beat `slow` (minimum half round trip of send-recv at the
        range's largest size, when that is at least 1 MiB and the run took enough samples),
        else what the study's finding met instead."""
        size = SCHEDULES[self.size_range][-1]
        if size < self.DIRECTION_MIN_SIZE or self.samples < self.DIRECTION_MIN_SAMPLES:
            return None
        t_fast, t_slow = (self._row('send-recv', e, size)['min_us'] for e in (fast, slow))
        if t_fast < t_slow or (t_fast == t_slow and not strictly):
            return None
        doubles = ', doubles,' if fast.endswith('-double') else ''
        return (f'send-recv {self.route}{doubles} at {size} bytes: {self.NAMES[fast]} '
                f'{t_fast:.1f} us {"not faster than" if strictly else "slower than"} '
                f'{self.NAMES[slow]} {t_slow:.1f} us (minimum half round trip), against the study')

    def _row(self, pair, enc, size):
        for r in records(self._out(), 'P2P'):
            if (r['transport'], r['pair'], r['variant'], r['size_bytes']) == \
                    ('pvm', pair, f'{self.route}-{enc}', size):
                return r
        return None

    @sn.deferrable
    def _figure(self, pair, enc, what):
        sizes = SCHEDULES[self.size_range]
        if what == 'latency':
            return self._row(pair, enc, sizes[0])['median_us']
        return self._row(pair, enc, sizes[-1])['bandwidth_MBps']

    @sn.deferrable
    def _boot_s(self):
        with open(self.boot_log()) as fh:
            found = re.search(r'^PVMD-BOOT (\{.*\})$', fh.read(), re.M)
        return json.loads(found.group(1))['boot_s']

    @sn.deferrable
    def _median_over_cases(self, what):
        # P2PStack's median over the MPI modes, shared: a case without a figure is an error
        return median_over_modes([sn.evaluate(self._figure(pair, enc, what))
                                  for pair, enc in CASES[self.pack]])

    @run_before('performance')
    def define_perf(self):
        figures = {'pvmd_boot': ('s', self._boot_s()),
                   'latency': ('us', self._median_over_cases('latency')),
                   'bandwidth': ('MB/s', self._median_over_cases('bandwidth'))}
        for pair, enc in CASES[self.pack]:
            figures[f'latency_{pair}_{enc}'] = ('us', self._figure(pair, enc, 'latency'))
            figures[f'bandwidth_{pair}_{enc}'] = ('MB/s', self._figure(pair, enc, 'bandwidth'))
        set_perf_variables(self, figures)

    @run_after('sanity')
    def keep_tables(self):
        """Library version for the report; every size's statistics as a CSV beside the log;
        every sample in the report (figure_samples) for testbed.compare."""
        run = records(self._out(), 'P2P-RUN')[0]
        self.library_version = run.get('library_version', 'unknown')
        cols = ['transport', 'pair', 'variant', 'size_bytes', 'samples', 'reps_per_sample',
                'min_us', 'median_us', 'mean_us', 'p95_us', 'cv', 'bandwidth_MBps',
                'time_over_tcp', 'checked_messages']
        self.keep_files = ['pvm_sizes.csv']     # read by site/cluster/profile_check.py
        with open(os.path.join(self.stagedir, 'pvm_sizes.csv'), 'w') as fh:
            fh.write('# ' + json.dumps(run) + '\n' + ','.join(cols) + '\n')
            for r in records(self._out(), 'P2P'):
                fh.write(','.join(str(r.get(c, '')) for c in cols) + '\n')
        self.figure_samples = samples.pvm(records(self._out(), 'P2P'), self.route)


class PvmSpawnBuild(PvmBuild):
    """apps/pvm's pvm-spawn, once per PVM stack."""

    @run_before('compile')
    def configure_build(self):
        super().configure_build()
        self.sourcepath = 'pvm'
        self.build_system.options = ['-B', 'pvm-spawn',
                                     f'PVM_CC={stack_of(self)[1].compiler}']

    @property
    def executable_path(self):
        return os.path.join(self.stagedir, 'pvm', 'pvm-spawn')
