"""testbed.binding: the placement rule the su3_rmd and HPL tests assert."""
import pytest

from testbed.binding import placement_problem

ALLOWED = [0, 1]


def run(start, self_bound=False, asked=None):
    return {'cpus_start': start, 'self_bound': self_bound,
            'bind_cpus': asked if asked is not None else [-1] * len(start)}


@pytest.mark.parametrize('record, end, message', [
    (run([0, 1]), [0, 1], None),
    (run([1, 0]), [1, 0], None),                             # launcher's choice: any distinct
    (run([0, 1], True, [0, 1]), [0, 1], None),
    (run([0, 0]), [0, 0], 'ranks share CPUs'),
    (run([0, 1]), [1, 0], 'ranks moved'),
    (run([1, 0], True, [1, 0]), [1, 0], 'not on the CPUs asked'),   # rank r on the r-th CPU
    (run([0, 1]), [0], 'different length'),
])
def test_placement(record, end, message):
    problem = placement_problem(record, {'cpus_end': end}, record['self_bound'], ALLOWED)
    assert (problem is None) if message is None else (message in problem)


def test_self_bind_stack_whose_ranks_did_not_pin():
    problem = placement_problem(run([0, 1]), {'cpus_end': [0, 1]}, True, ALLOWED)
    assert 'did not pin' in problem


def test_a_rank_allowed_two_cpus_is_not_bound_even_if_it_stayed():
    # Intel MPI's default pin domain gave a 1-rank job both CPUs of this machine: it stayed
    # on CPU 0 in most runs and moved in one; the record's cpus_allowed shows it every time
    unbound = dict(run([0]), cpus_allowed=[2])
    problem = placement_problem(unbound, {'cpus_end': [0]}, False, ALLOWED)
    assert 'not bound to one CPU each' in problem and '[2]' in problem
    bound = dict(run([0, 1]), cpus_allowed=[1, 1])
    assert placement_problem(bound, {'cpus_end': [0, 1]}, False, ALLOWED) is None
