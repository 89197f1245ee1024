"""testbed/hangs.py: a launch that hung (a TB-HUNG record) or crashed stops its stack for the
rest of the run, with a message naming the call, mode, size and rank; every later case of that
stack fails before it launches; other stacks and other runs are untouched."""
import json
import time

import pytest
from reframe.core.exceptions import ReframeError

from testbed import hangs

P2P_RANK1 = ('TB-HUNG {"program":"p2p","rank":1,"pid":41,"host":"vm","call":"MPI_Recv",'
             '"call_from":"stack","phase":"handshake","mode":"mpi Send-Recv/complete",'
             '"size":"1 B","size_bytes":1,"stalled_s":30.4,"timeout_s":30,"expected_s":1.0,'
             '"beats":7,"stack":["pause","MPI_Recv"]}')
P2P_RANK0 = P2P_RANK1.replace('"rank":1,"pid":41', '"rank":0,"pid":40').replace(
    '"call":"MPI_Recv"', '"call":"MPI_Wait"')


def test_records_are_read_once_per_rank_from_stdout_and_stderr(tmp_path):
    (tmp_path / 'out').write_text(f'P2P-RUN {{}}\n{P2P_RANK1}\n')
    # stderr: the same rank's line again, a launcher's prefix before rank 0's, a broken line
    (tmp_path / 'err').write_text(f'{P2P_RANK1}\n[1,0]<stderr>:{P2P_RANK0}\nTB-HUNG {{"rank":\n')
    recs = hangs.hung_records(tmp_path / 'out', tmp_path / 'err', tmp_path / 'missing')
    assert [(r['rank'], r['call']) for r in recs] == [(1, 'MPI_Recv'), (0, 'MPI_Wait')]
    assert hangs.where(recs[0]) == 'MPI_Recv, mpi Send-Recv/complete, 1 B, handshake, rank 1'
    msg = hangs.hang_message(recs, 30.0)
    assert msg == ('launch hung: p2p made no progress for 30.4 s (TESTBED_HANG_TIMEOUT_S=30): '
                   'rank 1 in MPI_Recv (mpi Send-Recv/complete, 1 B, handshake); '
                   'rank 0 in MPI_Wait')
    assert hangs.hung_records(tmp_path / 'missing') == []


def test_a_record_without_a_call_is_named_by_its_phase():
    rec = {'rank': 0, 'call': '', 'phase': 'HPL run', 'mode': 'grid 1x2 NB 150',
           'size': 'N=7200'}
    assert hangs.where(rec) == 'HPL run, grid 1x2 NB 150, N=7200, rank 0'
    assert hangs.where(dict(rec, mode='', call='MPI_Iprobe')) == \
        'MPI_Iprobe, N=7200, HPL run, rank 0'


@pytest.mark.parametrize('code, text, crash', [
    (139, '=   KILLED BY SIGNAL: 11 (Segmentation fault)', 'signal 11 (SIGSEGV)'),   # Hydra
    (1, 'mpirun noticed that process rank 1 with PID 0 on node vm exited on signal 7 (Bus '
        'error).', 'signal 7 (SIGBUS)'),                                           # Open MPI
    (255, 'prterun noticed that process rank 0 with PID 9 on node vm exited on signal 6 '
          '(Aborted).', 'signal 6 (SIGABRT)'),
    (1, 'run.sh: line 3: 123 Segmentation fault (core dumped) ./p2p-pvm', 'Segmentation fault'),
    (134, '', 'exit code 134: killed by signal 6 (SIGABRT)'),
    # a launcher tearing the other ranks down after one failed is not a crash
    (1, '=   KILLED BY SIGNAL: 9 (Killed)', None),
    (143, 'mpirun noticed that process rank 1 exited on signal 15 (Terminated).', None),
    (3, 'p2p: payload check failed on rank 0: ...', None),
    (0, '=   KILLED BY SIGNAL: 11 (Segmentation fault)', None),     # the launch succeeded
])
def test_a_crash_is_a_crash_signal_not_a_teardown(code, text, crash):
    got = hangs.crash_of(code, text)
    assert (got is None) if crash is None else (crash in got), got


@pytest.mark.parametrize('value, env, expected', [
    (-1.0, None, 30.0), (-1.0, '12.5', 12.5), (-1.0, '0', 0.0), (5.0, '12', 5.0),
    (0.0, '12', 0.0)])
def test_the_bound_is_the_test_variable_else_the_environment_else_30(monkeypatch, value, env,
                                                                       expected):
    monkeypatch.delenv(hangs.TIMEOUT_VAR, raising=False)
    if env is not None:
        monkeypatch.setenv(hangs.TIMEOUT_VAR, env)
    assert hangs.timeout_s(value) == expected


@pytest.mark.parametrize('value, env, name', [(-1.0, 'abc', 'TESTBED_HANG_TIMEOUT_S='),
                                              (-1.0, '-3', 'TESTBED_HANG_TIMEOUT_S='),
                                              (1e9, None, 'hang_timeout_s=')])
def test_a_bad_bound_is_one_line_naming_where_it_came_from(monkeypatch, value, env, name):
    monkeypatch.delenv(hangs.TIMEOUT_VAR, raising=False)
    if env is not None:
        monkeypatch.setenv(hangs.TIMEOUT_VAR, env)
    with pytest.raises(ReframeError) as err:
        hangs.timeout_s(value)
    assert str(err.value).startswith(name) and '\n' not in str(err.value)
    assert 'expected seconds from 0 (no hang watchdog) to 86400' in str(err.value)


