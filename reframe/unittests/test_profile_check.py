"""site/cluster/profile_check.py: PVM's routes between the nodes, in the study's direction."""
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
