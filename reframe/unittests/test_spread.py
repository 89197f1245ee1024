"""testbed.spread on synthetic run reports: the CV over the runs of the median over the modes,
the modes kept as 'low placement' by their own 8-byte floor, and bad input named by file and
field (exit 2). Nothing here is timed."""
import json
import shutil
import statistics
import subprocess

import pytest

from testbed import registry, spread

MODES = ['Send-Recv/complete', 'Ssend-Recv/complete', 'Isend-Irecv/preposted']


def case(mode, latency_8, floor, stack='mpich-4.0', result='pass'):
    return {'name': f'P2PMatrix %mode={mode} %size_range=quick', 'result': result,
            'stack_name': stack, 'size_range': 'quick', 'shm_floor_8B_us': floor,
            'figure_samples': {'half_round_trip_us@8': [latency_8, latency_8 * 1.01],
                               'half_round_trip_us@65536': [5.0, 5.1]}}


def report(cases):
    return {'runs': [{'testcases': cases}]}


def write(tmp_path, reports):
    paths = []
    for i, r in enumerate(reports):
        p = tmp_path / f'r{i}.json'
        p.write_text(json.dumps(r))
        paths.append(str(p))
    return paths


def test_placement_move_is_kept_apart(tmp_path, capsys):
    # run 2's Ssend case sits in the other placement (floor 0.27 us): its latency triples
    levels = [(0.12, 0.04, 0.20, 0.045, 0.15, 0.05), (0.121, 0.041, 0.80, 0.27, 0.149, 0.05),
              (0.119, 0.039, 0.21, 0.05, 0.151, 0.048)]
    runs = [report([case(mode, lat, floor) for mode, lat, floor in
                    zip(MODES, run[0::2], run[1::2])]) for run in levels]
    rows = spread.spread([(str(i), r) for i, r in enumerate(runs)], {8})
    assert len(rows) == 1
    row = rows[0]
    assert row['lowest_floor_8B_us'] == pytest.approx(0.039)
    assert row['all']['modes'] == 3 and row['low']['modes'] == 2
    # every figure is the median of a mode's two samples, x1.005
    want = [statistics.median([0.12, 0.15]), statistics.median([0.121, 0.149]),
            statistics.median([0.119, 0.151])]
    assert row['low']['median_over_modes_us'] == pytest.approx([w * 1.005 for w in want])
    assert row['low']['cv'] < 0.01
    assert row['all']['mode_cv_max'] > 0.5          # the Ssend mode, 0.2 -> 0.8 -> 0.21
    assert spread.main(write(tmp_path, runs) + ['--sizes', '8']) == 0
    out = capsys.readouterr().out
    assert 'mpich-4.0' in out and 'us (microseconds)' in out


def test_failed_cases_and_other_tests_are_left_out():
    runs = [report([case(m, 0.1, 0.04) for m in MODES] +
                   [case('Send-Recv/complete', 9.0, 0.04, result='fail'),
                    {'name': 'HplRun %grid=1x2', 'result': 'pass'}]) for _ in range(2)]
    runs[1]['runs'][0]['testcases'][0]['result'] = 'fail'       # a sanity failure: not counted
    rows = spread.spread([(str(i), r) for i, r in enumerate(runs)], {8})
    assert rows[0]['all']['modes'] == 2


def test_bad_samples_name_file_and_field(tmp_path, capsys):
    bad = report([case(m, 0.1, 0.04) for m in MODES])
    bad['runs'][0]['testcases'][1]['figure_samples']['half_round_trip_us@8'] = [0.1, -1]
    paths = write(tmp_path, [report([case(m, 0.1, 0.04) for m in MODES]), bad])
    assert spread.main(paths) == 2
    err = capsys.readouterr().err
    assert 'r1.json' in err and 'figure_samples.half_round_trip_us@8' in err


def test_needs_two_runs_and_common_figures(tmp_path, capsys):
    one = write(tmp_path, [report([case(m, 0.1, 0.04) for m in MODES])])
    assert spread.main(one) == 2
    assert 'at least two runs' in capsys.readouterr().err
    other = report([case(m, 0.1, 0.04, stack='openmpi-4.1') for m in MODES])
    apart = write(tmp_path, [report([case(m, 0.1, 0.04) for m in MODES]), other])
    assert spread.main(apart) == 2
    assert 'in every run' in capsys.readouterr().err


def test_archive_takes_the_newest_quick_runs(tmp_path):
    for stamp in ('20261124T010000Z', '20261124T030000Z', '20261124T020000Z'):
        d = tmp_path / f'{stamp}-quick-abcd1234'
        d.mkdir()
        (d / 'report.json').write_text('{}')
    (tmp_path / '20261124T040000Z-run-abcd1234').mkdir()            # a full run: not taken
    got = spread.newest_archived(2, archive=tmp_path)
    assert [p.split('/')[-2][:16] for p in got] == ['20261124T020000Z', '20261124T030000Z']
    with pytest.raises(spread.CompareError, match='3 archived quick runs, 4 asked for'):
        spread.newest_archived(4, archive=tmp_path)


def test_make_spread_under_dash(tmp_path):
    dash = shutil.which('dash')
    if not dash:
        pytest.skip('dash is not installed')
    paths = write(tmp_path, [report([case(m, 0.1 + 0.001 * i, 0.04) for m in MODES])
                             for i in range(3)])
    proc = subprocess.run(['make', '-s', '-C', str(registry.REPO), 'spread',
                           f'REPORTS={" ".join(paths)}', 'SIZES=8', f'SHELL={dash}'],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    # the median of (x, 1.01 x) is 1.005 x; CV of 0.1005, 0.1015, 0.1025 is 1.0 %
    assert 'mpich-4.0' in proc.stdout and '0.1005 0.1015 0.1025       1.0%' in proc.stdout


def test_statistic_min_takes_each_modes_least_sample():
    runs = [report([case(m, 0.1 + 0.01 * i, 0.04) for i, m in enumerate(MODES)])
            for _ in range(2)]
    rows = spread.spread([(str(i), r) for i, r in enumerate(runs)], {8}, 'min')
    # samples are (x, 1.01 x): the least is x; the median over the three modes is 0.11
    assert rows[0]['all']['median_over_modes_us'] == pytest.approx([0.11, 0.11])
    assert rows[0]['all']['cv'] == 0.0


def test_geometric_mean_weighs_every_mode():
    # two fast modes and one slow one; in run 2 the slow mode alone is 1.5x slower: the
    # median over the modes (a fast one) stays, the geometric mean moves by 1.5^(1/3)
    runs = [report([case(m, lat, 0.04) for m, lat in zip(MODES, lats)])
            for lats in ((0.1, 0.2, 0.1), (0.1, 0.3, 0.1))]
    row = spread.spread([(str(i), r) for i, r in enumerate(runs)], {8})[0]['all']
    assert row['median_over_modes_us'] == pytest.approx([0.1005, 0.1005])
    assert row['cv'] == 0.0
    want = [statistics.geometric_mean([0.1005, 0.201, 0.1005]),
            statistics.geometric_mean([0.1005, 0.3015, 0.1005])]
    assert row['gmean_over_modes_us'] == pytest.approx(want)
    assert row['gmean_over_modes_us'][1] / row['gmean_over_modes_us'][0] == \
        pytest.approx(1.5 ** (1 / 3))
    assert row['gmean_cv'] == pytest.approx(statistics.stdev(want) / statistics.mean(want))
