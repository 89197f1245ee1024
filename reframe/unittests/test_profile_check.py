"""site/cluster/profile_check.py: PVM's routes between the nodes, in the study's direction, and a
shaped link slower than native where it can show."""
from testbed_site.cluster import profile_check


def test_direct_slower_than_the_daemons_on_native_fails_and_gige_is_only_reported():
    failures = []
    lines = profile_check.route_lines({
        ('mtu1500_native', 'inplace'): {'daemon': 7000.0, 'direct': 380.0},
        ('mtu1500_native', 'default'): {'daemon': 300.0, 'direct': 400.0},
        ('mtu1500_gige', 'raw'): {'daemon': 10.0, 'direct': 20.0},
        ('mtu1500_native', 'raw'): {'direct': 20.0},          # one route only: not a row
    }, failures)
    assert len(lines) == 6 and '| mtu1500_native | inplace | 7000 | 380 | 18.42 |' in lines
    assert failures == ["PVM on mtu1500_native, default: the direct route (400 us) is not "
                        "faster than the daemons' (300 us) at 1 MiB"]


def test_no_pvm_case_adds_nothing():
    assert profile_check.route_lines({}, []) == []


def test_a_route_whose_tcp_baseline_moved_is_reported_not_held():
    """The raw TCP timed beside the direct case ran 10x slower than beside the daemons' (the
    host stalled during that case): the direction is not judged, and the row says why."""
    failures = []
    lines = profile_check.route_lines({('mtu1500_native', 'default-double'): {
        'daemon': 30972.0, 'direct': 71245.0, 'daemon_tcp': 590.0, 'direct_tcp': 6134.0}},
        failures)
    assert failures == []
    assert any('not held: raw TCP beside the two cases 590 and 6134 us' in x for x in lines)
    held = {'daemon': 30972.0, 'direct': 71245.0, 'daemon_tcp': 590.0, 'direct_tcp': 610.0}
    profile_check.route_lines({('mtu1500_native', 'default-double'): held}, failures)
    assert len(failures) == 1


def test_every_size_gets_its_ratio_to_busy_poll_tcp():
    row = lambda r: {'time_over_tcp_poll': r}           # noqa: E731 (a p2p_sizes.csv row)
    lines = profile_check.per_size_lines({
        ('mtu1500_gige', 'mpich-4.0'): {8: row('0.98'), 65536: row('1.10'), 1048576: row('1.35')},
        ('mtu1500_gige', 'openmpi-4.1'): {8: row('1.2'), 65536: row(''), 1048576: row('1.0')}})
    assert '| mtu1500_gige | mpich-4.0 | 0.980 | 1.100 | 1.350 |' in lines
    assert '| mtu1500_gige | openmpi-4.1 | 1.200 | n/a | 1.000 |' in lines
    assert '1048576 B: MPI over busy-poll TCP' in lines[1]


def test_the_shaping_is_judged_only_where_native_outran_the_link():
    assert profile_check.shaping_verdict(118, 2800, 1000) == 'ok'          # gige
    assert profile_check.shaping_verdict(2900, 2800, 1000).startswith('FAIL')
    # 10gige (1250 MB/s) over a native path that carried 1160 MB/s: nothing to see
    assert profile_check.shaping_verdict(1189, 1160, 10000).startswith('not judged')
    assert profile_check.shaping_verdict(1300, 1400, None) == 'ok'         # no rate declared
