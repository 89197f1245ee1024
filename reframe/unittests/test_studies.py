"""The studies beside the originals (testbed/studies.py, reframe/studies/*.toml): the shipped
study files load; a bad entry stops the load with one line naming the file, the field and the
fix; on small synthetic reports each finding gets the figure here, its direction's verdict, or
why it is not there, and the command exits 1 when an asserted direction fails."""
import json
from pathlib import Path

import pytest

from testbed import studies
from testbed.report import studies as report_studies
from testbed.report.data import from_report

GOOD = '''
[study]
id = "009"
authors = "A. Author"
title = "A study"
seed = "009_x.txt"
setting = "two PCs"

[[finding]]
id = "pvm-direct"
claim = "Direct is faster than through the daemons."
source = "section 4.5"
original = [ { what = "daemons", value = 90, unit = "Mbps" },
             { what = "direct", value = 330, unit = "Mbps" } ]
runs_here = true
[finding.here]
direction = "pvm-direct"
[finding.here.figure]
test = "PvmMatrix"
variable = "bandwidth_send-recv_default"
case = "%route=direct"
[finding.here.over]
case = "%route=daemon"

[[finding]]
id = "loggp"
claim = "g falls with q."
source = "figure 4"
original = [ { what = "stated without a figure" } ]
runs_here = true
[finding.here.figure]
test = "NoSuchTest"
variable = "g"

[[finding]]
id = "startup"
claim = "Start-up grows with np."
source = "table 9"
original = [ { what = "range", value = [0.23, 4.79], unit = "s" } ]
runs_here = true
[finding.here]
direction = "startup-np"

[[finding]]
id = "myrinet"
claim = "GM reaches 800 Mbps."
source = "section 5"
original = [ { what = "raw GM", value = 800, unit = "Mbps" } ]
runs_here = false
cannot_run = "Myrinet hardware and GM"
'''


def write(tmp_path, text, name='009.toml'):
    folder = tmp_path / 'studies'
    folder.mkdir(exist_ok=True)
    (folder / name).write_text(text)
    return folder


def pvm_case(route, default_mbs):
    return {'name': f'PvmMatrix %route={route} %size_range=quick %pack=byte',
            'environ': 'pvm-3_4', 'stack_name': 'pvm-3.4', 'result': 'pass',
            'system': 'testbed-local', 'partition': 'default', 'route': route, 'pack': 'byte',
            'size_range': 'quick', 'perfvalues': {
                's:p:bandwidth_send-recv_default': [default_mbs, 0, None, None, 'MB/s', None]}}


def startup_case(np2, np4):
    return {'name': 'StartupTime', 'environ': 'mpich-4_0', 'stack_name': 'mpich-4.0',
            'result': 'pass', 'system': 'testbed-local', 'partition': 'default',
            'perfvalues': {'s:p:first_np2': [np2, 0, None, None, 's', None],
                           's:p:first_np4': [np4, 0, None, None, 's', None]}}


def report_file(tmp_path, cases, name='r.json'):
    path = tmp_path / name
    path.write_text(json.dumps({'session_info': {'uuid': 'abcdef12-0000', 'time_elapsed': 12.0,
                                                 'time_start': '20261129T080000+0000'},
                                'runs': [{'testcases': cases}]}))
    return path


def test_the_shipped_studies_load_and_name_what_cannot_run():
    loaded = studies.load_studies()
    assert [s.id for s in loaded] == ['001', '002', '003', '004']
    for study in loaded:
        assert study.findings
        for f in study.findings:
            assert f.runs_here or f.cannot_run
            assert f.figure or f.direction or not f.runs_here
    gone = ' '.join(f.cannot_run for s in loaded for f in s.findings if not f.runs_here)
    for word in ('Myrinet', 'VIA', 'Quadrics', 'GM', 'Giganet'):
        assert word in gone


