"""End-to-end checks of the suite on the installed stacks (the set-up must have run).

Each starts ReFrame as a user would and checks what it says for bad input, that a failing
stack does not stop the others, and that no daemon or launcher survives a failed run."""
import json
import math
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from testbed import procs, registry
from testbed.selection import check_files
from testbed.checks import records

REPO = registry.REPO
QUICK = ['-n', 'P2PMatrix.*%mode=Send-Recv/complete.*%size_range=small',
         '-S', 'P2PMatrix.samples=2']


@pytest.fixture
def workdir():
    # Under /var/tmp, readable by the job account (pytest's tmp_path is private to root).
    path = tempfile.mkdtemp(prefix='testbed-pytest-', dir='/var/tmp')
    os.chmod(path, 0o755)
    yield Path(path)
    shutil.rmtree(path, ignore_errors=True)


def reframe(workdir, *args, env=None):
    rfm = shutil.which('reframe')
    assert rfm, 'reframe is not on PATH: run the set-up (make setup) and source site/env.sh'
    # These check behaviour (bad input, failures, leftovers), not performance: a 2-sample
    # figure is not a figure to assert. Reference files are still read and validated.
    full_env = dict(os.environ, RFM_CONFIG_FILES=str(REPO / 'site' / 'local.py'),
                    TESTBED_MEASURE_ONLY='1',
                    TESTBED_RESULTS_DB=str(workdir / 'results.db'))
    full_env.update(env or {})      # a test's own settings win (TESTBED_MEASURE_ONLY=0)
    report = workdir / 'report.json'
    checks = [w for f in check_files(args) for w in ('-c', f)]
    cmd = [rfm, *checks, '-s', str(workdir / 'stage'), '-o', str(workdir / 'output'),
           '--perflogdir', str(workdir / 'perflogs'), '--report-file', str(report), *args]
    proc = subprocess.run(cmd, cwd=REPO / 'reframe', env=full_env, capture_output=True,
                          text=True, timeout=600)
    cases = []
    if report.exists():
        cases = json.loads(report.read_text())['runs'][-1]['testcases']
    return proc, {(tc['name'].split()[0], tc['environ']): tc for tc in cases}


def test_builds_wait_for_timed_runs_under_the_default_policy(workdir):
    # ReFrame's default policy is async: a build outside the partition's slot compiled beside
    # a timed run (checks.BuildInRunSlot); on the local partition builds take that slot
    proc, cases = reframe(workdir, '-r', '--keep-stage-files', *QUICK,
                          '-p', '^(mpich-4_0|openmpi-4_1)$')
    builds = {env: tc for (name, env), tc in cases.items() if name.startswith('P2PBuild')}
    runs = [tc for (name, _), tc in cases.items() if name == 'P2PMatrix']
    assert len(builds) == 2 and len(runs) == 2, proc.stdout[-2000:]
    assert all(tc['result'] == 'pass' for tc in cases.values()), proc.stdout[-2000:]
    assert not any(tc['build_locally'] for tc in builds.values())
    for env, tc in builds.items():
        log = next((workdir / 'stage').glob(f'*/*/{env}/P2PBuild_*/rfm_build.out'))
        end = log.stat().st_mtime
        start = end - tc['time_compile']
        for run in runs:
            assert end <= run['job_submit_time'] or start >= run['job_completion_time_unix'], \
                f'{env} build {start:.1f}-{end:.1f} overlaps {run["environ"]}\'s run'


def test_unknown_stack_name_stops_before_running(workdir):
    proc, cases = reframe(workdir, '-l', env={'TESTBED_STACKS': 'mpich-4.0,mpich-9'})
    assert proc.returncode != 0 and not cases
    assert "TESTBED_STACKS: unknown stack 'mpich-9'" in proc.stdout + proc.stderr


def test_malformed_registry_names_file_and_field(workdir):
    bad = workdir / 'stacks.toml'
    bad.write_text(registry.DEFAULT_FILE.read_text().replace(
        'launcher = ["mpiexec.mpich", "-n", "{ntasks}"]', 'launcher = "mpiexec.mpich"'))
    proc, cases = reframe(workdir, '-l', env={'TESTBED_REGISTRY': str(bad)})
    assert proc.returncode != 0 and not cases
    out = proc.stdout + proc.stderr
    # one line that names the file, the field and the fix; no traceback (issue 44)
    line = next(x for x in out.splitlines() if f'{bad}: stacks.mpich-4.0.launcher' in x)
    assert 'expected a list' in line and 'Traceback' not in out


