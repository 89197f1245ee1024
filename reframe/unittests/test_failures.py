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
