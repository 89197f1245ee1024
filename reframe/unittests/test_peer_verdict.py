"""PeerCompare's verdict at one size and its launch checks (testbed.peer_verdict): agreement
passes, a steady disagreement is a problem, a machine that moved is not held, and a peer on
another library than ours is named."""
from testbed.peer_verdict import judge, launch_problems


def rnd(ours, peer, before=0.045, after=0.045):
    return {'ours': ours, 'peer': peer, 'floor_before': before, 'floor_after': after}


def verdict(rounds, asserted=True):
    return judge('mpich-4.0', 'imb', 8, rounds, ['r'] * len(rounds), asserted,
                 len(rounds), 3, 0.9)


def test_agreement_gives_the_figures_and_no_problem():
    figures, row, why, problem = verdict([rnd(0.30, 0.30)] * 5)
    assert figures['imb_8B_ratio'] == 1.0 and why is None and problem is None
    assert row[:4] == ['mpich-4.0', 'imb', 8, 'mean_us'] and row[-1] is True


def test_a_steady_disagreement_is_a_problem_naming_both_figures():
    _, _, why, problem = verdict([rnd(0.40, 0.30)] * 5)
    assert why is None
    assert 'p2p mean 0.400 us vs IMB t_avg 0.300 us at 8 bytes' in problem, problem


def test_rounds_on_a_moved_floor_are_not_held_and_not_failed():
    _, _, why, problem = verdict([rnd(0.40, 0.30, 0.03, 0.26)] * 5)
    assert problem is None and why.startswith('0 of 5 rounds steady, 3 needed'), why


def test_a_size_not_asserted_is_only_reported():
    figures, row, why, problem = verdict([rnd(0.40, 0.30)] * 5, asserted=False)
    assert figures and why is None and problem is None and row[-1] == ''


def rank(r, cpus, lib='/usr/lib/libmpi.so.12', ldd=()):
    return {'rank': r, 'cpus': cpus, 'mpi_libraries': {'libmpi.so.12': lib},
            'ldd_problems': list(ldd)}


def test_launch_checks_name_shared_cpus_missing_ranks_and_another_library():
    launches = {'p2p-r1': [rank(0, [0]), rank(1, [1])],
                'imb-r1': [rank(0, [0]), rank(1, [0], lib='/opt/other/libmpi.so.12')],
                'netpipe-8-r1': [rank(0, [0])]}
    problems = launch_problems(launches, ['p2p-r1', 'imb-r1', 'netpipe-8-r1'], False, {})
    assert "imb-r1: ranks not each on a CPU of its own: [(0,), (0,)]" in problems
    assert any(p.startswith("imb-r1 rank 1 loads ['/opt/other/libmpi.so.12']") for p in problems)
    assert 'netpipe-8-r1: 1 rank records, expected 2' in problems
    assert not any(p.startswith('p2p-r1') for p in problems)
