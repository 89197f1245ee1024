"""MPI start-up time on every stack (apps/startup): from launch to the return of MPI_Init on
the slowest rank, to a first message from every rank at rank 0 (the thesis's experiment), and
to the launcher's exit, for np = 2 .. 24. The first (cold) launch is reported apart from the
median of the later (warm) ones; a daemon boot (lamboot) is timed apart, once.

The driver apps/startup/launch_times.py makes the launches itself, with the registry's launcher,
so this test runs it as a plain program (no MPI launcher around it).
"""
import json
import os
import shlex
import sys

import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.builtins import fixture, run_after, run_before, sanity_function, variable

from reframe.core.exceptions import ReframeError
from testbed.checks import APPS, AppBuild, ReferenceLookup, stack_of
from testbed.launch import (apply_knobs, as_job_account, drop_privileges, fallback_launch,
                            job_exit_code, one_task_on_each_node, set_launcher, srun_argv)
from testbed.hangs import HangGuard
from testbed.perf import lookup, set_perf_variables


class StartupBuild(AppBuild):
    app = 'startup'


@rfm.simple_test
class StartupTime(HangGuard, ReferenceLookup, rfm.RunOnlyRegressionTest):
    descr = 'MPI start-up: launch to MPI_Init, to a first message from every rank, to exit'
    np_list = variable(typ.List[int], value=[2, 4, 8, 16, 24])
    #: warm launches per np after the cold one: 9, so that testbed.compare can judge each
    #: figure (init_s@npN, exit_s@npN) in a compare of up to 1200 figures at 95 %
    #: (2 / C(18, 9) = 4e-5; docs/compare.md, "too few samples")
    repeats = variable(int, value=9)
    valid_systems = ['*']
    valid_prog_environs = ['+mpi -no-startup']   # a stack opts out: feature no-startup
    time_limit = '30m'
    reference_file = 'startup.csv'
    reference_case = 'launch'
    build = fixture(StartupBuild, scope='environment')
    library_version = variable(str, value='unknown')
    stack_name = variable(str, value='')
    #: knob values for the launches (the test's over the partition's; the rest take defaults)
    knobs = variable(typ.Dict[str, str], value={})
    tags = {'startup', 'app'}

    #: perf variable -> the start-up summary's field; 'first' (launch to a first message from
    #: every rank at rank 0) is the figure the summary puts beside PVM's spawn (PvmStartup)
    FIGURES = {'init': 'warm_median_init_s', 'first': 'warm_median_first_message_s',
               'exit': 'warm_median_exit_s'}

    def perf_variable_names(self):
        return [f'{what}_np{np}' for np in self.np_list for what in self.FIGURES]

    @run_before('performance')
    def define_perf(self):
        set_perf_variables(self, {
            f'{what}_np{np}': ('s', self._summary(np, field))
            for np in self.np_list for what, field in self.FIGURES.items()})

    @run_before('run')
    def set_command(self):
        reg, stack = stack_of(self)
        self.stack_name = stack.name
        on_slurm = self.current_partition.launcher_type.registered_name == 'srun'
        # the test's own knob values (-S StartupTime.knobs=...) as StackLaunch takes them
        _, knob_opts = apply_knobs(self, reg, stack)
        if on_slurm:
            launcher = shlex.join(self.slurm_launcher(reg, stack, knob_opts))
        else:
            launcher = shlex.join(stack.launch_command('{np}', self.knobs))
        # On a Slurm partition the driver runs as the job account on the first node: the
        # system's Python (the standard library is all it needs), not ReFrame's under /root.
        self.executable = '/usr/bin/python3' if on_slurm else sys.executable
        self.executable_opts = [
            str(APPS / 'startup' / 'launch_times.py'), '--launcher', shlex.quote(launcher),
            '--np', ','.join(map(str, self.np_list)), '--repeats', str(self.repeats),
            '--json', 'startup.json']
        if drop_privileges(reg) and not on_slurm:
            self.executable_opts += ['--run-as', reg.run_as]
        if stack.boot:
            self.executable_opts += ['--boot', shlex.quote(shlex.join(stack.boot)),
                                     '--halt', shlex.quote(shlex.join(stack.halt))]
        self.executable_opts += ['--', self.build.executable_path]
        self.keep_files = ['startup.json']

    def slurm_launcher(self, reg, stack, knob_opts):
        """On a Slurm partition: the driver runs in the job script on the first of the job's
        nodes (one task per node), and each launch starts np ranks over them, with srun and the
        stack's PMI, or with the fallback (the stack's own launcher through the agent; lamboot
        over the same nodes). More ranks than the nodes' cores: srun --overcommit; such runs
        are start-up figures of an oversubscribed job, like np 4 and more on the local 2 cores."""
        nodes = one_task_on_each_node(self)
        set_launcher(self, [])        # the driver launches: nothing before it
        as_job_account(self, reg)
        if stack.srun_mpi:
            if knob_opts:
                raise ReframeError(f'{reg.path}: stacks.{stack.name}.knobs {self.knobs}: '
                                   f'launcher options {knob_opts} cannot pass through srun')
            return srun_argv(stack, '{np}', nodes, overcommit=True)
        return fallback_launch(self, reg, stack, '{np}')

    def _data(self):
        with open(os.path.join(self.stagedir, 'startup.json')) as fh:
            return json.load(fh)

    def _summary(self, np, field):
        return lookup(lambda: self._data()['summary'], 'np', np, field, 'start-up summary')

    @sanity_function
    def validate(self):
        return sn.all([
            sn.assert_eq(sn.defer(job_exit_code(self)), 0,
                         msg='launch_times.py exited with {0}'),
            sn.assert_eq(sn.count(sn.extractall(r'^STARTUP-LAUNCH \{', self.stdout)),
                         len(self.np_list) * (1 + self.repeats),
                         msg='{0} launches recorded, expected {1}'),
            sn.assert_eq(self._ordered(), True, msg='{0}'),
        ])

    @sn.deferrable
    def _ordered(self):
        for rec in self._data()['launches']:
            if not rec['init_s_min'] <= rec['init_s'] <= rec['first_message_s'] <= rec['exit_s']:
                return f'times out of order in launch {rec}'
        return True

    @run_after('sanity')
    def note_version(self):
        self.library_version = self._data()['launches'][0]['library_version']
        samples = {}
        for rec in self._data()['launches']:
            if rec['launch'] == 'warm':
                for what in ('init', 'first_message', 'exit'):
                    samples.setdefault(f"{what}_s@np{rec['np']}", []).append(
                        float(rec[f'{what}_s']))
        self.figure_samples = samples
