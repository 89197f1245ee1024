"""The link profiles' rate check (site/cluster/link_rate.py) and the token bucket they get
(site/cluster/cluster.py), without a cluster: the verdicts on given figures, the bucket's rule,
and bad profile fields named."""
import pytest

from testbed_site.cluster import cluster, link_rate


def test_a_stream_at_the_rate_holds():
    ok, line = link_rate.verdict('gige', 1500, 1000, 119.0)
    assert ok and 'link profile gige (MTU 1500)' in line and '119 MB/s' in line
    assert 'declared 1000 Mbit/s (125 MB/s, 120 MB/s of TCP payload at most)' in line
    assert 'holds (95% of the rate)' in line
    # the floor is 90 % of the payload ceiling: 86 % of the wire's rate at MTU 1500
    assert link_rate.verdict('10gige', 1500, 10000, 1080.0)[0]
    assert not link_rate.verdict('10gige', 1500, 10000, 1070.0, capacity_MBps=2200.0)[0]
    assert link_rate.payload_ceiling(10000, 1500) == pytest.approx(1195.5, abs=0.1)
    assert link_rate.payload_ceiling(10000, 9000) == pytest.approx(1240.8, abs=0.1)


def test_a_stream_below_the_floor_fails_naming_profile_seen_and_declared():
    ok, line = link_rate.verdict('10gige', 1500, 10000, 106.0, capacity_MBps=2373.0)
    assert not ok and '\n' not in line
    assert '10gige' in line and '106 MB/s' in line and '10000 Mbit/s' in line
    assert 'below 90% of the payload ceiling' in line and '2373 MB/s' in line
    assert 'the shaping costs the rest' in line


def test_a_machine_too_slow_for_the_rate_is_not_judged_and_says_so():
    ok, line = link_rate.verdict('10gige', 1500, 10000, 900.0, capacity_MBps=1000.0)
    assert ok and 'not judged' in line and "CPUs cannot carry the declared rate" in line
    assert 'bounded by the machine' in line and '\n' not in line
    # without the unshaped figure a miss is a miss
    assert not link_rate.verdict('10gige', 1500, 10000, 900.0)[0]


def test_a_stream_above_the_rate_means_no_shaping():
    ok, line = link_rate.verdict('gige', 1500, 1000, 2800.0)
    assert not ok and 'above it' in line and 'not in force' in line
    # within the margin: the bucket and the clock
    assert link_rate.verdict('gige', 9000, 1000, 127.0)[0]


def test_an_unshaped_profile_is_reported():
    ok, line = link_rate.verdict('native', 1500, None, 2744.0)
    assert ok and 'no rate declared' in line and '2744 MB/s' in line


def test_the_bucket_holds_its_time_at_the_rate_and_one_whole_packet():
    gige = {'rate_mbit': 1000, 'bucket_us': 160, 'gso_max_bytes': 16384}
    assert cluster.bucket_bytes(1500, gige) == 20000          # 160 us at 125 MB/s
    assert cluster.bucket_bytes(9000, gige) == 16384 + 9064   # a whole packet and a frame
    ten = {'rate_mbit': 10000, 'bucket_us': 160, 'gso_max_bytes': 65536}
    assert cluster.bucket_bytes(1500, ten) == 200000
    # without the new fields: two frames, as before
    assert cluster.bucket_bytes(1500, {'rate_mbit': 1000}) == 2 * 1564


def test_the_shipped_profiles_load_and_bad_new_fields_are_named(tmp_path):
    profiles = cluster.load_profiles()
    assert profiles['gige']['gso_max_bytes'] == 16384 and profiles['10gige']['bucket_us'] > 0
    bad = tmp_path / 'links.toml'
    bad.write_text('[x]\nrate_mbit = 1000\ngso_max_bytes = 100000\n')
    with pytest.raises(cluster.ClusterError, match=r'\[x\].gso_max_bytes: 100000 .*65536'):
        cluster.load_profiles(str(bad))
    bad.write_text('[x]\nrate_mbit = 1000\nbucket_us = -1\n')
    with pytest.raises(cluster.ClusterError, match=r'\[x\].bucket_us: -1 is not a positive'):
        cluster.load_profiles(str(bad))
