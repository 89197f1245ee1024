"""The knob sweeps' pure logic (reframe/testbed/knob_sweep.py): the size grid, where the
Send-Ssend step sits, and whether a sweep's steps follow its knob. Nothing is timed."""
import math

import pytest

from testbed import knob_sweep as ks


def test_grid_brackets_every_value():
    sizes = ks.grid([4096, 2048, 8192])
    assert sizes == [1024, 1792, 2304, 3584, 4608, 7168, 9216, 16384]
    for v in (2048, 4096, 8192):
        below, above = ks.bracket(sizes, v)
        assert below < v < above and above == v * 9 // 8


def test_step_where_send_rises_faster_than_its_size():
    sizes = [1024, 1792, 2304, 3584, 4608, 7168]
    send = [0.42, 0.51, 0.61, 0.80, 3.74, 3.73]      # a handshake from 4608 on (Open MPI)
    at, jump = ks.step_position(sizes, send)
    assert at == 4608
    assert jump == pytest.approx(math.log(3.74 / 0.80) - math.log(4608 / 3584))


def test_step_where_send_falls_although_the_size_grew():
    # a cheaper path for large messages (single copy) from 18432 on (Open MPI 5, sm)
    at, jump = ks.step_position([9216, 14336, 18432, 32768], [7.11, 10.89, 6.03, 7.20])
    assert at == 18432 and jump == pytest.approx(math.log(6.03 / 10.89))


def test_step_ignores_the_machine_state_and_the_order():
    sizes = [4608, 1024, 3584, 7168]
    send = [3.74, 0.42, 0.80, 3.73]
    assert ks.step_position(sizes, send)[0] == 4608
    # every time 1.7x (a slow state of the VM for the whole launch): the same step
    assert ks.step_position(sizes, [1.7 * t for t in send])[0] == 4608


def test_no_step_within_one_protocol():
    # time grows with size, no faster, never falling: a fixed cost and a part per byte
    sizes = [1024, 2048, 4096, 8192, 16384]
    send = [0.5 + 0.0002 * s for s in sizes]
    assert ks.step_position(sizes, send) == (None, None)
    # a 5 % rise beyond the size's is below MIN_JUMP; with a lower bar of its own it counts
    send = [1.0, 2.0, 4.2, 8.4]
    assert ks.step_position([1, 2, 4, 8], send) == (None, None)
    assert ks.step_position([1, 2, 4, 8], send, min_jump=0.04)[0] == 4


def test_largest_change_wins():
    # a 1.2x rise at 4 and a 2x rise at 16 (sizes doubling, time doubling between them)
    at, _ = ks.step_position([1, 2, 4, 8, 16], [1, 2, 4.8, 9.6, 38.4])
    assert at == 16


def test_step_position_refuses_bad_input():
    with pytest.raises(ValueError, match='one time per size'):
        ks.step_position([1, 2], [1.0])
    with pytest.raises(ValueError, match='not positive'):
        ks.step_position([1, 2], [1.0, 0.0])


def test_trend_follows_the_knob():
    good = [(4096, 4608), (2048, 2304), (8192, 9216)]
    assert ks.trend_problem(good) is None
    # LAM's usysv steps at twice its short limit: it still moves with the knob
    assert ks.trend_problem([(2048, 4608), (4096, 9216), (8192, 18432)]) is None
    stuck = [(2048, 9216), (4096, 9216), (8192, 9216)]
    assert ks.trend_problem(stuck) == ('knob value 4096: the step is at 9216 bytes, not above '
                                       'the step at 9216 bytes of knob value 2048: it does not '
                                       'move with the knob')
    assert 'knob value 4096: no step' in ks.trend_problem([(2048, 2304), (4096, None)])
    assert 'two or more' in ks.trend_problem(good[:1])


def test_points_carry_their_knob_and_bracketing_sizes():
    pts = ks.points()
    labels = [p.label for p in pts]
    assert len(labels) == len(set(labels))
    assert 'lam-7.1/transport=tcp,eager_threshold=2097152' in labels
    assert {p.knobs[0][1] for p in pts if p.sweep == 'rpi'} == set(ks.LAM_RPIS)
    for p in pts:
        if p.sweep != 'rpi':
            below, above = ks.bracket(p.sizes, int(p.swept_value))
            assert below is not None and above is not None
    tcp = [int(p.swept_value) for p in pts if p.sweep == 'rpi_tcp_short']
    assert min(tcp) == 64 * 1024 and max(tcp) == 2 * 1024 * 1024