@pytest.mark.parametrize('old, new, field', [
    ('claim = "g falls with q."\n', '', 'finding[1] (loggp).claim: missing'),
    ('unit = "Mbps" },\n             { what = "direct"',
     'unit = "furlongs" },\n             { what = "direct"', '.unit: \'furlongs\''),
    ('direction = "pvm-direct"', 'direction = "pvm-faster"', 'here.direction'),
    ('cannot_run = "Myrinet hardware and GM"', '', 'finding[3] (myrinet).cannot_run: missing'),
    ('id = "009"', 'id = "010"', 'study.id'),
    ('case = "%route=daemon"', 'case = "%route=(daemon"', 'here.over.case'),
    ('value = [0.23, 4.79]', 'value = [4.79, 0.23]', '.value'),
    ('id = "loggp"', 'id = "startup"', "finding id 'startup': given twice"),
    ('runs_here = false', 'runs_here = "no"', 'finding[3] (myrinet).runs_here'),
    ('[finding.here.over]\ncase = "%route=daemon"', '[finding.here.over]\ncase = "%route=direct"',
     'the same figure as the numerator'),
    ('title = "A study"', 'title = "A study', 'not TOML'),
    ('source = "section 5"', 'source = "section 5"\nsorce = "x"', "unknown field 'sorce'"),
])
def test_a_bad_entry_is_named_in_one_line(tmp_path, old, new, field):
    assert old in GOOD
    folder = write(tmp_path, GOOD.replace(old, new))
    with pytest.raises(studies.StudyError) as err:
        studies.load_studies(folder)
    text = str(err.value)
    assert text.startswith(str(folder / '009.toml')) and field in text and '\n' not in text


def test_findings_beside_a_synthetic_report(tmp_path):
    folder = write(tmp_path, GOOD)
    path = report_file(tmp_path, [pvm_case('direct', 400.0), pvm_case('daemon', 100.0),
                                  startup_case(0.06, 0.13)])
    out = tmp_path / 'out'
    assert studies.main([str(path), '--studies', str(folder), '--out', str(out)]) == 0
    text = (out / '009.md').read_text()
    status = {o.finding.id: o for o in studies.evaluate(
        studies.load_studies(folder), studies.read_reports([str(path)]))}
    assert status['pvm-direct'].status == 'passed'
    assert [round(h.value, 3) for h in status['pvm-direct'].here] == [4.0]
    assert status['loggp'].status == 'not run' and status['loggp'].why == \
        'no such test (NoSuchTest)'
    assert status['startup'].status == 'passed'
    assert status['myrinet'].status == 'cannot run here'
    assert '| pvm-direct | 90 Mbps; 330 Mbps | 4 x (pvm-3.4' in text
    assert 'not run: no such test (NoSuchTest)' in text
    assert '## Cannot run here' in text and 'Myrinet hardware and GM' in text
    assert 'ReFrame\'s run time 12 s' in text


def test_a_failed_direction_fails_the_command(tmp_path, capsys):
    folder = write(tmp_path, GOOD)
    path = report_file(tmp_path, [pvm_case('direct', 80.0), pvm_case('daemon', 100.0),
                                  startup_case(0.06, 0.13)])
    assert studies.main([str(path), '--studies', str(folder), '--out',
                         str(tmp_path / 'out')]) == 1
    assert 'FAIL 009 pvm-direct pvm-direct' in capsys.readouterr().out


def test_a_direction_without_figures_is_not_counted_as_passed(tmp_path):
    folder = write(tmp_path, GOOD)
    path = report_file(tmp_path, [startup_case(0.06, 0.13)])
    got = {o.finding.id: o for o in studies.evaluate(studies.load_studies(folder),
                                                      studies.read_reports([str(path)]))}
    assert got['pvm-direct'].status == 'not run'
    assert 'no case of PvmMatrix' in got['pvm-direct'].why


def test_bad_input_exits_2(tmp_path, capsys):
    folder = write(tmp_path, GOOD)
    bad = tmp_path / 'bad.json'
    bad.write_text('{')
    assert studies.main([str(bad), '--studies', str(folder)]) == 2
    assert studies.main([str(tmp_path / 'gone.json'), '--studies', str(folder)]) == 2
    broken = write(tmp_path, GOOD.replace('source = "table 9"\n', ''), '009.toml')
    path = report_file(tmp_path, [])
    assert studies.main([str(path), '--studies', str(broken)]) == 2
    err = capsys.readouterr().err
    assert 'finding[2] (startup).source: missing' in err


