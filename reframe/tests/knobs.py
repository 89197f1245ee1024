"""KnobReach: a stack's knobs reach every rank, under whatever launcher the partition uses.

Knobs travel as the environment variables their library reads (site/stacks.toml). Here the
library itself says, through the MPI tool interface (apps/knobs, MPI_T control variables),
which value each rank runs with: MPICH's MPIR_CVAR_* under their own names, Open MPI's
OMPI_MCA_<param> as <param>. The test sets a numeric knob (eager_threshold, by default 65432
bytes) on top of the partition's knobs and the defaults, and asserts that every such variable
the library knows holds the set value on every rank, and that at least one of them is known
(Open MPI registers a component's parameters only when it opens the component). LAM 7.1 has no
MPI_T: its knobs are SSI parameters (LAM_MPI_SSI_*), and each rank says at MPI_Init which RPI
module it selected and the parameters it took (testbed/lam_ssi.py); the test asserts those. A
stack none of whose knob variables can be read back (UCX_* and I_MPI_* are read outside MPI_T;
MPICH's string-valued MPIR_CVAR_* read back empty) is skipped with that reason: it is not
counted as passed.
"""
import os

import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.builtins import fixture, run_after, run_before, sanity_function, variable

from testbed import lam_ssi
from testbed.checks import AppBuild, records, stack_of
from testbed.launch import StackLaunch, apply_knobs


class KnobsBuild(AppBuild):
    app = 'knobs'


def mpi_t_name(env_name, value):
    """The MPI_T control variable a library reads the environment variable as, or None.
    MPICH's string-valued ones are not checked: MPICH 4.0.2 and 5.0.2 read back '' for
    MPIR_CVAR_CH4_NETMOD set to 'ofi' (MPI_T_cvar_read returned MPI_SUCCESS, count 384), while
    their integer ones read back as set."""
    if env_name.startswith('MPIR_CVAR_'):
        return env_name if value.lstrip('-').isdigit() else None
    if env_name.startswith('OMPI_MCA_'):
        return env_name[len('OMPI_MCA_'):]
    return None


@rfm.simple_test
class KnobReach(StackLaunch, rfm.RunOnlyRegressionTest):
    descr = 'Every rank runs with the knob values set for it (the library reports them)'
    valid_systems = ['*']
    valid_prog_environs = ['+mpi -no-knobs']   # a stack opts out: feature no-knobs
    num_tasks = 2
    time_limit = '5m'
    build = fixture(KnobsBuild, scope='environment')
    #: knob values set on top of the partition's and the defaults
    probe = variable(typ.Dict[str, str], value={'eager_threshold': '65432'})
    #: MPI_T name -> the value set (from the knobs' environment variables)
    expected = variable(typ.Dict[str, str], value={})
    #: ... LAM's name -> the value set, for LAM's SSI parameters (testbed/lam_ssi.py)
    lam_expected = variable(typ.Dict[str, str], value={})
    tags = {'knobs'}

    @run_after('setup')
    def set_knobs(self):
        self.spread_over_nodes()
        stack = stack_of(self)[1]
        self.knobs = {**{k: v for k, v in self.probe.items() if k in stack.knobs},
                      **self.knobs}

    @run_before('run')
    def set_command(self):
        # the knobs as the launch applies them (the same whichever hook runs first)
        env, _ = apply_knobs(self, *stack_of(self))
        names = {k: mpi_t_name(k, v) for k, v in env.items()}
        self.expected = {names[k]: v for k, v in env.items() if names[k]}
        self.lam_expected = lam_ssi.expected(env)
        if self.lam_expected:
            self.env_vars.update(lam_ssi.VERBOSE)
        self.skip_if(not self.expected and not self.lam_expected,
                     f'{stack_of(self)[1].name}: none of its knob variables '
                     f'({", ".join(sorted(env)) or "none"}) can be read back (an MPI_T '
                     f'control variable or a LAM SSI parameter)')
        self.executable = self.build.executable_path
        self.executable_opts = sorted(self.expected)

    @sanity_function
    def validate(self):
        return sn.all([
            sn.assert_eq(self._exit_status(), 0, msg='knobs exited with {0}'),
            sn.assert_eq(self._reached(), True, msg='{0}'),
        ])

    @sn.deferrable
    def _exit_status(self):
        """0 also for a finalize that hung after every rank's KNOB records were out
        (StackLaunch.exit_status records it as a library defect)."""
        rows = records(os.path.join(self.stagedir, self.stdout.evaluate()), 'KNOB')
        return self.exit_status({r['rank'] for r in rows} == set(range(self.num_tasks)))

    @sn.deferrable
    def _reached(self):
        if self.lam_expected:      # LAM prints what it runs with; stdout or stderr alike
            text = ''
            for f in (self.stdout, self.stderr):
                with open(os.path.join(self.stagedir, f.evaluate()), errors='replace') as fh:
                    text += fh.read()
            return lam_ssi.reach_problem(text, self.lam_expected, self.num_tasks) or True
        rows = records(os.path.join(self.stagedir, self.stdout.evaluate()), 'KNOB')
        for rank in range(self.num_tasks):
            mine = {r['name']: r for r in rows if r['rank'] == rank}
            found = [n for n in self.expected if mine.get(n, {}).get('found')]
            if not found:
                return (f'rank {rank}: the library knows none of {sorted(self.expected)}: '
                        f'cannot tell whether the knobs {self.knobs} reached it')
            for name in found:
                if mine[name]['value'] != self.expected[name]:
                    return (f"rank {rank}: {name} = {mine[name]['value']!r}, set to "
                            f"{self.expected[name]!r} (knobs {self.knobs}): the setting did not "
                            f'reach the rank')
        return True
