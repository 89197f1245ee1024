"""The summary sets two builds of one library version side by side (ch3:sock over ch4)."""
from testbed import summary


def case(stack, latency, samples, configure):
    return {'name': 'P2PMatrix %mode=Send-Recv/complete %size_range=quick', 'environ': stack,
            'stack_name': stack, 'result': 'pass', 'mode': 'Send-Recv/complete',
            'size_range': 'quick', 'library_version': 'MPICH Version: 4.0.2',
            'stack_origin': 'source' if configure else 'debian', 'stack_configure': configure,
            'perfvalues': {'testbed-local:default:latency': [latency, None, None, None, 'us',
                                                             'pass']},
            'figure_samples': {'half_round_trip_us@8': samples,
                               'half_round_trip_us@1024': [99.0]}}


def test_same_version_two_builds_side_by_side_with_the_ratio():
    report = {'runs': [{'testcases': [
        case('mpich-4.0', 2.0, [1.0, 3.0, 2.0], ''),
        case('mpich-4.0-ch3sock', 10.0, [9.0, 10.0, 11.0, 100.0], '--with-device=ch3:sock')]}]}
    text, _ = summary.render(report)
    assert '| mpich-4.0-ch3sock | MPICH Version: 4.0.2 | source | --with-device=ch3:sock |' \
        in text
    assert 'two builds: mpich-4.0-ch3sock over mpich-4.0' in text
    assert '| Send-Recv/complete quick | latency (us) | 2 | 10 | 5.000 |' in text
    # per-size medians at 8 bytes only (1024 is not among the sizes set side by side)
    assert '| half round trip at 8 bytes (us, median) | 2 | 10.5 | 5.250 |' in text
    assert 'at 1,024 bytes' not in text


def test_different_versions_are_not_compared():
    other = case('mpich-5.0', 1.0, [1.0], '')
    other['library_version'] = 'MPICH Version: 5.0.2'
    report = {'runs': [{'testcases': [case('mpich-4.0', 2.0, [2.0], ''), other]}]}
    assert 'two builds' not in summary.render(report)[0]


def test_quick_range_tables_per_size_from_the_kept_samples():
    """The quick pass's range (8 B .. 1 MiB): the summary's tables give the 8-byte half round
    trip and the 1 MiB bandwidth of each mode, the medians of the samples the case kept."""
    tc = case('mpich-4.0', 2.0, [0.30, 0.25, 0.27], '')
    tc['figure_samples']['half_round_trip_us@1048576'] = [100.0, 80.0, 90.0]
    text, _ = summary.render({'runs': [{'testcases': [tc]}]})
    eight = text.split('### Half round trip at 8 bytes')[1].split('###')[0]
    assert '| Send-Recv/complete | 0.270 |' in eight
    mib = text.split('### Bandwidth at 1,048,576 bytes')[1].split('###')[0]
    assert f'| Send-Recv/complete | {1048576 / 90.0:,.0f} |' in mib      # bytes/us = MB/s


def test_shm_floor_of_the_same_jobs_beside_the_8_byte_latency():
    """The 8-byte shared-memory floor each quick case measured goes in a table of its own, so
    that a reader sees which host placement an 8-byte latency was measured in; no floor, no
    row."""
    tc = case('mpich-4.0', 2.0, [0.12], '')
    tc['shm_floor_8B_us'] = 0.0451
    text, _ = summary.render({'runs': [{'testcases': [tc]}]})
    floor = text.split('### Shared-memory floor at 8 bytes')[1].split('###')[0]
    assert '| Send-Recv/complete | 0.045 |' in floor
    bare = summary.render({'runs': [{'testcases': [case('mpich-4.0', 2.0, [0.12], '')]}]})[0]
    assert 'Shared-memory floor at 8 bytes' not in bare
