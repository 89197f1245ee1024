"""Which sessions testbed.compare accepts: two machine types refused unless told, failed cases
named and not judged, the results storage read without being written (a damaged one named in
one line), and make compare's exit status (0 same, 1 slower, 2 bad input)."""
import hashlib
import json
import sqlite3
import subprocess

import pytest

from testbed import compare, registry, storage
from test_compare import report


def typed(rep, mtype):
    for tc in rep['runs'][0]['testcases']:
        tc['machine_type'] = mtype
    return rep


def write(tmp_path, name, rep):
    path = tmp_path / name
    path.write_text(json.dumps(rep))
    return str(path)


def test_two_machine_types_are_refused_unless_told(tmp_path, capsys):
    a = write(tmp_path, 'a.json', typed(report(1), 'x86_64-amd-2cpu-kvm'))
    b = write(tmp_path, 'b.json', typed(report(2, factor=1.2), 'x86_64-intel-64cpu-bare'))
    assert compare.main([a, b]) == 2
    err = capsys.readouterr().err
    assert 'x86_64-amd-2cpu-kvm' in err and 'x86_64-intel-64cpu-bare' in err
    assert '--allow-machines' in err and 'ALLOW_MACHINES=1' in err
    assert compare.main([a, b, '--allow-machines']) == 1


def test_one_side_pooled_over_two_machine_types_is_refused(tmp_path, capsys):
    a1 = write(tmp_path, 'a1.json', typed(report(1), 'type-a'))
    a2 = write(tmp_path, 'a2.json', typed(report(3), 'type-b'))
    b = write(tmp_path, 'b.json', typed(report(2), 'type-a'))
    assert compare.main([f'{a1},{a2}', b]) == 2
    assert 'type-b' in capsys.readouterr().err


def test_a_failed_case_is_named_and_its_figures_not_judged(tmp_path, capsys):
    b = report(2, factor=2.0)
    b['runs'][0]['testcases'][0].update(result='fail', fail_phase='sanity')
    assert compare.main([write(tmp_path, 'a.json', report(1)),
                         write(tmp_path, 'b.json', b)]) == 1
    out = capsys.readouterr().out
    assert '1 test case(s) failed before their figures were measured' in out
    assert 'Send-Recv/complete' in out.split('\n')[0]
    assert f'{(len(b["runs"][0]["testcases"]) - 1) * 4} figures on both sides' in out


def stored(db, uuid, rep):
    con = sqlite3.connect(db)
    con.execute('create table if not exists sessions(uuid TEXT PRIMARY KEY, session_start_unix '
                'REAL, session_end_unix REAL, json_blob TEXT, report_file TEXT)')
    con.execute('insert into sessions values (?, 1, 2, ?, "")', (uuid, json.dumps(rep)))
    con.commit()
    con.close()


def test_stored_sessions_are_read_and_never_written(tmp_path, monkeypatch, capsys):
    db = tmp_path / 'sessions.db'
    stored(db, 'aaaaaaaa-1111', report(1))
    stored(db, 'bbbbbbbb-2222', report(2, factor=1.2))
    monkeypatch.setenv('TESTBED_RESULTS_DB', str(db))
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    assert compare.main(['aaaaaaaa', 'bbbbbbbb-2222']) == 1
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before
    assert compare.main(['aaaaaaaa', 'cccccccc']) == 2
    assert 'session cccccccc: not in the results storage' in capsys.readouterr().err


def test_a_damaged_storage_is_named_in_one_line_and_left_as_it_was(tmp_path, monkeypatch,
                                                                    capsys):
    db = tmp_path / 'sessions.db'
    stored(db, 'aaaaaaaa-1111', report(1))
    raw = bytearray(db.read_bytes())
    raw[:16] = b'not a database!!'             # sqlite's header gone
    db.write_bytes(bytes(raw))
    monkeypatch.setenv('TESTBED_RESULTS_DB', str(db))
    assert compare.main(['aaaaaaaa', 'aaaaaaaa']) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(db) in err and 'not modified' in err
    assert db.read_bytes() == bytes(raw)
    with pytest.raises(storage.StorageError):
        storage.sessions(db)


@pytest.mark.parametrize('b, allow, status', [('a2', '', 0), ('slow', '', 1), ('other', '', 2),
                                              ('other', 'ALLOW_MACHINES=1', 1), ('bad', '', 2)])
def test_make_compare_exits_as_the_compare_does(tmp_path, b, allow, status):
    files = {'a': typed(report(1), 't1'), 'a2': typed(report(2), 't1'),
             'slow': typed(report(2, factor=1.2), 't1'),
             'other': typed(report(2, factor=1.2), 't2')}
    paths = {k: write(tmp_path, f'{k}.json', v) for k, v in files.items()}
    paths['bad'] = str(tmp_path / 'missing.json')
    proc = subprocess.run(['make', '-s', '-C', str(registry.REPO), 'compare',
                           f'A={paths["a"]}', f'B={paths[b]}'] + ([allow] if allow else []),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == status, proc.stderr
    if status < 2:
        assert 'figures on both sides' in proc.stdout


def test_a_figure_renamed_between_sessions_is_named_not_compared(tmp_path, capsys):
    b = report(2)
    case = b['runs'][0]['testcases'][0]
    case['figure_samples'] = {k.replace('half_round_trip_us', 'hrt_us'): v
                              for k, v in case['figure_samples'].items()}
    a = write(tmp_path, 'a.json', report(1))
    assert compare.main([a, write(tmp_path, 'b.json', b)]) == 0
    out = capsys.readouterr().out
    assert f'4 figure(s) only in {a}, not compared' in out and 'half_round_trip_us@8' in out
    assert '4 figure(s) only in' in out.split(a)[-1] and 'hrt_us@' in out
