"""The failure list that ends a CI log names each failed case, its phase and its reason."""
import json

from testbed import failures


def case(name, result, phase=None, reason=None):
    return {'display_name': name, 'result': result, 'system': 'testbed-local',
            'partition': 'default', 'environ': 'mpich-4_0', 'fail_phase': phase,
            'fail_reason': reason}


def test_only_the_last_runs_failures_are_listed():
    report = {'runs': [
        {'testcases': [case('Su3Run %np=2', 'fail', 'performance', 'old')]},
        {'testcases': [case('Su3Run %np=2', 'fail', 'performance',
                            'performance error: speedup=1.02\nsecond line'),
                       case('HplRun', 'pass'), case('OneSided', 'skip'),
                       case('PvmMatrix', 'abort', 'run', 'aborted due to ForceExitError')]}]}
    got = failures.failed_cases(report)
    assert got == [
        ('testbed-local:default/mpich-4_0', 'Su3Run %np=2', 'performance',
         'performance error: speedup=1.02'),
        ('testbed-local:default/mpich-4_0', 'PvmMatrix', 'run', 'aborted due to ForceExitError')]


def test_an_unreadable_report_is_named_and_counted(tmp_path, capsys):
    good = tmp_path / 'good.json'
    good.write_text(json.dumps({'runs': [{'testcases': [case('A', 'fail', 'sanity', 'x')]}]}))
    bad = tmp_path / 'bad.json'
    bad.write_text('{not json')
    assert failures.main([str(good), str(bad)]) == 0
    out = capsys.readouterr().out
    assert f'{good}: testbed-local:default/mpich-4_0 A [sanity] x' in out
    assert f'{bad}: cannot read the report' in out
    assert 'failed test cases in 2 report(s): 2' in out


def test_the_last_line_counts_the_figures_without_a_reference():
    report = {'runs': [{'testcases': [
        {'name': 'HplRun %grid=1x2', 'perfvalues': {
            's:p:efficiency_N7200': [0.8, 0.81, -0.1, 0.1, 'ratio', 'pass'],
            's:p:gflops_N7200': [40.0, 0, None, None, 'Gflop/s', 'pass']}},
        {'name': 'P2PStack %size_range=quick', 'perfvalues': {
            's:p:latency': [1.2, 0, None, None, 'us', 'pass'],
            's:p:bandwidth': [None, 0, None, None, 'MB/s', None]}},
        {'name': 'KnobReach', 'perfvalues': {}}]}]}
    counts = failures.reference_counts(report)
    assert counts == {'HplRun': [1, 1], 'P2PStack': [0, 1]}
    line = failures.unreferenced_line(counts)
    assert line.startswith('figures asserted against a reference: 1; reported without one: 2 '
                           '(HplRun 1, P2PStack 1)') and '`make references`' in line
    assert 'none went without' in failures.unreferenced_line({'HplRun': [3, 0]})


def test_a_pass_ends_with_the_line_alone(tmp_path, capsys):
    path = tmp_path / 'r.json'
    path.write_text(json.dumps({'runs': [{'testcases': [
        dict(case('A', 'fail', 'sanity', 'x'),
             perfvalues={'s:p:latency': [1.0, 0, None, None, 'us', None]})]}]}))
    assert failures.main(['--unreferenced', str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 1 and out[0].startswith('figures asserted against a reference: 0')
