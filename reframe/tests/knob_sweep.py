"""Knob sweeps on one host: a knob of the registry set to a few values, each value a case.

KnobSweep: one point of a sweep (the parameter: stack, knob values, sizes), on that point's
stack only. In one job, with the knobs set as every test sets them (the library's own
variables, site/stacks.toml), apps/p2p measures Send-Recv (the shared-memory floor interleaved)
and then Ssend-Recv over sizes either side of every value of the sweep. The sweeps
(testbed/knob_sweep.py): the eager threshold of each MPI stack, LAM's RPIs (usysv, sysv, tcp,
lamd) and LAM's rpi_tcp_short from 64 KB to 2 MB on rpi tcp.

Figures per point: send_latency and ssend_latency (us, geometric mean over the sizes of the
median half round trip), time_over_shm (Send-Recv over the floor, per sample), looked up as
this machine's own rows in references/knob_sweep.csv (the case column holds the knob values);
step_bytes, the first size after Send's time rose faster than its size (the rendezvous
side: a handshake paid at once), step_jump, that rise beyond the size's, and Ssend over Send
just below the step and at it, reported where the run shows a step. Asserted: every size of both pairs measured and payload-checked, each rank bound to a core
of its own, no time below a physical bound.

KnobSweepTrend: one sweep of one stack; asserts that the step follows the knob: every point
shows one where its Send curve departs most from the sweep's other points (a step the knob does
not move is in all of them; each point alone when the points ran in different states of the
machine: testbed.knob_sweep.trend_steps), and a larger value puts it at a larger size (resolved
to the sizes measured). On a stack
whose knob does not reach the one-host path (NOT_CONTROLLED, with the reason) it is skipped,
saying why; the points are still reported.
"""
import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
import reframe.utility.udeps as udeps
from reframe.core.builtins import fixture, parameter, run_after, sanity_function, variable

from testbed.checks import stack_of
from testbed.knob_sweep import (NOT_CONTROLLED, KnobSweepBase, KnobSweepBuild, environ_of,
                                points, trend_problem, trend_steps, trends)


@rfm.simple_test
class KnobSweep(KnobSweepBase):
    descr = 'Send-Recv and Ssend-Recv at one knob value, sizes either side of the thresholds'
    point = parameter(points(), fmt=lambda p: p.label)
    #: samples per size. The short variant (the studies' pass): -S KnobSweep.samples=5
    #: -S KnobSweep.min_time_ms=0.5 -S KnobSweep.assert_performance=false (the rows were made
    #: with the full sampling: its figures are reported, its steps and directions asserted)
    samples = variable(int, value=15)
    #: a sample lasts at least this long (ms)
    min_time_ms = variable(float, value=1.0)
    #: test-only: with TESTBED_INJECT_SLOWDOWN, slow only this point (its label, stack/knobs)
    slowdown_at = variable(str, value='')
    valid_systems = ['testbed-local']
    valid_prog_environs = ['+mpi']        # narrowed to the point's stack (name_point)
    num_tasks = 2
    num_tasks_per_node = 2
    time_limit = '10m'
    reference_file = 'knob_sweep.csv'
    build = fixture(KnobSweepBuild, scope='environment')
    tags = {'knobs', 'knob_sweep'}

    @sanity_function
    def validate(self):
        return sn.all([
            sn.assert_eq(self.exit_status_after('P2P-END'), 0,
                         msg='Send-Recv run exited with {0}, expected {1}'),
            sn.assert_eq(self._ssend_exit(), 0, msg='Ssend-Recv run exited with {0}, expected {1}'),
            sn.assert_eq(self._checked(), True, msg='{0}'),
        ])


@rfm.simple_test
class KnobSweepTrend(rfm.RunOnlyRegressionTest):
    """The step of one sweep follows its knob (from the KnobSweep cases of the sweep)."""
    descr = 'The Send-Ssend step moves with the knob, within the size resolution'
    sweep = parameter(trends(), fmt=lambda t: f'{t[0]}/{t[1]}')
    valid_systems = ['testbed-local']
    valid_prog_environs = ['+mpi']
    executable = 'true'           # nothing to run: the figures come from the dependencies
    num_tasks = 1
    #: the sweep's points: knob value -> the step's first size in bytes, or 'none', for the report
    steps = variable(typ.Dict[str, str], value={})
    #: how the steps were read: against each other, or each point alone when the points ran in
    #: different states of the machine (testbed.knob_sweep.trend_steps)
    read_as = variable(str, value='')
    tags = {'knobs', 'knob_sweep'}

    @run_after('init')
    def depend_on_points(self):
        stack, sweep = self.sweep
        self.valid_prog_environs = [environ_of(stack)]
        nums = KnobSweep.get_variant_nums(point=lambda p: (p.stack, p.sweep) == self.sweep)
        self.cases = [KnobSweep.variant_name(n) for n in nums]
        for name in self.cases:
            self.depends_on(name, udeps.by_env)

    @run_after('setup')
    def controlled_here(self):
        stack = stack_of(self)[1].name
        self.skip_if(stack in NOT_CONTROLLED,
                     f'{stack}: the registry\'s eager_threshold does not move the step on one '
                     f'host: {NOT_CONTROLLED.get(stack)}')

    def _found(self):
        deps = {int(dep.point.swept_value): dep for dep in map(self.getdep, self.cases)}
        steps, self.read_as = trend_steps({v: dep.send_curve() for v, dep in deps.items()},
                                          {v: dep.floor_us() for v, dep in deps.items()})
        return sorted(steps.items())

    @sanity_function
    def validate(self):
        found = self._found()
        self.steps = {str(v): str(s or 'none') for v, s in found}
        problem = trend_problem(found)
        return sn.assert_eq(f'{problem} (steps read {self.read_as})' if problem else True, True,
                            msg='{0}')