def test_malformed_reference_file_fails_the_test_before_it_runs(workdir):
    bad = workdir / 'refs.csv'
    bad.write_text('system,partition,machine,stack,test,case,variable,value,lower,upper,unit,'
                   'runs\ntestbed-local,default,m-1,mpich-4.0,P2PMatrix,x,latency,fast,-0.1,'
                   '0.1,us,r\n')
    proc, cases = reframe(workdir, '-r', *QUICK, '-p', 'mpich-4_0',
                          '-S', f'P2PMatrix.reference_file={bad}')
    assert proc.returncode != 0
    tc = cases[('P2PMatrix', 'mpich-4_0')]
    assert tc['result'] == 'fail' and tc['fail_phase'] == 'setup'
    assert f"{bad}: line 2: field value: 'fast' is not a number" in tc['fail_reason']


def registry_with(workdir, name, cc, launcher):
    """The shipped registry plus one MPICH-like stack `name` with its own compiler and
    launcher (TOML list text), written to workdir; returns its path."""
    reg = workdir / 'stacks.toml'
    reg.write_text(registry.DEFAULT_FILE.read_text() + f'''
[stacks."{name}"]
family = "mpich"
origin = "debian"
packages = ["mpich"]
cc = "{cc}"
launcher = {launcher}
features = ["mpi"]
''')
    return reg


def test_a_stack_whose_build_fails_fails_alone(workdir):
    reg = registry_with(workdir, 'broken-1.0', '/nonexistent/mpicc',
                        '["mpiexec.mpich", "-n", "{ntasks}"]')
    proc, cases = reframe(workdir, '-r', *QUICK, env={
        'TESTBED_REGISTRY': str(reg), 'TESTBED_STACKS': 'broken-1.0,mpich-4.0'})
    assert proc.returncode != 0
    build = cases[('P2PBuild', 'broken-1_0')]
    assert build['result'] == 'fail' and build['fail_phase'].startswith('compile')
    (err,) = (workdir / 'stage').glob('*/*/broken-1_0/P2PBuild_*/rfm_build.err')
    assert '/nonexistent/mpicc' in err.read_text()
    assert cases[('P2PMatrix', 'broken-1_0')]['result'] == 'fail_deps'   # its build failed
    good = cases[('P2PMatrix', 'mpich-4_0')]
    assert good['result'] == 'pass'
    # ... and its report keeps every sample and the commit, for testbed.compare
    from testbed.sizes import SCHEDULES
    assert sorted(good['figure_samples']) == sorted(
        f'half_round_trip_us@{n}' for n in SCHEDULES['small'])
    assert all(len(v) == 2 for v in good['figure_samples'].values())
    assert good['testbed_commit']


def test_a_hung_stack_costs_one_time_limit(workdir):
    # A launcher that never returns: the suite must give up after one time limit, not retry.
    reg = registry_with(workdir, 'hung-1.0', 'mpicc.mpich',
                        '["sh", "-c", "sleep 300", "{ntasks}"]')
    suite = (REPO / 'ci' / 'suite.sh').read_text()
    assert '--max-retries' not in suite.split('reframe -c tests')[1].split('rc=$?')[0]
    t0 = time.monotonic()
    proc, cases = reframe(workdir, '-r', *QUICK, '-S', 'P2PMatrix.time_limit=8s',
                          env={'TESTBED_REGISTRY': str(reg), 'TESTBED_STACKS': 'hung-1.0',
                               procs.RUN_ID: f'pytest-{workdir.name}'})
    elapsed = time.monotonic() - t0
    tc = cases[('P2PMatrix', 'hung-1_0')]
    assert tc['result'] == 'fail' and 'timed out' in (tc.get('fail_reason') or '')
    assert elapsed < 150, f'the hung stack cost {elapsed:.0f} s'
    assert procs.leftovers(run_id=f'pytest-{workdir.name}') == []


@pytest.mark.parametrize('how', [['-S', 'P2PMatrix.corrupt_at=1200'],
                                 ['-S', 'P2PMatrix.samples=0']])
