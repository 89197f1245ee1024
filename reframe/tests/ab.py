"""Interleaved A/B (make ab, docs/ab.md): stack or build A and stack or build B in one job,
launch by launch in ABBA order, each launch the whole quick point-to-point matrix (every
send/receive mode at 8 B, 1 KiB, 64 KiB and 1 MiB); testbed/ab.py decides on the paired
differences.

The sides come from ReFrame's environment, since B's build is a fixture of its own stack:
TESTBED_AB_A and TESTBED_AB_B (registry names; B defaults to A: an A/A run), and
`-S AbP2P.inject_b=` slows B's launches only with the test-only shim (apps/slowdown): a factor
('1.05'), a fixed wait ('+20ns') or extra copies of every send buffer ('copy:1'). Without
TESTBED_AB_A the test is not defined (the quick and full passes never run it).
"""
import json
import os
import shlex

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import fixture, run_after, run_before, sanity_function, variable
from reframe.core.exceptions import ReframeError

from testbed import ab, registry
from testbed.checks import records, slowdown_shim
from testbed.launch import StackLaunch, drop_privileges, extra_launch
from testbed.p2p import MODES, P2PBuild
from testbed.perf import set_perf_variables

SIZES = (8, 1024, 65536, 1048576)
STACK_A = os.environ.get('TESTBED_AB_A', '')
STACK_B = os.environ.get('TESTBED_AB_B', '') or STACK_A


def _environ(name):
    try:
        return registry.load().select([name], 'TESTBED_AB_A/B')[0].environ
    except registry.RegistryError as err:
        raise ReframeError(str(err)) from None


class AbBuildB(P2PBuild):
    """B's build, when B is another stack than A: a test of its own in B's environment, which
    AbP2P depends on (ReFrame's build fixtures run in the test's own environment only)."""
    valid_prog_environs = [_environ(STACK_B)] if STACK_B else []
    app = 'p2p'


