"""su3_rmd --alone, the baseline of the test's speedup_busy: every rank evolves the whole
lattice by itself, so each rank's physics is the 1-rank run's, and the record says so. Asserts
no speed. Run: python3 -m pytest -q apps/su3_rmd/test_alone.py (the build: conftest.py)."""
import json
import subprocess

ARGS = ['--lattice', '4x4x4x8', '--trajectories', '3', '--seed', '11']


def records(out, tag):
    return [json.loads(line.split(' ', 1)[1]) for line in out.splitlines()
            if line.startswith(tag + ' ')]


def run(argv):
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)


def test_alone_on_two_ranks_is_the_one_rank_run_on_each(su3, launcher):
    one = run([str(su3), *ARGS])
    both = run([launcher, '-n', '2', str(su3), *ARGS, '--alone'])
    split = run([launcher, '-n', '2', str(su3), *ARGS])
    assert one.returncode == both.returncode == split.returncode == 0, both.stderr
    head = records(both.stdout, 'SU3-RUN')[0]
    assert head['alone'] is True and head['ranks'] == 2
    assert head['grid'] == [1, 1, 1, 1] and head['local_volume'] == 4 * 4 * 4 * 8
    assert records(split.stdout, 'SU3-RUN')[0]['alone'] is False
    plaq = {name: [t['plaquette'] for t in records(out.stdout, 'SU3-TRAJ')]
            for name, out in (('one', one), ('alone', both), ('split', split))}
    assert len(plaq['alone']) == 4 and plaq['alone'] == plaq['one']
    # the split run agrees to rounding (sums in another order), the alone run exactly
    assert all(abs(a - b) <= 1e-10 * abs(a) for a, b in zip(plaq['one'], plaq['split']))
    # no messages between the ranks: only each rank's reductions on itself
    calls = {c['call'] for c in records(both.stdout, 'SU3-MPI')}
    assert not calls & {'MPI_Isend', 'MPI_Ssend', 'MPI_Irecv', 'MPI_Wait', 'MPI_Waitall'}


def test_alone_accepts_a_rank_count_that_is_not_a_power_of_two(su3, launcher):
    out = run([launcher, '-n', '3', str(su3), *ARGS, '--alone'])
    assert out.returncode == 0, out.stderr
    assert records(out.stdout, 'SU3-RUN')[0]['ranks'] == 3
    bad = run([launcher, '-n', '3', str(su3), *ARGS])
    assert bad.returncode != 0 and 'number of ranks 3 is not a power of two' in bad.stderr
