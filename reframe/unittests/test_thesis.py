"""testbed.thesis: what ThesisOriginal asserts of the two ping-pong programs, and the host
list of the one-remote-shell-per-process start-up."""
import pytest

from testbed.thesis import (HPL_GRID_NS, SU3_CASES, crossing_verdict, overstatement, rsh_hosts,
                            thesis_hpl_dat)


def row(variant, size, mbps, transport='mpi'):
    return {'transport': transport, 'variant': variant, 'size_bytes': size,
            'bandwidth_MBps': mbps}


def test_crossing_shown_at_one_size_is_enough():
    rows = [row('complete', 300, 29.1), row('original', 300, 44.3),
            row('complete', 2_000_000, 118.4), row('original', 2_000_000, 117.8)]
    assert crossing_verdict(rows) is None


def test_crossing_not_shown_fails():
    rows = [row('complete', 300, 29.1), row('original', 300, 30.0)]
    assert 'did not show' in crossing_verdict(rows)
    assert 'both' in crossing_verdict([row('complete', 300, 29.1)])


def test_overstatement_is_a_geometric_mean_of_ratios():
    rows = [row('complete', 1000, 10.0), row('original', 1000, 40.0),
            row('complete', 2000, 10.0), row('original', 2000, 10.0),
            row('copy', 1000, 99.0, transport='memcpy')]
    assert overstatement(rows) == pytest.approx(2.0)
    with pytest.raises(ValueError):
        overstatement([row('complete', 1000, 10.0)])


def test_rsh_hosts_are_distinct_and_local():
    hosts = rsh_hosts(24)
    assert len(set(hosts)) == 24 and all(h.startswith('127.') for h in hosts)
    with pytest.raises(ValueError):
        rsh_hosts(0)


def test_thesis_parameters():
    # Table 6: 16 cases, experiment 5 on 16 processes only; Tables 4-5: N up to 25000 on 4x6
    assert len(SU3_CASES) == 16 and (5, 16) in SU3_CASES and (4, 2) not in SU3_CASES
    assert HPL_GRID_NS['4x6'][-1] == 25000 and HPL_GRID_NS['1x1'] == [2000, 4000, 6000]


def test_hpl_dat_keeps_the_thesis_ns():
    text = thesis_hpl_dat([2000, 4000, 6000], 1, 2)
    assert '2000 4000 6000 Ns' in text and '150          NBs' in text
    assert text.splitlines()[4].startswith('3 ')            # three problem sizes
    with pytest.raises(ValueError, match='N=25000'):
        thesis_hpl_dat([25000], 4, 6, mem_bytes=1e9)
