"""dgemm_rate, HPL's baseline: the record's shape, one pinned process per CPU asked for, the
capacity from the slowest CPU of each repetition, and the errors. Asserts no speed: a timed
test would fail on a slow day. Builds with the serial OpenBLAS the set-up installs."""
import json
import os
import shutil
import subprocess

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SERIAL = '/usr/lib/x86_64-linux-gnu/openblas-serial'


@pytest.fixture(scope='module')
def dgemm_rate(tmp_path_factory):
    if not shutil.which('cc') or not os.path.exists(f'{SERIAL}/libopenblas.so.0'):
        pytest.skip('needs cc and libopenblas0-serial (the set-up installs both)')
    exe = str(tmp_path_factory.mktemp('dgemm') / 'dgemm_rate')
    subprocess.run(['cc', '-std=c99', '-O2', '-Wall', '-Wextra', '-Werror', '-o', exe,
                    os.path.join(HERE, 'dgemm_rate.c'), f'{SERIAL}/libopenblas.so.0',
                    f'-Wl,-rpath,{SERIAL}'], check=True, capture_output=True, text=True)
    return exe


def run(exe, *args, cpus=None):
    argv = ([shutil.which('taskset'), '-c', cpus] if cpus else []) + [exe, *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60)


def record(out):
    line, = [ln for ln in out.stdout.splitlines() if ln.startswith('DGEMM-RATE {')]
    return json.loads(line.split(' ', 1)[1])


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason='needs two CPUs')
def test_two_cpus_one_process_each_and_capacity_from_their_rates(dgemm_rate):
    out = run(dgemm_rate, '--n', '200', '--reps', '3', '--cpus', '2')
    assert out.returncode == 0, out.stderr
    rec = record(out)
    allowed = sorted(os.sched_getaffinity(0))[:2]
    assert rec['cpus'] == allowed and rec['n'] == 200 and rec['reps'] == 3
    assert len(rec['cpu_gflops']) == 2 and min(rec['cpu_gflops']) > 0
    # Each repetition counts 2 x its slower CPU, so no repetition's figure exceeds 2 x either
    # CPU's rate in it, and the median of them not 2 x either CPU's median (print rounding).
    assert 0 < rec['capacity_gflops'] <= 2 * min(rec['cpu_gflops']) * 1.0001
    # C = A B + C, once untimed and `reps` times: its last element grows with the count, so
    # the multiplications were done (3 + 1 against 1 + 1).
    once = record(run(dgemm_rate, '--n', '200', '--reps', '1'))
    assert rec['check'] == pytest.approx(2 * once['check'], rel=1e-5)


def test_one_cpu_is_the_first_allowed(dgemm_rate):
    cpu = str(sorted(os.sched_getaffinity(0))[-1])
    rec = record(run(dgemm_rate, '--n', '100', '--reps', '1', cpus=cpu))
    assert rec['cpus'] == [int(cpu)] and len(rec['cpu_gflops']) == 1
    assert rec['capacity_gflops'] == pytest.approx(rec['cpu_gflops'][0], rel=1e-3)


def test_more_cpus_than_allowed_is_an_error(dgemm_rate):
    cpu = str(sorted(os.sched_getaffinity(0))[0])
    out = run(dgemm_rate, '--n', '100', '--cpus', '2', cpus=cpu)
    assert out.returncode == 2
    assert '--cpus 2, but this process may use 1 CPUs' in out.stderr
    assert 'DGEMM-RATE' not in out.stdout


@pytest.mark.parametrize('args, message', [
    (['--cpus', '0'], '--cpus needs an integer in 1..256'),
    (['--reps', 'x'], '--reps needs an integer in 1..1000'),
    (['--threads', '2'], "unknown option '--threads'"),
])
def test_bad_arguments_are_named(dgemm_rate, args, message):
    out = run(dgemm_rate, *args)
    assert out.returncode == 2 and message in out.stderr
