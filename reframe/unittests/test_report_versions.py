"""The report's version series from the results storage, without being handed files: the stored
sessions that ran releases site/versions.toml lists, read read-only; and the configure flags of
a stack built here in every figure's stamp and in the summary."""
import hashlib
import json

from testbed.report import __main__ as report_main
from test_compare_sessions import stored
from test_report import synthetic

RENAME = {'mpich-4.1.3': 'mpich-4.1.3', 'mpich-4.2.0': 'mpich-4.2.3'}   # both in versions.toml


def sweep_session(tmp_path):
    report = json.loads(synthetic(tmp_path).read_text())
    cases = [tc for tc in report['runs'][0]['testcases'] if tc['stack_name'] in RENAME]
    for tc in cases:
        tc['stack_name'] = RENAME[tc['stack_name']]
        tc['environ'] = tc['stack_name'].replace('.', '_')
    report['runs'][0]['testcases'] = cases
    report['session_info'].update(uuid='5eeded00-0000-4000-8000-000000000002',
                                  profile='sweep-mpich')
    return report


def test_the_series_comes_from_the_storage(tmp_path, monkeypatch, capsys):
    db = tmp_path / 'sessions.db'
    stored(db, '5eeded00-0000-4000-8000-000000000002', sweep_session(tmp_path))
    monkeypatch.setenv('TESTBED_RESULTS_DB', str(db))
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    quick = tmp_path / 'quick.json'                      # a report with no release in it
    quick.write_text(json.dumps({'session_info': {'uuid': 'q'}, 'runs': [{'testcases': []}]}))
    assert report_main.main([str(quick), '--out', str(tmp_path / 'out')]) == 0
    page = (tmp_path / 'out' / 'series.html').read_text()
    assert 'Also from the results storage (read-only), 1 stored session(s)' in page
    assert 'id="series-mpich-p2p-lat"' in page and '5eeded00' in page
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before
    # --no-stored: the files given only, no series
    assert report_main.main([str(quick), '--out', str(tmp_path / 'o2'), '--no-stored']) == 0
    assert 'no version series' in (tmp_path / 'o2' / 'series.html').read_text()


def test_a_damaged_storage_is_named(tmp_path, monkeypatch, capsys):
    db = tmp_path / 'sessions.db'
    db.write_bytes(b'not a database, not at all' * 10)
    monkeypatch.setenv('TESTBED_RESULTS_DB', str(db))
    quick = tmp_path / 'quick.json'
    quick.write_text(json.dumps({'session_info': {'uuid': 'q'}, 'runs': [{'testcases': []}]}))
    assert report_main.main([str(quick), '--out', str(tmp_path / 'out')]) == 2
    err = capsys.readouterr().err
    assert str(db) in err and len(err.strip().splitlines()) == 1


def test_a_stack_built_here_is_stamped_with_its_configure_flags(tmp_path):
    from testbed.report import build
    report = json.loads(synthetic(tmp_path).read_text())
    for tc in report['runs'][0]['testcases']:
        if tc['stack_name'] == 'mpich-4.1.3':
            tc['stack_configure'] = '--with-device=ch3:sock --disable-fortran'
    path = tmp_path / 'built.json'
    path.write_text(json.dumps(report))
    page = build([path], tmp_path / 'out').read_text()
    assert 'mpich-4.1.3: Library 4.1.3 (built here, configure --with-device=ch3:sock ' \
        '--disable-fortran)' in page
    assert 'openmpi-5.0.8: Library 5.0.8;' in page or 'openmpi-5.0.8: Library 5.0.8.' in page


def test_no_storage_yet_is_no_stored_series(tmp_path, monkeypatch):
    monkeypatch.setenv('TESTBED_RESULTS_DB', str(tmp_path / 'none.db'))
    quick = tmp_path / 'quick.json'
    quick.write_text(json.dumps({'session_info': {'uuid': 'q'}, 'runs': [{'testcases': []}]}))
    assert report_main.main([str(quick), '--out', str(tmp_path / 'out')]) == 0
    assert 'no version series' in (tmp_path / 'out' / 'series.html').read_text()