def test_a_stopped_stack_stays_stopped_for_its_run_only(tmp_path):
    run = hangs.RunState('run-a', tmp_path)
    assert run.stopped('mpich-4.0') is None
    run.stop('mpich-4.0', 'P2PMatrix %mode=Send-Recv/complete', 'hung',
             'MPI_Recv, mpi Send-Recv/complete, 1 B, rank 1')
    run.stop('mpich-4.0', 'P2PMatrix %mode=Ssend-Recv/complete', 'crashed', 'signal 11')
    # a fresh reader of the same run (the next case): the first reason stands
    entry = hangs.RunState('run-a', tmp_path).stopped('mpich-4.0')
    assert hangs.not_launched('mpich-4.0', entry) == (
        'stack mpich-4.0 hung in P2PMatrix %mode=Send-Recv/complete (MPI_Recv, mpi '
        'Send-Recv/complete, 1 B, rank 1) earlier in this run: not launched')
    assert run.stopped('openmpi-4.1') is None                   # every other stack goes on
    assert hangs.RunState('run-b', tmp_path).stopped('mpich-4.0') is None   # another run
    assert json.loads((tmp_path / 'run-a.json').read_text())['run'] == 'run-a'


def test_a_launch_killed_at_its_time_limit_stops_its_stack(tmp_path, monkeypatch):
    run = hangs.RunState('run-c', tmp_path)
    run.launching('lam-7.1', 'HplRun %grid=1x2', 60.0)
    run.launched('lam-7.1', 'another case')           # not this launch's end: it stays
    assert run.stopped('lam-7.1') is None             # still within its limit: running
    later = time.time() + 60 + hangs.TIME_LIMIT_GRACE_S + 1
    monkeypatch.setattr(hangs.time, 'time', lambda: later)
    entry = run.stopped('lam-7.1')
    assert entry == {'test': 'HplRun %grid=1x2', 'what': 'hung',
                     'detail': 'killed at its time limit of 60 s, no TB-HUNG record'}
    # a launch that ended (its post-run hook ran) is forgotten, whatever its duration
    run.launching('mpich-4.0', 'HplRun %grid=1x2', 60.0)
    run.launched('mpich-4.0', 'HplRun %grid=1x2')
    monkeypatch.setattr(hangs.time, 'time', lambda: later + 1000)
    assert run.stopped('mpich-4.0') is None
    run.launching('pvm-3.4', 'PvmMatrix', None)       # no limit: never judged stale
    monkeypatch.setattr(hangs.time, 'time', lambda: later + 10 ** 6)
    assert run.stopped('pvm-3.4') is None


def test_the_run_is_testbed_run_id_else_this_reframe_process(tmp_path, monkeypatch):
    monkeypatch.setenv('TESTBED_RUN_ID', 'run-20261128-1/x')
    assert hangs.RunState(directory=tmp_path).path == tmp_path / 'run-20261128-1_x.json'
    monkeypatch.delenv('TESTBED_RUN_ID')
    mine = hangs.RunState(directory=tmp_path).run
    assert mine.startswith('reframe-') and mine == hangs.RunState(directory=tmp_path).run


NAMES = ['mpich-4.0', 'openmpi-4.1']


@pytest.mark.parametrize('hang, stacks, stack, expected', [
    ('', '', 'mpich-4.0', ''),
    ('MPI_Recv:200:1', 'mpich-4.0', 'mpich-4.0', 'MPI_Recv:200:1'),
    ('MPI_Recv:200:1', 'mpich-4.0', 'openmpi-4.1', ''),       # limited to the stack named
    ('MPI_Waitall:3:0', 'all', 'openmpi-4.1', 'MPI_Waitall:3:0'),
])
def test_the_injected_hang_reaches_only_the_stacks_named(monkeypatch, hang, stacks, stack,
                                                         expected):
    monkeypatch.setenv('TESTBED_INJECT_HANG', hang)
    monkeypatch.setenv('TESTBED_INJECT_HANG_STACK', stacks)
    assert hangs.hang_injection(stack, NAMES) == expected


@pytest.mark.parametrize('hang, stacks, message', [
    ('MPI_Recv:0:1', 'mpich-4.0', "TESTBED_INJECT_HANG='MPI_Recv:0:1': expected CALL:N:RANK"),
    ('MPI_Recv', 'mpich-4.0', "TESTBED_INJECT_HANG='MPI_Recv': expected CALL:N:RANK"),
    ('MPI_Recv:2:1', '', "TESTBED_INJECT_HANG_STACK='': expected the stacks to hang, a comma "
                         "list of mpich-4.0, openmpi-4.1 (or all)"),
    ('MPI_Recv:2:1', 'mpich-4_0', "TESTBED_INJECT_HANG_STACK='mpich-4_0': expected"),
])
def test_a_bad_injection_is_one_line_naming_the_variable(monkeypatch, hang, stacks, message):
    monkeypatch.setenv('TESTBED_INJECT_HANG', hang)
    monkeypatch.setenv('TESTBED_INJECT_HANG_STACK', stacks)
    with pytest.raises(ReframeError) as err:
        hangs.hang_injection('mpich-4.0', NAMES)
    assert str(err.value).startswith(message) and '\n' not in str(err.value)
