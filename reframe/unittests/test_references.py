"""Reference files: bad files are refused with file, line and field; derivation follows the rule."""
import json

import pytest

from testbed import references

HEADER = 'system,partition,stack,test,case,variable,value,lower,upper,unit,runs\n'
ROW = 'testbed-local,default,mpich-4.0,P2PMatrix,Send-Recv/complete/small,latency,{v},-0.3,{u},us,s1\n'


def write(tmp_path, text):
    path = tmp_path / 'p2p.csv'
    path.write_text(text)
    return path


def test_valid_file_gives_reframe_references(tmp_path):
    path = write(tmp_path, '# comment\n' + HEADER + ROW.format(v='1.5', u='0.3'))
    ref, missing = references.for_test(path, 'testbed-local', 'default', 'mpich-4.0',
                                       'P2PMatrix', 'Send-Recv/complete/small',
                                       ['latency', 'bandwidth'])
    assert ref == {'testbed-local:default': {'latency': (1.5, -0.3, 0.3, 'us')}}
    assert missing == ['bandwidth']


@pytest.mark.parametrize('text, where', [
    (HEADER + ROW.format(v='fast', u='0.3'), "line 2: field value: 'fast' is not a number"),
    (HEADER + ROW.format(v='1.5', u='-0.3'), 'line 2: field upper: -0.3 is negative'),
    (HEADER + ROW.format(v='-1', u='0.3'), 'line 2: field value: -1.0 is not positive'),
    (HEADER + ROW.format(v='1.5', u='0.3').replace(',s1', ''), 'line 2: 10 fields, expected 11'),
    (HEADER.replace('value', 'val') + ROW.format(v='1', u='1'), 'line 1: header is'),
    (HEADER + ROW.format(v='1', u='1') * 2, 'line 3: duplicate row'),
    (HEADER + ROW.format(v='nan', u='1'), "field value: 'nan' is not finite"),
    ('', 'no header line'),
])
def test_malformed_file_names_file_line_and_field(tmp_path, text, where):
    path = write(tmp_path, text)
    with pytest.raises(references.ReferenceError) as err:
        references.load(path)
    assert str(err.value).startswith(f'{path}: ') and where in str(err.value)


def fake_report(tmp_path, name, uuid, latency):
    report = {'session_info': {'uuid': uuid}, 'runs': [{'testcases': [{
        'name': 'P2PMatrix %mode=Send-Recv/complete %size_range=small', 'environ': 'mpich-4_0',
        'stack_name': 'mpich-4.0', 'reference_case': 'Send-Recv/complete/small',
        'reference_file': 'p2p.csv',
        'perfvalues': {'testbed-local:default:latency': [latency, 0, None, None, 'us', 'pass']},
    }]}]}
    path = tmp_path / name
    path.write_text(json.dumps(report))
    return path


def test_derive_takes_median_and_k_times_the_larger_spread(tmp_path):
    reports = [fake_report(tmp_path, f'r{i}.json', f's{i}', lat)
               for i, lat in enumerate([1.0, 1.1, 1.2])]
    (row,) = references.derive(reports, k=3)
    assert row['stack'] == 'mpich-4.0' and row['test'] == 'P2PMatrix'
    assert float(row['value']) == pytest.approx(1.1)
    # between runs: (1.2 - 1.0) / 1.1 = 0.1818; pooled p90 of |v / 1.1 - 1| = 0.0909
    assert float(row['upper']) == pytest.approx(0.545, abs=1e-3)
    assert float(row['lower']) == pytest.approx(-0.545, abs=1e-3)
    assert row['runs'] == 's0 s1 s2' and row['file'] == 'p2p.csv'
    out = tmp_path / 'refs.csv'
    references.write(out, [row])
    ((key, ref),) = references.load(out).items()
    assert key[:3] == ('testbed-local', 'default', 'mpich-4.0') and ref.value == 1.1


def test_pooled_noise_widens_a_figure_whose_runs_agreed(tmp_path):
    def report(name, uuid, a, b):
        tcs = [{'name': f'P2PMatrix %case={case}', 'environ': 'e', 'stack_name': 's', 'reference_file': 'f',
                'reference_case': case,
                'perfvalues': {'sys:part:latency': [v, 0, None, None, 'us', 'pass']}}
               for case, v in (('quiet', a), ('noisy', b))]
        path = tmp_path / name
        path.write_text(json.dumps({'session_info': {'uuid': uuid},
                                    'runs': [{'testcases': tcs}]}))
        return path
    reports = [report('a.json', 'a', 1.0, 1.0), report('b.json', 'b', 1.0, 2.0),
               report('c.json', 'c', 1.0, 1.0)]
    rows = {r['case']: r for r in references.derive(reports, k=3)}
    # 'quiet' agreed exactly, but the same stack and test's 'noisy' case deviated by 100 %:
    # the pooled 90th percentile (1.0) gives both a tolerance of 3.0 (lower capped at -0.99).
    assert float(rows['quiet']['upper']) == pytest.approx(3.0)
    assert float(rows['quiet']['lower']) == pytest.approx(-0.99)


def test_derive_refuses_a_single_run(tmp_path):
    with pytest.raises(references.ReferenceError, match='at least 2 run reports'):
        references.derive([fake_report(tmp_path, 'r.json', 'only', 2.0)])
