"""The slowdown shim (apps/slowdown) that proves references bite: it must pad every rank of an
MPICH job by its factor, and refuse bad settings naming the variable (the set-up must have run)."""
import json
import os
import re
import subprocess

import pytest
from apps_copy import apps_copy

from testbed import registry
from testbed.launch import drop_privileges

SIZES = (8, 1048576)


@pytest.fixture(scope='module')
def built():
    """The shim and p2p for mpich-4.0, built in a copy under /var/tmp that the job account
    can read (pytest's tmp_path is private to root; the repository tree stays clean)."""
    with apps_copy('slowdown', [('slowdown', 'OUT={dir}'), ('p2p', 'CC=mpicc.mpich')]) as path:
        yield path / 'libslowdown.so', path / 'apps' / 'p2p' / 'p2p'


def p2p(built, **env):
    """One Send-Recv run as a job runs it; the shim preloaded with `env` as its settings."""
    shim, program = built
    reg = registry.load()
    cmd = drop_privileges(reg) + reg.stacks['mpich-4.0'].launch_command(2) + \
        [str(program), '--pair', 'Send-Recv', '--sizes', ','.join(map(str, SIZES)),
         '--samples', '5']
    full_env = {k: v for k, v in os.environ.items() if not k.startswith('TESTBED_SLOWDOWN')}
    return subprocess.run(cmd, env=dict(full_env, LD_PRELOAD=str(shim), **env),
                          capture_output=True, text=True, timeout=120, cwd=shim.parent)


def medians(proc, transport='mpi'):
    """{size: median half round trip} of one transport (the baselines: shm, memcpy)."""
    assert proc.returncode == 0, proc.stderr
    out = {}
    for line in proc.stdout.splitlines():
        if line.startswith('P2P {'):
            rec = json.loads(line[4:])
            if rec.get('transport', 'mpi') == transport:
                out[rec['size_bytes']] = rec['median_us']
    assert sorted(out) == list(SIZES), proc.stdout
    return out


ACCOUNT = re.compile(r'^slowdown: pid (\d+) padded (\d+) calls: own (\d+) ns, injected (\d+) ns'
                     r'(?: \(work (\d+) ns\))?(?: \(sends before: (\d+)\))?$', re.M)


def padded_fully(proc, account):
    """Each of the two ranks' accounts (`account` matches pid, calls, own, injected, notes...):
    it padded, by at least (f - 1) x its calls' own time at f = 2 (less a ns of rounding per
    call); yields (calls, own ns, the notes)."""
    accounts = account.findall(proc.stderr)
    assert len(accounts) == 2, proc.stderr
    for pid, calls, own, injected, *notes in accounts:
        calls, own, injected = int(calls), int(own), int(injected)
        assert calls > 0 and own > 0, proc.stderr
        # The busy-wait ends at or after its deadline, truncated to whole ns once per call.
        assert injected >= own - calls, f'pid {pid}: injected {injected} ns < own {own} ns'
        yield calls, own, notes


def active(built, banner, **env):
    """p2p run with the shim set by `env`: both ranks said `slowdown: active <banner>` and the
    run completed whole (every payload checked); returns the process."""
    proc = p2p(built, **env)
    assert proc.stderr.count(f'slowdown: active {banner}') == 2, proc.stderr
    medians(proc)
    return proc


def test_factor_2_pads_every_rank_by_its_own_time(built):
    # No timing is asserted here (a timed test fails on a slow day): each rank's own account
    # must show it padded calls by at least (f - 1) x their own time. How much a figure then
    # slows is measured, not tested: ci/slowdown.sh and apps/slowdown/README.md.
    proc = active(built, 'factor 2 on MPI_Send,', TESTBED_SLOWDOWN='2')
    for calls, own, (work, before) in padded_fully(proc, ACCOUNT):     # one per rank
        assert not work and not before, proc.stderr    # not asked for


