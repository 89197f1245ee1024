"""testbed.results: the one reading of ReFrame's run reports. A small hand-made report with a
retry gives the rows the module's rule says; rows survive CSV and Parquet; stack_of maps an
environment back to its stack."""
import json
import subprocess
import sys

import pytest

from testbed import registry, results


def pv(value, unit, ref=0, lower=None, upper=None, result='pass'):
    return [value, ref, lower, upper, unit, result]


def case(name, environ, result='pass', **extra):
    return {'name': name, 'display_name': name, 'system': 'testbed-local',
            'partition': 'default', 'environ': environ, 'result': result, **extra}


def retried_report():
    """runs[0]: a build fixture, P2PMatrix (failed its sanity check), Su3Run (passed), a
    skipped case; runs[1]: ReFrame's retry of the failed case alone, which passed."""
    p2p = 'P2PMatrix %mode=Send-Recv/complete %size_range=quick'
    first = case(p2p, 'mpich-4_0', 'fail', fail_phase='sanity', stack_name='mpich-4.0',
                 perfvalues={'testbed-local:default:latency': pv(None, 'us', result=None)},
                 figure_samples={'half_round_trip_us@8': [9.0, 9.0, 9.0]})
    retry = case(p2p, 'mpich-4_0', stack_name='mpich-4.0', library_version='MPICH 4.0.2',
                 stack_configure='--with-device=ch4', knobs={'transport': 'shm'},
                 machine_type='x86_64-2cpu-bare',
                 perfvalues={'testbed-local:default:latency': pv(1.5, 'us', 1.4, -0.1, 0.1),
                             'testbed-local:default:time_over_shm': pv(2.0, 'ratio')},
                 figure_samples={'half_round_trip_us@8': [1.0, 2.0, 1.5],
                                 'half_round_trip_us@1048576': [100.0]})
    su3 = case('Su3Run %ranks=2', 'openmpi-4_1', stack_name='openmpi-4.1',
               perfvalues={'testbed-local:default:s_per_traj': pv(0.5, 's')},
               figure_samples={'s_per_traj': [0.5, 0.51]})
    build = case('P2PBuild ~mpich-4_0', 'mpich-4_0', fixture=True)
    skipped = case('KnobReach', 'lam-7_1', 'skip')
    return {'session_info': {'uuid': 'feedface-0000'},
            'runs': [{'testcases': [build, first, su3, skipped]}, {'testcases': [retry]}]}


def test_a_retried_case_counts_as_its_final_attempt_in_its_first_place():
    cases = results.final_cases(retried_report())
    assert [c['name'].split()[0] for c in cases] == ['P2PBuild', 'P2PMatrix', 'Su3Run',
                                                      'KnobReach']
    assert cases[1]['result'] == 'pass' and cases[1]['library_version'] == 'MPICH 4.0.2'
    assert [(i, j) for i, j, _ in results.located_cases(retried_report())] == \
        [(0, 0), (1, 0), (0, 2), (0, 3)]


def test_rows_of_a_report_with_a_retry():
    rows = results.rows(retried_report())
    assert all(r.session == 'feedface-0000' for r in rows)
    assert not [r for r in rows if r.test == 'P2PBuild']           # fixtures are no rows
    p2p = [r for r in rows if r.test == 'P2PMatrix']
    assert {r.result for r in p2p} == {'pass'} and {r.origin for r in p2p} == \
        {'runs[1].testcases[0]'}
    lat = next(r for r in p2p if r.variable == 'latency')
    assert (lat.value, lat.unit, lat.reference, lat.lower, lat.upper, lat.source) == \
        (1.5, 'us', 1.4, -0.1, 0.1, 'perfvalue')
    assert (lat.stack, lat.library_version, lat.configure, lat.knobs, lat.machine_type) == \
        ('mpich-4.0', 'MPICH 4.0.2', '--with-device=ch4', 'transport=shm', 'x86_64-2cpu-bare')
    assert lat.case == 'P2PMatrix %mode=Send-Recv/complete %size_range=quick'
    eight = next(r for r in p2p if r.source == 'samples' and r.size == 8)
    assert (eight.variable, eight.value, eight.samples, eight.unit) == \
        ('half_round_trip_us', 1.5, (1.0, 2.0, 1.5), 'us')
    assert next(r for r in p2p if r.size == 1048576).value == 100.0
    su3 = [r for r in rows if r.test == 'Su3Run']
    assert {(r.variable, r.size, r.source) for r in su3} == \
        {('s_per_traj', None, 'perfvalue'), ('s_per_traj', None, 'samples')}
    skipped = [r for r in rows if r.test == 'KnobReach']
    assert len(skipped) == 1 and (skipped[0].source, skipped[0].variable, skipped[0].result,
                                  skipped[0].stack) == ('case', '', 'skip', 'lam-7.1')
    with pytest.raises(AttributeError):
        lat.value = 2.0                                                # rows are frozen


