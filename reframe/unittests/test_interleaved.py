"""Interleaved launches (testbed/interleaved.py), as ContainerTax and BindModel pair them: each
round pairs a launch of one side with the other side's after it; a figure is the median over
the rounds."""
import pytest

from testbed.interleaved import paired


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