def test_failed_lam_run_leaves_no_daemon(workdir, how):
    # The run's own marker: daemons of other runs on the machine are not this test's.
    run_id = f'pytest-{workdir.name}'
    proc, cases = reframe(workdir, '-r', *QUICK, '-p', 'lam-7_1', *how,
                          env={procs.RUN_ID: run_id})
    tc = cases[('P2PMatrix', 'lam-7_1')]
    assert tc['result'] == 'fail'
    (err,) = (workdir / 'stage').glob('*/*/lam-7_1/P2PMatrix_*/rfm_job.err')
    expected = ('payload check failed on rank 0: transport mpi pair Send-Recv variant '
                'complete size 1200 bytes'
                if 'corrupt_at' in how[1] else '--samples')
    assert expected in err.read_text()
    assert procs.leftovers(run_id=run_id) == []


def test_every_test_file_loads(workdir):
    """ReFrame skips a test file it cannot load with only a warning: here that is a failure."""
    proc, _ = reframe(workdir, '-l')
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-2000:]
    assert 'skipping test file' not in out, out[-2000:]
    # P2PMatrix is listed under P2PStack, which depends on it ('^P2PMatrix ...').
    assert '^P2PMatrix %mode=' in out
    for check in ('P2PStack', 'HplRun', 'Su3Run', 'Su3RankInvariance', 'StartupTime',
                  'PeerCompare'):
        assert f'- {check}' in out, check


# --- the applications: the checks bite, bad input stops before any rank starts -------------

def stage_file(workdir, environ, test, name):
    (path,) = (workdir / 'stage').glob(f'*/*/{environ}/{test}_*/{name}')
    return path.read_text()


def test_corrupted_link_fails_the_unitarity_check(workdir):
    proc, cases = reframe(workdir, '-r', '-n', 'Su3Run.*%ranks=2.*%comm=isend', '-p', 'mpich-4_0',
                          '-S', 'Su3Run.corrupt_link=true', '-S', 'Su3Run.trajectories=3')
    tc = cases[('Su3Run', 'mpich-4_0')]
    assert tc['result'] == 'fail' and tc['fail_phase'] == 'sanity'
    assert 'unitarity check failed at trajectory 1' in \
        stage_file(workdir, 'mpich-4_0', 'Su3Run', 'rfm_job.err')


def test_su3_speedup_busy_runs_the_case_again_after_its_second_baseline(workdir):
    # speedup_busy: the faster of two --alone baselines over the faster of two runs; the run
    # again comes after the second baseline, ended, and its plaquettes were checked (sanity)
    proc, cases = reframe(workdir, '-r', '-n', 'Su3Run.*%ranks=2.*%comm=isend', '-p', 'mpich-4_0',
                          '-S', 'Su3Run.trajectories=3')
    tc = cases[('Su3Run', 'mpich-4_0')]
    assert tc['result'] == 'pass', tc.get('fail_reason')
    assert any(k.endswith(':speedup_busy') for k in tc['perfvalues'])
    (out,) = (workdir / 'output').glob('*/*/mpich-4_0/Su3Run_*')
    for name in ('alone.out', 'alone_after.out', 'run_again.out'):
        assert 'SU3-END {' in (out / name).read_text(), name
    script = (out / 'rfm_job.sh').read_text()
    assert script.index('> alone_after.out') < script.index('> run_again.out')
    # the exchange over the kernel copy: the lower of the two launches' figures
    def over_cma(name):
        logs = [math.log(g['exchange_min_s'] / g['cma_exchange_min_s'])
                for g in records(out / name, 'SU3-GATHER')]
        return math.exp(sum(logs) / len(logs))
    (figure,) = (v[0] for k, v in tc['perfvalues'].items() if k.endswith(':exchange_over_cma'))
    assert figure == pytest.approx(min(over_cma('rfm_job.out'), over_cma('run_again.out')),
                                   rel=1e-12)


