"""PeerCompare's round-by-round verdict (testbed.peer_table.paired_rounds): a peer launch is
compared with our launch just before it, only when the machine did not move across it."""
import pytest

from testbed.peer_table import STEADY, paired_rounds


def rnd(ours, peer, before=0.045, after=0.045):
    return {'ours': ours, 'peer': peer, 'floor_before': before, 'floor_after': after}


def test_a_round_that_straddles_a_move_is_left_out():
    # round 2: the vCPUs moved (floor 0.045 -> 0.26 us) while the peer ran, and the peer alone
    # caught the slow placement; the verdict comes from the other rounds
    rounds = [rnd(0.12, 0.12), rnd(0.12, 0.50, 0.045, 0.26), rnd(0.125, 0.12), rnd(0.118, 0.12)]
    got = paired_rounds(rounds, 1.1)
    assert got['steady_rounds'] == 3
    assert got['ratio'] == pytest.approx(1.0)
    assert got['agrees']


def test_every_steady_round_slower_fails_once_there_are_enough_rounds():
    three = paired_rounds([rnd(0.30, 0.25), rnd(0.31, 0.25), rnd(0.29, 0.25)], 1.1)
    assert three['ratio'] == pytest.approx(1.2)
    # three rounds hold the median between their least and largest with 75 % only
    assert not three['agrees'] and not three['disagrees'] and three['interval'] is None
    five = paired_rounds([rnd(0.30, 0.25), rnd(0.31, 0.25), rnd(0.29, 0.25), rnd(0.30, 0.25),
                          rnd(0.32, 0.25)], 1.1)
    assert five['disagrees'] and five['interval'] == pytest.approx((1.16, 1.28))


def test_median_ignores_one_round_hit_by_a_preemption():
    got = paired_rounds([rnd(1.0, 1.0), rnd(1.0, 1.9), rnd(1.02, 1.0), rnd(0.98, 1.0),
                         rnd(1.0, 1.0)], 1.1)
    assert got['steady_rounds'] == 5 and got['agrees']


def test_rounding_of_the_printed_peer_is_allowed_and_no_more():
    # IMB prints 0.11 for anything in [0.105, 0.115): ours 0.124 is 1.127 x 0.11 but 1.078 x
    # 0.115, so it may agree; ours 0.13 is 1.13 x even the top of the interval and may not
    near = paired_rounds([rnd(0.124, 0.11)] * 3, 1.1, half_unit_us=0.005)
    assert near['ratio'] == pytest.approx(0.124 / 0.11)
    assert near['judged_ratio'] == pytest.approx(0.124 / 0.115)
    assert near['agrees']
    far = paired_rounds([rnd(0.13, 0.11)] * 3, 1.1, half_unit_us=0.005)
    assert not far['agrees']
    assert not paired_rounds([rnd(0.124, 0.11)] * 3, 1.1)['agrees']


def test_no_steady_round_or_no_floor_gives_no_verdict():
    moved = [rnd(1.0, 1.0, 0.045, 0.045 * STEADY * 1.01)] * 3
    assert paired_rounds(moved, 1.1) is None
    assert paired_rounds([rnd(1.0, 1.0, None, 0.045)], 1.1) is None


def test_a_verdict_does_not_hold_where_its_rounds_straddle_the_band():
    """One launch draws a state of its own: a peer at 0.19 us in two rounds and 0.5 us in three
    says how many draws it got, not how it compares; neither verdict then."""
    drawn = paired_rounds([rnd(0.50, 0.52), rnd(0.47, 0.20), rnd(0.60, 0.50), rnd(0.52, 0.19),
                           rnd(0.49, 0.50)], 1.1)
    assert drawn['judged_ratio'] == pytest.approx(1.2)
    assert not drawn['agrees'] and not drawn['disagrees'] and drawn['spread'] > 2.5
    close = paired_rounds([rnd(1.0, 1.0), rnd(1.1, 1.05), rnd(0.95, 1.0)], 1.1)
    assert close['agrees'] and not close['disagrees']
    apart = paired_rounds([rnd(6.0, 8.0), rnd(6.2, 7.9), rnd(5.8, 8.1), rnd(6.1, 8.0),
                           rnd(6.0, 7.7)], 1.1)
    assert apart['disagrees']       # a steady disagreement stays a failure


def test_a_slowdown_that_scatters_the_rounds_still_fails():
    """Ours slowed 1.3x by the shim (TESTBED_INJECT_SCOPE=run, 2026-11-28 09:03 UTC): intel's
    8-byte rounds read 1.41-2.28x IMB, as scattered as a draw, every one beyond the band."""
    ratios = [1.60, 1.85, 2.18, 1.41, 1.56, 1.76, 2.28, 2.20]
    got = paired_rounds([rnd(r, 1.0) for r in ratios], 1.1)
    assert got['spread'] > 1.6 and got['disagrees'] and got['interval'][0] == pytest.approx(1.56)
