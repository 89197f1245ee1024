"""The MILC su3_rmd proxy (apps/su3_rmd) on every stack: pure-gauge refreshed molecular dynamics
with the Wilson plaquette action, Ssend and Isend neighbour gathers, 2 and 4 ranks.

Sanity is physics: a cold start measures plaquette 3.0 exactly, every link stays unitary to
1e-10, at beta 6 the plaquette falls from 3.0; and the same seed gives the same plaquettes on
1, 2 and 4 ranks (Su3RankInvariance). Perf: seconds per trajectory, Gflop/s, and the share of
wall time spent inside MPI calls (the thesis's Table 8).
"""
import json
import os
import shlex
import sys

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import (fixture, parameter, performance_function, run_after,
                                   run_before, sanity_function, variable)

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..'))
from testbed.checks import (AppBuild, ReferenceLookup, StackLaunch, drop_privileges,  # noqa
                            records, stack_of)

UNITARITY = 1e-10


class Su3Build(AppBuild):
    app = 'su3_rmd'


def su3_options(test):
    opts = ['--preset', str(test.preset), '--comm', test.comm, '--seed', str(test.seed)]
    if test.trajectories:
        opts += ['--trajectories', str(test.trajectories)]
    return opts


class Su3Base(StackLaunch, ReferenceLookup, rfm.RunOnlyRegressionTest):
    preset = variable(int, value=1)
    #: override the preset's trajectory count (the README's quick pass lowers it)
    trajectories = variable(int, value=0)
    seed = variable(int, value=2002)
    valid_systems = ['*']
    valid_prog_environs = ['+mpi']
    time_limit = '20m'
    reference_file = 'su3_rmd.csv'
    build = fixture(Su3Build, scope='environment')

    def trajs(self, name=None):
        return records(os.path.join(self.stagedir, name or self.stdout.evaluate()), 'SU3-TRAJ')


@rfm.simple_test
class Su3Run(Su3Base):
    descr = 'su3_rmd proxy: preset lattice, one send mode, 2 or 4 ranks'
    ranks = parameter([2, 4])
    comm = parameter(['ssend', 'isend'])
    #: test-only: corrupt one link after trajectory 1, so the unitarity check must fail
    corrupt_link = variable(bool, value=False)
    tags = {'su3', 'app'}

    @run_after('init')
    def set_case(self):
        self.num_tasks = self.ranks
        self.reference_case = f'preset{self.preset}/{self.comm}/np{self.ranks}'

    @run_before('run')
    def set_command(self):
        self.executable = self.build.executable_path
        self.executable_opts = su3_options(self) + (['--corrupt-link'] if self.corrupt_link
                                                    else [])

    @sanity_function
    def validate(self):
        return sn.all([
            sn.assert_eq(self.job.exitcode, 0, msg='su3_rmd exited with {0}'),
            sn.assert_not_found(r'unitarity check failed', self.stderr,
                                msg='a link left SU(3): unitarity check failed'),
            sn.assert_found(r'^SU3-END \{', self.stdout, msg='no SU3-END record: run cut short'),
            sn.assert_eq(self._physics(), True, msg='{0}'),
        ])

    @sn.deferrable
    def _physics(self):
        trajs = self.trajs()
        plaq = [t['plaquette'] for t in trajs]
        if not trajs or trajs[0]['traj'] != 0 or plaq[0] != 3.0:
            return f'cold start plaquette is {plaq[:1]}, expected exactly 3.0'
        worst = max(t['max_unitarity_dev'] for t in trajs)
        if worst > UNITARITY:
            return f'unitarity deviation {worst:g} > {UNITARITY:g}'
        if len(plaq) < 3 or not all(p < 3.0 for p in plaq[1:]) or not plaq[-1] < plaq[1]:
            return f'at beta 6 the plaquette should fall from 3.0; measured {plaq[:6]}...'
        return True

    @run_after('sanity')
    def note_version(self):
        run = records(os.path.join(self.stagedir, self.stdout.evaluate()), 'SU3-RUN')[0]
        self.library_version = run.get('library_version', 'unknown')

    def _end(self, field):
        return sn.extractsingle(r'^SU3-END (\{.*\})$', self.stdout, 1,
                                lambda s: json.loads(s)[field])

    @performance_function('s')
    def s_per_traj(self):
        return self._end('s_per_traj')

    @performance_function('Gflop/s')
    def gflops(self):
        return self._end('gflops')

    @performance_function('fraction')
    def comm_share(self):
        return self._end('comm_share')


@rfm.simple_test
class Su3RankInvariance(Su3Base):
    """Same seed on 1, 2 and 4 ranks: plaquettes agree to 1e-10 relative (per-site RNG)."""
    descr = 'su3_rmd: results do not depend on the number of ranks'
    comm = variable(str, value='isend')
    trajectories = 3
    num_tasks = 4
    tags = {'su3', 'app'}

    @run_before('run')
    def set_commands(self):
        reg, stack = stack_of(self)
        self.executable = self.build.executable_path
        self.executable_opts = su3_options(self)
        # The 1- and 2-rank runs go first, in the same job (after any daemon boot).
        run = drop_privileges(reg)
        for n in (1, 2):
            argv = run + stack.launch_command(n, self.knobs) + \
                [self.executable, *self.executable_opts]
            self.prerun_cmds.append(f'{shlex.join(argv)} > np{n}.out 2> np{n}.err')
        self.reference_case = 'invariance'

    @sanity_function
    def validate(self):
        return sn.all([
            sn.assert_eq(self.job.exitcode, 0, msg='su3_rmd on 4 ranks exited with {0}'),
            sn.assert_eq(self._same(), True, msg='{0}'),
        ])

    @sn.deferrable
    def _same(self):
        runs = {n: [t['plaquette'] for t in self.trajs(name)]
                for n, name in ((1, 'np1.out'), (2, 'np2.out'), (4, self.stdout.evaluate()))}
        if any(len(p) != self.trajectories + 1 for p in runs.values()):
            return f'plaquette counts differ from {self.trajectories + 1}: ' + \
                str({n: len(p) for n, p in runs.items()})
        for n in (2, 4):
            for a, b in zip(runs[1], runs[n]):
                if abs(a - b) > 1e-10 * abs(a):
                    return f'plaquette {b!r} on {n} ranks differs from {a!r} on 1 rank'
        return True

    def perf_variable_names(self):
        return []