def curve(sizes, step_at, fixed=0.5, per_byte=0.001, handshake=3.0, common_at=None):
    """Send's times of a protocol pair: a fixed cost and a part per byte, a handshake from
    `step_at` on, and a step every point shares from `common_at` on (a layer below)."""
    return [fixed + per_byte * s + (handshake if s >= step_at else 0.0)
            + (20 * handshake if common_at and s >= common_at else 0.0) for s in sizes]


def test_sweep_steps_follow_the_knob_and_leave_a_common_step_out():
    values = (2048, 4096, 8192)
    sizes = ks.grid(values + (16384,))
    curves = {v: (sizes, curve(sizes, v * 9 // 8, common_at=18432)) for v in values}
    got = ks.sweep_steps(curves)
    assert {v: s for v, (s, _) in got.items()} == {2048: 2304, 4096: 4608, 8192: 9216}
    # each point alone sees the common step as its largest
    assert ks.step_position(*curves[8192])[0] == 18432


def test_sweep_steps_none_when_the_knob_moves_nothing():
    sizes = ks.grid((8192, 65536, 262144))
    curves = {v: (sizes, curve(sizes, 9216)) for v in (8192, 65536, 262144)}
    assert all(s is None for s, _ in ks.sweep_steps(curves).values())


def test_sweep_steps_take_a_fall_but_not_the_size_after_a_rise():
    sizes = [7168, 9216, 14336, 18432, 32768]
    rise = {v: (sizes, curve(sizes, v * 9 // 8)) for v in (8192, 16384)}
    # a third point whose large messages take a cheaper path: its time falls at 18432
    fall = [0.5 + 0.0007 * s if s < 18432 else 0.3 + 0.0003 * s for s in sizes]
    got = ks.sweep_steps({**rise, 20000: (sizes, fall)})
    assert got[8192][0] == 9216 and got[16384][0] == 18432 and got[20000][0] == 18432


def test_sweep_steps_need_three_points():
    with pytest.raises(ValueError, match='three or more'):
        ks.sweep_steps({1: ([1, 2], [1, 2]), 2: ([1, 2], [1, 2])})


def test_points_in_one_state_are_read_against_each_other():
    values = (2048, 4096, 8192)
    sizes = ks.grid(values + (16384,))
    curves = {v: (sizes, curve(sizes, v * 9 // 8, common_at=18432)) for v in values}
    steps, how = ks.trend_steps(curves, {2048: 0.06, 4096: 0.07, 8192: 0.11})
    assert steps == {2048: 2304, 4096: 4608, 8192: 9216} and 'against' in how


def test_points_in_different_states_are_read_each_alone():
    # Send's medians of LAM's eager sweep in make studies QUICK=1 (2026-11-29): the 8192 point's
    # job ran in the VM's fast state, the others in the slow one; read against each other the
    # 4096 point showed no step. Floors as the two states read them that day (0.05-0.07 and
    # 0.24-0.27 us at 8 bytes).
    sizes = [1024, 1792, 2304, 3584, 4608, 7168, 8192, 9216, 14336, 16384, 18432, 32768]
    curves = {
        2048: (sizes, [0.616, 1.077, 1.706, 3.549, 4.266, 4.827, 4.999, 5.229, 5.801, 6.019,
                       6.313, 7.223]),
        4096: (sizes, [0.605, 1.018, 1.331, 2.054, 2.765, 4.179, 4.643, 6.045, 6.92, 7.158,
                       7.201, 8.38]),
        8192: (sizes, [0.226, 0.289, 0.38, 0.537, 0.667, 1.019, 1.318, 1.58, 2.108, 2.345,
                       4.422, 5.244])}
    across = {v: s for v, (s, _) in ks.sweep_steps(curves).items()}
    assert 'knob value 4096: no step' in ks.trend_problem(sorted(across.items()))
    steps, how = ks.trend_steps(curves, {2048: 0.25, 4096: 0.27, 8192: 0.06})
    assert 'alone' in how and '0.06-0.27 us' in how
    assert steps == {2048: 3584, 4096: 9216, 8192: 18432}
    assert ks.trend_problem(sorted(steps.items())) is None
