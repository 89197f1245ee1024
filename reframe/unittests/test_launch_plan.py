"""The launch plan (testbed/launch.py) as ReFrame writes it into job scripts, without running a
job (--dry-run): the stack's own line through the testbed's launcher, and knobs a user sets
reaching the launches of StartupTime too."""
from test_suite_runs import reframe, workdir  # noqa: F401  (the fixture, by name)


def job_script(workdir, test):
    scripts = [p for p in (workdir / 'stage').rglob('rfm_job.sh') if test in str(p)]
    assert len(scripts) == 1, scripts
    return scripts[0].read_text()


def test_the_stack_launches_through_the_plans_launcher(workdir):  # noqa: F811
    reframe(workdir, '--dry-run', '-n', 'P2PMatrix.*%mode=Send-Recv/complete.*%size_range=quick',
            '-p', '^mpich-4_0$')
    lines = [line for line in job_script(workdir, 'P2PMatrix').splitlines()
             if 'mpiexec.mpich' in line]
    assert len(lines) == 1, lines
    assert lines[0].startswith('setpriv --reuid=') and \
        ' mpiexec.mpich -n 2 -bind-to core ' in lines[0], lines[0]


def test_startup_takes_the_knobs_a_user_sets(workdir):  # noqa: F811
    reframe(workdir, '--dry-run', '-n', 'StartupTime', '-p', '^mpich-4_0$',
            '-S', 'StartupTime.knobs=transport:tcp')
    assert 'export MPIR_CVAR_NOLOCAL=1' in job_script(workdir, 'StartupTime')


def test_srun_lines_come_from_one_function():
    """extra_launch (one node, or the job's nodes) and StartupTime's driver (np ranks over the
    job's nodes, more than their cores allowed) take srun's line from srun_argv."""
    from types import SimpleNamespace
    from testbed.launch import srun_argv
    stack = SimpleNamespace(srun_mpi='pmix')
    assert srun_argv(stack, 2, nodes=1) == ['srun', '--mpi=pmix', '-N', '1', '-n', '2']
    assert srun_argv(stack, 4) == ['srun', '--mpi=pmix', '-n', '4']
    assert srun_argv(stack, '{np}', 2, overcommit=True) == \
        ['srun', '--mpi=pmix', '--overcommit', '-N', '2', '-n', '{np}']
