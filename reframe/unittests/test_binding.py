"""testbed.binding: the placement rule every timed test asserts, and the launch check built on it."""
import json

import pytest

from testbed import binding
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


def _launch_output(tmp_path, run=True, end=True, host_rank1='n1'):
    lines = []
    if run:
        lines.append('P2P-RUN ' + json.dumps({'host': 'n1', 'host_rank1': host_rank1,
                                              'cpus_start': [0, 1], 'cpus_allowed': [1, 1]}))
    if end:
        lines.append('P2P-END ' + json.dumps({'cpus_end': [0, 1]}))
    path = tmp_path / 'p2p.out'
    path.write_text('\n'.join(lines) + '\n')
    return str(path)


def test_a_launch_without_its_end_record_was_cut_short(tmp_path):
    for run, end in ((True, False), (False, True)):
        why = binding.launch_placement_problem(_launch_output(tmp_path, run, end))
        assert why == 'no P2P-RUN or P2P-END record: the run was cut short'


def test_a_launch_asked_one_rank_per_node_must_span_two_hosts(tmp_path):
    path = _launch_output(tmp_path)
    assert binding.launch_placement_problem(path) is None
    assert binding.launch_placement_problem(path, one_per_node=True) == \
        'both ranks ran on n1: one per node was asked for'
    assert binding.launch_placement_problem(_launch_output(tmp_path, host_rank1='n2'),
                                            one_per_node=True) is None