class AbP2P(StackLaunch, rfm.RunOnlyRegressionTest):
    descr = 'A and B interleaved launch by launch (ABBA), the quick p2p matrix each'
    valid_systems = ['testbed-local']
    valid_prog_environs = [_environ(STACK_A)] if STACK_A else []
    num_tasks = 2
    num_tasks_per_node = 2
    time_limit = '20m'
    build = fixture(P2PBuild, scope='environment')
    tags = {'ab'}
    stack_a = variable(str, value=STACK_A)
    stack_b = variable(str, value=STACK_B)
    #: rounds of one A and one B launch; even, so that ABBA blocks close (the last launch,
    #: the job's own, is then A's)
    rounds = variable(int, value=24)
    samples = variable(int, value=3)
    baselines = variable(str, value='none')
    #: test-only: B's launches slowed by the shim ('' none; '1.05'; '+20ns'; 'copy:N', N > 0)
    inject_b = variable(str, value='')
    #: every launch's figures, kept in the report for testbed.ab: JSON {"a": [launch, ...],
    #: "b": [...]} in round order, a launch a list of [pair, variant, size, us]
    ab_rounds = variable(str, value='')

    @run_after('init')
    def depend_on_b(self):
        if self.stack_b != self.stack_a:
            env_b = _environ(self.stack_b)
            self.depends_on('AbBuildB', how=lambda src, dst: dst[1] == env_b)

    @run_after('init')
    def check_rounds(self):
        if self.rounds < 2 or self.rounds % 2:
            raise ReframeError(f'AbP2P.rounds={self.rounds}: expected an even number >= 2 '
                               '(ABBA blocks)')

    def options(self):
        return ['--pair', 'all', '--variant', 'all', '--sizes', 'quick', '--samples',
                str(self.samples), '--baselines', self.baselines]

    def b_words(self, reg):
        """B's launch before its program: the job account, B's environment over A's (A's
        variables that B does not set are unset), the shim where B is slowed, B's launcher."""
        a, b = reg.stacks[self.stack_a], reg.stacks[self.stack_b]
        env_b = b.environment
        env = [f'{k}={v}' for k, v in env_b.items()]
        unset = [w for k in a.environment if k not in env_b for w in ('-u', k)]
        return drop_privileges(reg) + ['env', *unset, *env, *self.injection()] + \
            b.launch_command(2)

    def injection(self):
        """The shim's variables for B's launches (inject_b), [] when B is not slowed."""
        value = self.inject_b
        if not value:
            return []
        lib = slowdown_shim(f'AbP2P.inject_b={value!r}')
        if value.startswith('copy:'):
            setting = f'TESTBED_SLOWDOWN_COPY={value[5:]}'
        else:
            setting = f'TESTBED_SLOWDOWN={value}'
        return [f'LD_PRELOAD={lib}', setting]

    @run_before('run')
    def interleave(self):
        reg = registry.load()
        for name in (self.stack_a, self.stack_b):
            if name not in reg.stacks:
                raise ReframeError(f'TESTBED_AB_A/B: unknown stack {name!r}')
        self.executable = self.build.executable_path
        self.executable_opts = self.options()
        exe_b = self.getdep('AbBuildB', environ=_environ(self.stack_b)).executable_path \
            if self.stack_b != self.stack_a else self.executable
        line_a = ' '.join(map(shlex.quote, extra_launch(self, 2) +
                              [self.executable, *self.executable_opts]))
        line_b = ' '.join(map(shlex.quote, self.b_words(reg) + [exe_b, *self.options()]))
        for side, r in ab.order(self.rounds)[:-1]:
            line = line_a if side == 'a' else line_b
            self.prerun_cmds.append(f'{line} > {side}_{r}.out 2> {side}_{r}.err')

    def launch_outputs(self, side):
        names = [f'{side}_{r}.out' for r in range(1, self.rounds + 1)]
        if side == 'a':
            names[-1] = self.stdout.evaluate()       # the job's own launch
        return [os.path.join(self.stagedir, n) for n in names]

    @sn.deferrable
    def _complete(self):
        """Why a launch fell short (no P2P-END, a mode or size missing, B not slowed as
        asked), or True."""
        want = {(p, v, s) for p, v in MODES for s in SIZES}
        for side in ('a', 'b'):
            for path in self.launch_outputs(side):
                name = os.path.basename(path)
                if not os.path.exists(path) or not records(path, 'P2P-END'):
                    return f'{name}: no P2P-END record (see its .err)'
                missing = want - set(ab.launch_figures(records(path, 'P2P')))
                if missing:
                    return f'{name}: {len(missing)} figures missing, e.g. {sorted(missing)[0]}'
        if self.inject_b:
            for r in range(1, self.rounds + 1):
                err = os.path.join(self.stagedir, f'b_{r}.err')
                with open(err, errors='replace') as fh:
                    if sum(line.startswith('slowdown: active') for line in fh) < 2:
                        return f'b_{r}.err: the shim is not active in both ranks of B'
        return True

    @sanity_function
    def validate(self):
        return sn.all([sn.assert_eq(self._complete(), True, msg='{0}'),
                       sn.assert_eq(self.exit_status_after('P2P-END'), 0,
                                    msg='the last launch (A) exited with {0}')])

    def side_figures(self, side):
        return [ab.launch_figures(records(p, 'P2P')) for p in self.launch_outputs(side)]

    @sn.deferrable
    def family_ratio(self, family):
        a, b = self.side_figures('a'), self.side_figures('b')
        self.ab_rounds = json.dumps({s: [[[*k, us] for k, us in sorted(f.items())]
                                         for f in figs] for s, figs in (('a', a), ('b', b))})
        return ab.decide(a, b)['families'][family]['ratio']

    @run_before('performance')
    def define_perf(self):
        set_perf_variables(self, {f'ab_ratio_{f}': ('ratio', self.family_ratio(f))
                                  for f in ab.FAMILIES})


if STACK_A:
    rfm.simple_test(AbP2P)
if STACK_A and STACK_B != STACK_A:
    rfm.simple_test(AbBuildB)