def test_work_pads_the_time_outside_the_calls_and_not_the_calls(built):
    # TESTBED_INJECT_SCOPE=run's whole-run slowdown: each rank pads its own work, the time
    # outside every call the shim wraps, and with no call listed nothing else.
    proc = active(built, 'factor 2 on work (pid', TESTBED_SLOWDOWN='2',
                  TESTBED_SLOWDOWN_CALLS='work')
    for calls, own, (work, _) in padded_fully(proc, ACCOUNT):
        assert work and int(work) == own, proc.stderr      # no call padded
    proc = active(built, 'factor 2 on MPI_Send,work (pid', TESTBED_SLOWDOWN='2',
                  TESTBED_SLOWDOWN_CALLS='MPI_Send,work')
    for pid, calls, own, injected, work, _ in ACCOUNT.findall(proc.stderr):
        assert 0 < int(work) < int(own), proc.stderr            # and the sends


def test_sends_before_pads_the_sends_before_they_run(built):
    # TESTBED_SLOWDOWN_SENDS=before: a send waits before the real call, on the own time of the
    # same call's previous run (the first is not padded); the receives are still padded after.
    proc = active(built, 'factor 2 on MPI_Send, sends padded before', TESTBED_SLOWDOWN='2',
                  TESTBED_SLOWDOWN_CALLS='MPI_Send', TESTBED_SLOWDOWN_SENDS='before')
    for calls, _, (work, before) in padded_fully(proc, ACCOUNT):
        assert before and int(before) == calls, proc.stderr     # only sends listed
    proc = p2p(built, TESTBED_SLOWDOWN='2', TESTBED_SLOWDOWN_CALLS='MPI_Send,MPI_Recv',
               TESTBED_SLOWDOWN_SENDS='before')
    medians(proc)
    for pid, calls, own, injected, work, before in ACCOUNT.findall(proc.stderr):
        assert 0 < int(before) < int(calls), proc.stderr         # the receives after
    proc = p2p(built, TESTBED_SLOWDOWN='2', TESTBED_SLOWDOWN_SENDS='after')    # the default
    assert 'sends padded before' not in proc.stderr and ACCOUNT.search(proc.stderr), \
        proc.stderr


POLLED = re.compile(r'^slowdown: pid (\d+) padded (\d+) calls: own (\d+) ns, injected (\d+) ns'
                    r' \(polls: (\d+)\)$', re.M)


def test_waits_polled_pad_every_test(built):
    # TESTBED_SLOWDOWN_WAITS=poll: MPI_Send and MPI_Recv run as MPI_Isend/MPI_Irecv and a loop
    # of MPI_Test, each start and each test padded on its own time; the ping-pong still
    # delivers every payload (p2p checks them) and every rank pads at least twice per call.
    proc = active(built, 'factor 2 on MPI_Send,MPI_Recv, waits polled', TESTBED_SLOWDOWN='2',
                  TESTBED_SLOWDOWN_CALLS='MPI_Send,MPI_Recv', TESTBED_SLOWDOWN_WAITS='poll')
    for calls, _, (polls,) in padded_fully(proc, POLLED):
        assert int(polls) == calls, proc.stderr         # only Send and Recv listed: all polled
    proc = p2p(built, TESTBED_SLOWDOWN='2', TESTBED_SLOWDOWN_WAITS='block')     # the default
    assert 'waits polled' not in proc.stderr and ACCOUNT.search(proc.stderr), proc.stderr


def test_pause_file_leaves_a_process_that_starts_at_full_speed(built):
    # A baseline in a job slowed with TESTBED_INJECT_SCOPE=run runs while the file exists.
    pause = built[0].parent / 'slowdown.pause'
    pause.touch()
    try:
        proc = p2p(built, TESTBED_SLOWDOWN='2', TESTBED_SLOWDOWN_PAUSE=str(pause))
    finally:
        pause.unlink()
    medians(proc)
    assert 'slowdown:' not in proc.stderr, proc.stderr
    proc = p2p(built, TESTBED_SLOWDOWN='2', TESTBED_SLOWDOWN_PAUSE=str(pause))   # gone
    assert proc.stderr.count('slowdown: active factor 2') == 2, proc.stderr


