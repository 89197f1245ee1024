"""PVM 3.4.6 through the p2p timing core (apps/p2p, built as p2p-pvm): the matrix of PVM's calls.

One run per (route, size range): rank 0 is started as a plain process in a job that has booted
its own pvmd as the job account (site/stacks.toml: apps/pvm/pvmd-job boot, halted on exit), and
spawns rank 1 with pvm_spawn. In that run the driver measures every case of
{pvm_send with PvmDataDefault, PvmDataRaw, PvmDataInPlace; pvm_psend} x {pvm_recv, pvm_nrecv
polled, pvm_trecv}, each interleaved sample by sample with raw TCP over loopback (the layer PVM
runs on), with the size schedule, sampling, payload check and records of the MPI matrix. The
route is a task-wide PVM option set before the first message, hence one run per route.

Perf variables per case: the median half round trip at the smallest size (us) and the bandwidth
at the largest (MB/s = 10^6 bytes/s), reported; `latency` and `bandwidth`, the median of those
over the run's cases, as P2PStack takes the median over the MPI modes; and the pvmd boot time
(s), timed apart from the run. All are absolute: the medians and the boot time are asserted on a
machine with its own references (make references), the per-case figures never: one case
alone moves too far between clean passes (docs/verification.md, "Figures the code comments
carried").
"""
import os
import shlex

import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.builtins import (fixture, parameter, run_after, run_before, sanity_function,
                                   variable)

from testbed.checks import APPS, ReferenceLookup, records
from testbed.launch import StackLaunch, one_task_on_each_node
from testbed.perf import set_perf_variables
from testbed.pvm import PvmBuild, PvmMatrixBase, PvmSpawnBuild


@rfm.simple_test
class PvmMatrix(PvmMatrixBase):
    descr = 'PVM ping-pong: send calls x receive calls x encodings, on one route'
    route = parameter(['daemon', 'direct'])
    size_range = parameter(['quick', 'small', 'medium', 'large', 'netpipe'])
    #: how pvm_send packs the payload: pvm_pkbyte, or pvm_pkdouble (see CASES)
    pack = parameter(['byte', 'double'])
    #: samples per size; the README's quick pass lowers it
    samples = variable(int, value=30)
    min_time_ms = variable(float, value=1.0)
    #: test only: rank 1 kills itself when it sends this size (a task dying mid-run)
    kill_at = variable(int, value=0)
    #: test only: rank 1 corrupts its reply at this size (the payload check must fail)
    corrupt_at = variable(int, value=0)
    valid_systems = ['*']
    valid_prog_environs = ['+pvm']
    # apps/pvm holds pvmd-job, which the registry's boot and halt run from the stage directory
    sourcesdir = str(APPS / 'pvm')
    num_tasks = 2
    num_tasks_per_node = 2
    time_limit = '20m'
    reference_file = 'pvm.csv'
    build = fixture(PvmBuild, scope='environment')
    tags = {'pvm'}

    @sanity_function
    def validate(self):
        return sn.all([
            sn.assert_eq(sn.defer(self.exit_code()), 0,
                         msg='p2p-pvm exited with {0}, expected {1}'),
            sn.assert_found(r'^PVMD-BOOT \{', self.boot_log(),
                            msg='no PVMD-BOOT record: the pvmd was not booted by this job'),
            sn.assert_found(r'^P2P-END \{', self.stdout, msg='no P2P-END record: cut short'),
            sn.assert_eq(self._checked(), True, msg='{0}'),
        ])


@rfm.simple_test
class PvmStartup(StackLaunch, ReferenceLookup, rfm.RunOnlyRegressionTest):
    """PVM's start-up beside the MPI stacks' StartupTime: in the job's pvmd (its boot timed
    apart, pvmd_boot), the time for pvm_spawn to return with N-1 tasks, to a first message
    from each, and to their exit; the first trial (cold) apart from the median of the rest."""
    descr = 'PVM start-up: spawn of N tasks'
    np_list = variable(typ.List[int], value=[2, 4, 8, 16, 24])
    repeats = variable(int, value=5)
    valid_systems = ['*']
    valid_prog_environs = ['+pvm']
    sourcesdir = str(APPS / 'pvm')
    num_tasks = 1
    time_limit = '10m'
    reference_file = 'pvm.csv'
    reference_case = 'spawn'
    build = fixture(PvmSpawnBuild, scope='environment')
    tags = {'pvm', 'startup'}

    def perf_variable_names(self):
        """Looked up: to a first message from every task, and the boot. pvm_spawn's return
        alone (spawn_np*, a few hundred us to a few ms) is reported only: it moves several-fold
        between quick passes of one machine (docs/verification.md, "Figures the code comments
        carried")."""
        return [f'first_np{n}' for n in self.np_list] + ['pvmd_boot']

    @run_before('run')
    def set_command(self):
        one_task_on_each_node(self)     # a cluster: the virtual machine spans the job's nodes
        exe = shlex.quote(self.build.executable_path)
        loop = '; '.join(f'{exe} {n} {self.repeats + 1} || exit $?' for n in self.np_list)
        self.executable = 'sh'
        self.executable_opts = ['-c', shlex.quote(loop)]

    def _rows(self):
        return records(os.path.join(self.stagedir, self.stdout.evaluate()), 'PVM-SPAWN')

    @sanity_function
    def validate(self):
        return sn.all([
            sn.assert_eq(sn.defer(self.exit_code()), 0,
                         msg='pvm-spawn exited with {0}, expected {1}'),
            sn.assert_eq(sn.count(sn.extractall(r'^PVM-SPAWN \{', self.stdout)),
                         len(self.np_list) * (self.repeats + 1),
                         msg='{0} PVM-SPAWN records, expected {1}'),
        ])

    @sn.deferrable
    def _warm(self, n, what):
        vals = sorted(r[f'{what}_s'] for r in self._rows() if r['ntasks'] == n and not r['cold'])
        mid = len(vals) // 2
        return vals[mid] if len(vals) % 2 else (vals[mid - 1] + vals[mid]) / 2

    @run_before('performance')
    def define_perf(self):
        figures = {'pvmd_boot': ('s', PvmMatrix._boot_s(self))}
        for n in self.np_list:
            figures[f'spawn_np{n}'] = ('s', self._warm(n, 'spawn'))
            figures[f'first_np{n}'] = ('s', self._warm(n, 'first'))
        set_perf_variables(self, figures)

    @run_after('sanity')
    def keep_version(self):
        rows = self._rows()
        self.library_version = rows[0]['library_version'] if rows else 'unknown'