def test_reruns_keep_the_last_repetition():
    one = case('Su3Run %ranks=2', 'openmpi-4_1',
               perfvalues={'s:p:s_per_traj': pv(0.5, 's')})
    again = dict(one, perfvalues={'s:p:s_per_traj': pv(0.6, 's')})
    rows = results.rows({'runs': [{'testcases': [one]}, {'testcases': [again]}]})
    assert [r.value for r in rows] == [0.6]


def test_csv_and_parquet_round_trip(tmp_path):
    rows = results.rows(retried_report())
    results.to_csv(rows, tmp_path / 'rows.csv')
    assert results.from_csv(tmp_path / 'rows.csv') == rows
    results.to_parquet(rows, tmp_path / 'rows.parquet')
    assert results.from_parquet(tmp_path / 'rows.parquet') == rows


def test_parquet_without_polars_says_which_package(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, 'polars', None)            # import polars fails
    with pytest.raises(results.ResultsError, match='Parquet needs the Python package polars'):
        results.to_parquet([], tmp_path / 'rows.parquet')


def test_stack_of():
    reg = registry.load()
    for stack in reg.stacks.values():
        assert results.stack_of(stack.environ) == stack.name
    assert results.stack_of('mpich-4_0') == 'mpich-4.0'
    assert results.stack_of('mpich-4_0-ch3sock') == 'mpich-4.0-ch3sock'
    assert results.stack_of('mpich-4_1_3') == 'mpich-4.1.3'        # a sweep's release
    assert results.stack_of(None) is None
    assert results.case_stack({'environ': 'lam-7_1', 'stack_name': 'lam-7.1-src'}) == \
        'lam-7.1-src'


def test_figure_and_key_names():
    assert results.variable('testbed-local:default:latency') == 'latency'
    assert results.parse_key('c:mtu1500_native:time_over_tcp') == \
        ('c', 'mtu1500_native', 'time_over_tcp')
    assert results.split_figure('half_round_trip_us@8') == ('half_round_trip_us', 8)
    assert results.split_figure('time_s@N7200') == ('time_s@N7200', None)
    assert results.median([]) is None and results.median([3.0, 1.0, 2.0, 4.0]) == 2.5


def test_sources_archive_and_bad_input(tmp_path):
    run = tmp_path / '20261128T000000Z-quick-feedface'
    run.mkdir()
    report = retried_report()
    del report['runs'][1]['testcases'][0]['machine_type']
    (run / 'report.json').write_text(json.dumps(report))
    (run / 'machine.json').write_text(json.dumps({'machine_type': 'x86_64-intel-2cpu-vm'}))
    rows = results.read([str(run)])                  # an archived run: its folder
    assert rows and {r.machine_type for r in rows} == {'x86_64-intel-2cpu-vm'}
    bad = tmp_path / 'bad.json'
    bad.write_text('{not json')
    with pytest.raises(results.ResultsError, match='bad.json: not a readable run report'):
        results.load(bad)
    with pytest.raises(results.ResultsError, match='no such report file, and not a session'):
        results.load(tmp_path / 'none.json')
    with pytest.raises(results.ResultsError, match=r'no runs\[-1\].testcases'):
        results.check({'session_info': {}}, 'x.json')


def test_command_line_writes_csv(tmp_path):
    path = tmp_path / 'r.json'
    path.write_text(json.dumps(retried_report()))
    out = tmp_path / 'rows.csv'
    proc = subprocess.run([sys.executable, '-m', 'testbed.results', str(path), '--csv',
                           str(out)], capture_output=True, text=True, timeout=120,
                          cwd=registry.REPO / 'reframe')
    assert proc.returncode == 0, proc.stderr
    assert len(results.from_csv(out)) == len(results.rows(retried_report()))