FIXED = re.compile(r'^slowdown: pid (\d+) padded (\d+) calls by 50 ns each \((\d+) spin turns\)$',
                   re.M)


def test_fixed_wait_pads_every_rank(built):
    # "+Nns": a calibrated spin after each slowed call, no clock read in the call
    proc = p2p(built, TESTBED_SLOWDOWN='+50ns')
    assert proc.stderr.count('slowdown: active fixed +50ns on MPI_Send,') == 2, proc.stderr
    medians(proc)
    accounts = FIXED.findall(proc.stderr)
    assert len(accounts) == 2, proc.stderr
    assert all(int(calls) > 0 and int(turns) >= 1 for _, calls, turns in accounts)


def test_copy_copies_every_send_buffer_and_slows_the_large_messages(built):
    # the second kind of slowdown (make ab): 16 extra copies of each 1 MiB send make a half
    # round trip at least 16 copies long, judged against the memcpy baseline sampled in the
    # same launch. Not against a plain launch: a plain mpich-4.0 launch on a slow VM state
    # can be as slow at 1 MiB as the copies make it (the journal, 2026-11-29 late night).
    proc = p2p(built, TESTBED_SLOWDOWN_COPY='16')
    assert proc.stderr.count('slowdown: active copy x16 of every send buffer') == 2, proc.stderr
    assert medians(proc)[1048576] > 8 * medians(proc, 'memcpy')[1048576], proc.stdout


def test_a_fractional_copy_copies_part_of_each_buffer(built):
    # copy:0.1 is make ab's graded slowdown of large messages; only that it runs is asserted
    proc = p2p(built, TESTBED_SLOWDOWN_COPY='0.1')
    assert proc.stderr.count('slowdown: active copy x0.1 of every send buffer') == 2, proc.stderr
    assert set(medians(proc)) >= {8, 1048576}


def test_inactive_shim_says_nothing(built):
    for env in ({}, {'TESTBED_SLOWDOWN': ''}, {'TESTBED_SLOWDOWN': '1'}):
        proc = p2p(built, **env)
        medians(proc)
        assert 'slowdown:' not in proc.stderr, (env, proc.stderr)


@pytest.mark.parametrize('env, message', [
    ({'TESTBED_SLOWDOWN': 'abc'}, "TESTBED_SLOWDOWN='abc': expected a factor from 1 to 100"),
    ({'TESTBED_SLOWDOWN': '0.5'}, "TESTBED_SLOWDOWN='0.5': expected a factor from 1 to 100"),
    ({'TESTBED_SLOWDOWN': '+0ns'}, "TESTBED_SLOWDOWN='+0ns': expected a factor from 1 to 100"),
    ({'TESTBED_SLOWDOWN': '+5us'}, "or a fixed wait from +1ns to +1000000ns"),
    ({'TESTBED_SLOWDOWN': '1.5', 'TESTBED_SLOWDOWN_CALLS': 'MPI_Send,MPI_Sned'},
     "TESTBED_SLOWDOWN_CALLS='MPI_Send,MPI_Sned': unknown call 'MPI_Sned'"),
    ({'TESTBED_SLOWDOWN': '+50ns', 'TESTBED_SLOWDOWN_CALLS': 'MPI_Send,work'},
     "'work' needs a factor, not a fixed wait"),
    ({'TESTBED_SLOWDOWN': '1.5', 'TESTBED_SLOWDOWN_SENDS': 'early'},
     "TESTBED_SLOWDOWN_SENDS='early': expected after (the default) or before"),
    ({'TESTBED_SLOWDOWN': '1.5', 'TESTBED_SLOWDOWN_WAITS': 'spin'},
     "TESTBED_SLOWDOWN_WAITS='spin': expected block (the default) or poll"),
    ({'TESTBED_SLOWDOWN': '+50ns', 'TESTBED_SLOWDOWN_WAITS': 'poll'},
     "poll pads every test by the factor"),
    ({'TESTBED_SLOWDOWN': '1.5', 'TESTBED_SLOWDOWN_WAITS': 'poll',
      'TESTBED_SLOWDOWN_SENDS': 'before'}, "TESTBED_SLOWDOWN_WAITS='poll': poll pads"),
    ({'TESTBED_SLOWDOWN_COPY': '0'}, "TESTBED_SLOWDOWN_COPY='0': expected a number of extra "
                                     "copies above 0 and at most 16"),
    ({'TESTBED_SLOWDOWN_COPY': '17'}, "TESTBED_SLOWDOWN_COPY='17': expected a number"),
])
def test_bad_setting_stops_the_job_naming_the_variable(built, env, message):
    proc = p2p(built, **env)
    assert proc.returncode != 0
    assert message in proc.stderr
    assert proc.stderr.count('slowdown:') == 1    # the first process to load it stops
    assert 'P2P' not in proc.stdout