def test_su3_run_that_only_reports_lists_its_portable_figures(workdir):
    # the README's quick pass reports su3's ratios (report_only, as ci/suite.sh quick): its
    # report must still say which figures travel, or `references update`/`transfer` cannot use
    # the run; an oversubscribed run (4 ranks on 2 cores here) lists none
    proc, cases = reframe(workdir, '-r', '-n', 'Su3Run.*%comm=isend', '-p', 'mpich-4_0',
                          '-S', 'Su3Run.report_only=speedup_busy,exchange_over_cma',
                          '-S', 'Su3Run.trajectories=3')
    two, four = (tc for tc in sorted(
        (tc for tc in json.loads((workdir / 'report.json').read_text())['runs'][-1]['testcases']
         if tc['name'].startswith('Su3Run')), key=lambda tc: tc['num_tasks']))
    assert two['result'] == 'pass', two.get('fail_reason')
    # two ranks on one host: the exchange over the kernel copy is the figure that travels
    assert 'exchange_over_cma' in two['portable_variables']
    # the gathers in the run are reported, never looked up (the exchange supersedes them)
    assert 'gather_over_memcpy' not in two['portable_variables']
    for name in ('gather_over_memcpy', 'exchange_over_memcpy', 'exchange_over_shm',
                 'exchange_over_cma'):
        assert any(k.endswith(f':{name}') for k in two['perfvalues'])
    # `make references` writes rows for what the test looks up, and not for figures only
    # ever reported; speedup_busy is reported only here, so its --alone baseline did not run
    assert 'exchange_over_cma' in two['looked_up_variables']
    assert not {'speedup', 'gather_over_memcpy', 'speedup_busy', 'exchange_over_memcpy',
                'exchange_over_shm'} & set(two['looked_up_variables'])
    assert not any(k.endswith(':speedup_busy') for k in two['perfvalues'])
    assert not list((workdir / 'stage').glob('*/*/mpich-4_0/Su3Run_*/alone.out'))
    if (os.cpu_count() or 1) < 4:
        assert four['portable_variables'] == []


def test_hpl_runs_again_after_its_second_baseline_and_reports_what_travels(workdir):
    # where the ranks fit the cores xhpl runs twice, the second time after the second DGEMM
    # baseline; the figures are the faster run's (as su3's speedup_busy). Run with
    # assert_performance=false (as su3 above): it still says which figures travel
    proc, cases = reframe(workdir, '-r', '-n', 'HplRun.*%grid=1x2', '-p', 'mpich-4_0',
                          '-S', 'HplRun.assert_performance=false', '-S', 'HplRun.n_list=1800')
    tc = cases[('HplRun', 'mpich-4_0')]
    assert tc['result'] == 'pass', tc.get('fail_reason')
    assert {'efficiency_N1800', 'panel_replay_over_cma',
            'panel_posted_over_cma'} <= set(tc['portable_variables'])
    # on one host the panels' sizes replayed after the run are looked up, over the kernel copy;
    # the panels in the run over memcpy only across nodes
    assert not {'panel_over_memcpy', 'panel_over_cma'} & set(tc['looked_up_variables'])
    (out,) = (workdir / 'output').glob('*/*/mpich-4_0/HplRun_*')
    script = (out / 'rfm_job.sh').read_text()
    assert script.index('> dgemm_after.out') < script.index('> run_again.out')
    gflops = [float(line.split()[-1]) for name in ('rfm_job.out', 'run_again.out')
              for line in (out / name).read_text().splitlines() if line.startswith('WR')]
    assert len(gflops) == 2
    value = next(v[0] for k, v in tc['perfvalues'].items() if k.endswith(':gflops_N1800'))
    assert value == pytest.approx(max(gflops), rel=1e-3)
    assert len(tc['figure_samples']['time_s@N1800']) == 2
    # the panels are reported (and replayed) after the run only: the run again's are not read
    assert 'HPL-PANELS' in (out / 'rfm_job.out').read_text()
    assert 'HPL-PANELS' not in (out / 'run_again.out').read_text()


def test_hpl_run_without_panels_keeps_its_residual_and_efficiency(workdir):
    # the quick pass's HplRun.panels=no: xhpl --no-panels on both runs, no panel figure
    # reported or looked up, the residual and the efficiency as always
    proc, cases = reframe(workdir, '-r', '-n', 'HplRun.*%grid=1x2', '-p', 'mpich-4_0',
                          '-S', 'HplRun.n_list=1800', '-S', 'HplRun.panels=no')
    tc = cases[('HplRun', 'mpich-4_0')]
    assert tc['result'] == 'pass', tc.get('fail_reason')
    assert not [k for k in tc['perfvalues'] if ':panel_' in k]
    assert not [v for v in tc['portable_variables'] if v.startswith('panel_')]
    assert any(k.endswith(':efficiency_N1800') for k in tc['perfvalues'])
    (out,) = (workdir / 'output').glob('*/*/mpich-4_0/HplRun_*')
    assert 'HPL-PANELS' not in (out / 'rfm_job.out').read_text()
    assert 'PASSED' in (out / 'rfm_job.out').read_text()


