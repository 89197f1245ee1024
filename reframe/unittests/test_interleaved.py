"""Interleaved launches (testbed/interleaved.py), as ContainerTax and BindModel pair them: each
round pairs a launch of one side with the other side's after it; a figure is the median over
the rounds."""
import json

import pytest

from testbed.interleaved import InterleavedP2P, paired


def tax(bare, image):
    return paired(bare, image, ('bare', 'image'))


def launch(**times):
    return [{'transport': 'mpi', 'size_bytes': int(s[1:]), 'median_us': t}
            for s, t in times.items()] + [{'transport': 'memcpy', 'size_bytes': 8,
                                           'median_us': 0.01}]


def test_each_round_pairs_its_bare_and_image_launch_and_the_median_is_over_rounds():
    bare = [launch(s8=5.0, s1048576=700.0), launch(s8=10.0, s1048576=1400.0),
            launch(s8=5.0, s1048576=700.0)]
    image = [launch(s8=5.5, s1048576=707.0), launch(s8=11.0, s1048576=1414.0),
             launch(s8=5.0, s1048576=700.0)]
    got = tax(bare, image)
    # a slow minute that took both sides of round 2 leaves the ratio as it is
    assert got[8]['ratios'] == pytest.approx([1.1, 1.1, 1.0])
    assert got[8]['ratio'] == pytest.approx(1.1) and got[8]['extra_us'] == pytest.approx(0.5)
    assert got[1048576]['ratio'] == pytest.approx(1.01)
    assert got[1048576]['extra_us'] == pytest.approx(7.0)


def test_a_size_missing_from_a_round_leaves_that_round_out_and_unpaired_launches_are_refused():
    got = tax([launch(s8=5.0, s1024=6.0), launch(s8=5.0)],
              [launch(s8=6.0, s1024=9.0), launch(s8=6.0)])
    assert got[1024]['ratios'] == [1.5] and got[8]['ratios'] == [1.2, 1.2]
    with pytest.raises(ValueError, match='2 bare and 1 image launches: they pair by round'):
        tax([launch(s8=1.0)] * 2, [launch(s8=1.0)])


def test_each_side_is_its_median_over_rounds_and_the_ratio_is_over_round_ratios():
    """BindModel's table: bound (second) and native (first) times, and their ratio."""
    native = [launch(s8=1.0, s1024=2.0), launch(s8=2.0, s1024=2.0), launch(s8=1.0, s1024=2.0)]
    bound = [launch(s8=1.1, s1024=2.2), launch(s8=2.2, s1024=1.8), launch(s8=1.5)]
    got = paired(native, bound, ('native', 'bound'))
    assert (got[8]['second_us'], got[8]['first_us'], got[8]['ratio']) == \
        pytest.approx((1.5, 1.0, 1.1))
    assert (got[1024]['second_us'], got[1024]['first_us'], got[1024]['ratio']) == \
        pytest.approx((2.0, 2.0, 1.0))
    with pytest.raises(ValueError, match='2 native and 1 bound launches: they pair by round'):
        paired(native[:2], bound[:1], ('native', 'bound'))


class _Rounds:
    """InterleavedP2P's judgement on files of P2P records, without ReFrame."""
    sides = ('bare', 'image')
    families = InterleavedP2P.families
    beyond_max_extra = InterleavedP2P.beyond_max_extra

    family_thresholds = InterleavedP2P.family_thresholds

    def __init__(self, tmp_path, bare, image, max_extra=0.03, max_extra_us_at_8=None):
        self.max_extra, self.max_extra_us_at_8, self.paths = max_extra, max_extra_us_at_8, {}
        for side, launches in (('bare', bare), ('image', image)):
            self.paths[side] = []
            for r, times in enumerate(launches):
                path = tmp_path / f'{side}_{r}.out'
                path.write_text(''.join(
                    'P2P ' + json.dumps({'transport': 'mpi', 'pair': 'Send-Recv',
                                         'variant': 'complete', 'size_bytes': s,
                                         'median_us': t}) + '\n' for s, t in times.items()))
                self.paths[side].append(str(path))

    def side_outputs(self, side):
        return self.paths[side]


def _launches(scale, rounds=12):
    """`rounds` launches whose times wander by round (the machine's state) times `scale`."""
    return [{s: base * scale * (1 + 0.3 * (r % 3)) * (1 + 0.004 * ((r * 7) % 5))
             for s, base in ((8, 0.5), (1024, 1.0), (65536, 8.0), (1048576, 150.0))}
            for r in range(rounds)]


def test_the_tax_fails_when_the_rounds_show_the_image_slower_than_max_extra(tmp_path):
    bare = _launches(1.0)
    assert _Rounds(tmp_path, bare, _launches(1.0)).beyond_max_extra().evaluate() == ''
    slow = _Rounds(tmp_path, bare, _launches(1.10)).beyond_max_extra().evaluate()
    assert slow.startswith('latency: image over bare 1.100 [') and 'above 1.030' in slow
    assert 'bandwidth: image over bare 1.100' in slow
    # a tax below max_extra passes, whatever the interval says
    assert _Rounds(tmp_path, bare, _launches(1.02)).beyond_max_extra().evaluate() == ''


def test_too_few_rounds_to_judge_fail_and_say_how_many_are_needed(tmp_path):
    got = _Rounds(tmp_path, _launches(1.0, 4), _launches(1.0, 4)).beyond_max_extra().evaluate()
    assert 'latency: too few rounds (4, needs 6): set -S _Rounds.rounds to at least 6' in got


def test_an_allowance_at_8_bytes_widens_the_latency_family_only(tmp_path):
    """ContainerTax's targets: 3 % (the bandwidth family), 0.1 us at 8 B (the latency one)."""
    bare = _launches(1.0)                       # 8 B at 0.5-0.81 us: median 0.65 us
    slow = _launches(1.10)                      # +10 %: 0.065 us at the median 8 B time
    got = _Rounds(tmp_path, bare, slow, max_extra_us_at_8=0.1).beyond_max_extra().evaluate()
    assert not got.startswith('latency') and got.startswith('bandwidth: image over bare 1.100')
    assert 'above 1.030' in got
    # past the allowance (0.1 us over 0.65 us: 15.2 %) the latency family fails too
    slower = _launches(1.2)
    got = _Rounds(tmp_path, bare, slower, max_extra_us_at_8=0.1).beyond_max_extra().evaluate()
    assert got.startswith('latency: image over bare 1.200') and 'above 1.152' in got
    # a slow stack's 8 B (0.1 us of 45 us) keeps max_extra: the larger of the two
    big = [{s: t * 60 if s == 8 else t for s, t in r.items()} for r in bare]
    rounds = _Rounds(tmp_path, big, big, max_extra_us_at_8=0.1)
    assert rounds.family_thresholds([{('Send-Recv', 'complete', 8): 45.0}]) == \
        {'latency': 0.03}