def test_a_pvm_task_says_the_shim_is_active_and_its_sends_and_receives_are_padded(built,
                                                                                  tmp_path):
    """PVM's pvm_send and pvm_recv are wrapped as the MPI calls are (the PVM container tax
    shows its bite with them); a PVM task has no MPI_Init, so it says so at its first call.
    A stand-in library whose calls spin 200 us each takes PVM's place: no pvmd needed."""
    shim, _ = built
    lib, prog = tmp_path / 'libfakepvm.so', tmp_path / 'task'
    (tmp_path / 'fake.c').write_text(
        '#include <time.h>\n'
        'static void spin(void) { struct timespec a, b; clock_gettime(CLOCK_MONOTONIC, &a);\n'
        '  do clock_gettime(CLOCK_MONOTONIC, &b);\n'
        '  while ((b.tv_sec - a.tv_sec) * 1000000000L + b.tv_nsec - a.tv_nsec < 200000); }\n'
        'int pvm_send(int tid, int tag) { (void)tid; (void)tag; spin(); return 0; }\n'
        'int pvm_recv(int tid, int tag) { (void)tid; (void)tag; spin(); return 1; }\n')
    (tmp_path / 'task.c').write_text(
        'int pvm_send(int, int); int pvm_recv(int, int);\n'
        'int main(void) { for (int i = 0; i < 50; i++) { pvm_send(1, 1); pvm_recv(1, 1); }\n'
        '  return 0; }\n')
    subprocess.run(['cc', '-shared', '-fPIC', '-o', str(lib), str(tmp_path / 'fake.c')],
                   check=True)
    subprocess.run(['cc', '-o', str(prog), str(tmp_path / 'task.c'), f'-L{tmp_path}',
                    '-lfakepvm', f'-Wl,-rpath,{tmp_path}'], check=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith('TESTBED_SLOWDOWN')}
    proc = subprocess.run([str(prog)], env=dict(env, LD_PRELOAD=str(shim), TESTBED_SLOWDOWN='2',
                                                TESTBED_SLOWDOWN_CALLS='pvm_send,pvm_recv'),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert re.search(r'^slowdown: active factor 2 on pvm_send,pvm_recv ', proc.stderr, re.M), \
        proc.stderr
    (_, calls, own, injected, *_), = ACCOUNT.findall(proc.stderr)
    assert int(calls) == 100
    # lower bounds only, which hold however busy the machine: each call spins 200 us, and at
    # factor 2 each pad waits at least the call's own time (a preempted wait runs over)
    assert int(own) >= 100 * 200_000, proc.stderr
    assert int(injected) >= 0.99 * int(own), proc.stderr