def test_the_report_section(tmp_path):
    folder = write(tmp_path, GOOD)
    path = report_file(tmp_path, [pvm_case('direct', 400.0), pvm_case('daemon', 100.0)])
    run = from_report(json.loads(path.read_text()), Path(path))
    html = ''.join(report_studies.section([run], folder))
    assert 'id="study-009"' in html and 'Myrinet hardware and GM' in html
    assert 'asserted (pvm-direct): passed, 1 of 1 held' in html


TREND = '''
[study]
id = "009"
authors = "A. Author"
title = "A study"
seed = "009_x.txt"
setting = "two PCs"

[[finding]]
id = "dip"
claim = "The dip moves with the threshold."
source = "figure 1"
original = [ { what = "threshold", value = 128, unit = "kB" } ]
runs_here = true
[finding.here.asserted_by]
test = "KnobSweepTrend"
case = "eager"

[[finding]]
id = "stream"
claim = "A stream carries more than a ping-pong."
source = "section 4.2"
original = [ { what = "stream", value = 3.0, unit = "Gbps" } ]
runs_here = true
[finding.here.figure]
test = "Streams"
variable = "stream_1MiB"
[finding.here.over]
test = "P2PMatrix"
variable = "half_round_trip_us"
size = 1048576
time_as_bandwidth = true
'''


def trend_case(sweep, result, phase=None, reason=''):
    return {'name': f'KnobSweepTrend %sweep=lam-7.1/{sweep}', 'environ': 'lam-7_1',
            'stack_name': 'lam-7.1', 'result': result, 'fail_phase': phase,
            'fail_reason': reason, 'system': 'testbed-local', 'partition': 'default'}


def test_a_finding_asserted_by_a_tests_own_sanity(tmp_path):
    folder = write(tmp_path, TREND)
    stream = {'name': 'Streams', 'environ': 'mpich-4_0', 'stack_name': 'mpich-4.0',
              'result': 'pass', 'system': 'testbed-local', 'partition': 'default',
              'perfvalues': {'s:p:stream_1MiB': [10000.0, 0, None, None, 'MB/s', None]}}
    pingpong = {'name': 'P2PMatrix %mode=Send-Recv/complete %size_range=quick',
                'environ': 'mpich-4_0', 'stack_name': 'mpich-4.0', 'result': 'pass',
                'system': 'testbed-local', 'partition': 'default',
                'figure_samples': {'half_round_trip_us@1048576': [200.0, 210.0, 220.0]}}

    def outcomes(cases):
        path = report_file(tmp_path, cases)
        return {o.finding.id: o for o in studies.evaluate(
            studies.load_studies(folder), studies.read_reports([str(path)]),
            tests={'KnobSweepTrend', 'Streams', 'P2PMatrix'})}
    got = outcomes([trend_case('eager_threshold', 'pass'), trend_case('rpi', 'fail', 'sanity'),
                    trend_case('eager_threshold2', 'skip'), stream, pingpong])
    assert got['dip'].status == 'passed' and len(got['dip'].checks) == 1
    # 1 MiB in a 210 us half round trip is 4993 MB/s: the stream carries 2.0x
    assert [round(h.value, 2) for h in got['stream'].here] == [2.0]
    got = outcomes([trend_case('eager_threshold', 'fail', 'sanity', 'step at 4096, not 8192')])
    assert got['dip'].status == 'FAILED'
    assert 'its sanity failed: step at 4096' in got['dip'].checks[0]['text']
    # a case stopped before its sanity (or skipped) judged nothing
    got = outcomes([trend_case('eager_threshold', 'fail', 'run'),
                    trend_case('eager_threshold', 'skip')])
    assert got['dip'].status == 'not run'