def test_hpl_run_whose_residual_check_fails_is_failed(workdir):
    proc, cases = reframe(workdir, '-r', '-n', 'HplRun.*%grid=1x1', '-p', 'mpich-4_0',
                          '-S', 'HplRun.n_list=1800', '-S', 'HplRun.threshold=1e-30')
    tc = cases[('HplRun', 'mpich-4_0')]
    assert tc['result'] == 'fail' and tc['fail_phase'] == 'sanity'
    assert 'FAILED' in stage_file(workdir, 'mpich-4_0', 'HplRun', 'rfm_job.out')


def test_hpl_n_beyond_memory_stops_before_any_rank(workdir):
    proc, cases = reframe(workdir, '-r', '-n', 'HplRun.*%grid=1x1', '-p', 'mpich-4_0',
                          '-S', 'HplRun.n_list=1000050')
    tc = cases[('HplRun', 'mpich-4_0')]
    assert tc['result'] == 'fail'
    assert 'HPL.dat: N=1000050 needs' in tc['fail_reason']
    assert not list((workdir / 'stage').glob('*/*/mpich-4_0/HplRun_*/rfm_job.out'))


def test_non_numeric_hpl_parameter_is_refused_naming_it(workdir):
    proc, cases = reframe(workdir, '-r', '-n', 'HplRun.*%grid=1x1', '-p', 'mpich-4_0',
                          '-S', 'HplRun.n_list=big')
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 or cases[('HplRun', 'mpich-4_0')]['result'] == 'fail'
    assert 'n_list' in out and 'big' in out
    assert not list((workdir / 'stage').glob('*/*/*/HplRun_*/rfm_job.out'))


@pytest.mark.parametrize('ranks, args, message', [
    (3, ['--preset', '1'], 'number of ranks 3 is not a power of two'),
    (2, ['--lattice', '5x5x5x5'], 'nt'),
])
def test_su3_bad_decomposition_stops_with_the_parameter(workdir, ranks, args, message):
    """Straight through the launcher: a rank count ReFrame's parameters never produce."""
    build = workdir / 'su3'
    shutil.copytree(REPO / 'apps', build / 'apps')
    subprocess.run(['make', '-s', '-C', str(build / 'apps' / 'su3_rmd'), 'CC=mpicc.mpich'],
                   check=True, capture_output=True)
    subprocess.run(['chmod', '-R', 'a+rX', str(workdir)], check=True)
    reg = registry.load()
    from testbed.launch import drop_privileges
    cmd = drop_privileges(reg) + reg.stacks['mpich-4.0'].launch_command(ranks) + \
        [str(build / 'apps' / 'su3_rmd' / 'su3_rmd'), *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=workdir)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr
    assert 'SU3-RUN' not in proc.stdout       # stopped before any work


def test_pvm_matrix_asserts_the_median_over_its_cases_and_reports_each_case(workdir):
    # one case's figure spread too far to assert (0.57x of its machine's own row in a clean
    # run); the median over the cases, as P2PStack's over the MPI modes, is what is looked up
    proc, cases = reframe(workdir, '-r', '-n', 'PvmMatrix.*%route=direct.*%size_range=quick.*%pack=double',
                          '-S', 'PvmMatrix.samples=2')
    tc = cases[('PvmMatrix', 'pvm-3_4')]
    assert tc['result'] == 'pass', tc.get('fail_reason')
    assert sorted(tc['looked_up_variables']) == ['bandwidth', 'latency', 'pvmd_boot']
    values = {k.split(':')[-1]: v[0] for k, v in tc['perfvalues'].items()}
    for what in ('latency', 'bandwidth'):
        per_case = [v for k, v in values.items() if k.startswith(f'{what}_')]
        assert len(per_case) == 3
        assert values[what] == pytest.approx(sorted(per_case)[1])


def test_a_selection_loads_the_files_of_its_classes_only():
    assert check_files(['-r', '-n', 'P2PMatrix.*%mode=Send-Recv', '-S', 'x=1']) == \
        ['tests/p2p_matrix.py']
    assert check_files(['-n', '^HplRun.*%grid=1x2', '-n', 'Su3Run']) == \
        ['tests/hpl.py', 'tests/su3_rmd.py']
    assert check_files(['-l']) == ['tests']                        # nothing named: every file
    assert check_files(['-n', '.*Matrix']) == ['tests']            # not a class name
    assert check_files(['-n', 'NoSuchTest']) == ['tests']          # ReFrame says what it finds
    assert check_files(['-n', 'P2PMatrix', '-t', 'p2p']) == ['tests']   # a tag selects too
