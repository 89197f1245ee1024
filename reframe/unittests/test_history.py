"""testbed.history and testbed.changepoints: a planted slowdown is found at its session and a
flat noisy series gives none; the bad inputs (empty history, renamed figure, failed case, two
machine types, damaged storage) each give one named line, and the storage is never written."""
import hashlib
import json
import sqlite3

import numpy as np
import pytest
import ruptures

from testbed import changepoints, history

MTYPE = 'x86_64-test-2cpu-vm'
T0 = 1795800000.0
FIGS = ('half_round_trip_us@8', 'half_round_trip_us@1024')


def case(values, mtype=MTYPE, result='pass', phase=None, version='MPICH Version: 4.0.2'):
    return {'name': 'P2PMatrix %mode=Send-Recv/complete %size_range=quick',
            'display_name': 'P2PMatrix %mode=Send-Recv/complete %size_range=quick',
            'system': 'testbed-local', 'partition': 'default', 'environ': 'mpich-4_0',
            'stack_name': 'mpich-4.0', 'library_version': version, 'testbed_commit': 'abc123',
            'machine_type': mtype, 'result': result, 'fail_phase': phase,
            'figure_samples': values}


def session(i, cases, profile='quick', mtype=MTYPE):
    info = {'uuid': f'{i:08x}-0000-4000-8000-000000000000', 'time_start_unix': T0 + 3600 * i,
            'profile': profile, 'machine_type': mtype, 'testbed_commit': f'commit{i}'}
    return {'session_info': info, 'runs': [{'testcases': cases}]}


def noisy(rng, base, factor, n=5, cv=0.05, session_cv=0.03):
    """n samples of one session: a session-wide shift (the machine's minute) and sample noise."""
    level = base * factor * np.exp(rng.normal(0, session_cv))
    return [float(level * np.exp(rng.normal(0, cv))) for _ in range(n)]


def series_sessions(n, k=None, factor=1.3, seed=1, figs=FIGS):
    """n sessions; from session k (0-based) on every figure is `factor` times slower."""
    rng = np.random.default_rng(seed)
    return [session(i, [case({f: noisy(rng, 2.0 + j, factor if k is not None and i >= k
                                       else 1.0) for j, f in enumerate(figs)})])
            for i in range(n)]


def store(db, reports):
    con = sqlite3.connect(db)
    con.execute('create table sessions(uuid TEXT PRIMARY KEY, session_start_unix REAL, '
                'session_end_unix REAL, json_blob TEXT, report_file TEXT)')
    for rep in reports:
        info = rep['session_info']
        con.execute('insert into sessions values (?, ?, ?, ?, "")', (
            info['uuid'], info['time_start_unix'], info['time_start_unix'] + 60,
            json.dumps(rep)))
    con.commit()
    con.close()
    return str(db)


def run(tmp_path, reports, *args):
    db = store(tmp_path / 'sessions.db', reports)
    (tmp_path / 'archive').mkdir()
    return history.main(['--db', db, '--archive', str(tmp_path / 'archive'),
                         '--machine', MTYPE, *args])


@pytest.mark.parametrize('k', [4, 7, 10])
def test_a_planted_slowdown_is_found_at_its_session(tmp_path, capsys, k):
    reports = series_sessions(14, k=k)
    assert run(tmp_path, reports) == 0
    out = capsys.readouterr().out
    assert f'{len(FIGS)} change point(s)' in out
    after = reports[k]['session_info']['uuid'][:8]
    before = reports[k - 1]['session_info']['uuid'][:8]
    assert out.count('after:  ') == len(FIGS)
    for line in out.splitlines():
        if line.strip().startswith('after:'):
            assert f'session {after}' in line
        if line.strip().startswith('before:'):
            assert f'session {before}' in line and 'commit abc123' in line
    sessions = history.select(history.load_sessions(tmp_path / 'sessions.db',
                                                    tmp_path / 'archive'), 'quick', MTYPE)
    found, _, _ = history.judge(history.build_series(sessions)[0])
    for changes in found.values():
        (ch,) = changes
        assert ch.index == k and ch.low <= 1.3 <= ch.high and ch.low > 1.1


def test_a_flat_noisy_series_gives_no_change_point(tmp_path, capsys):
    for seed in range(5):
        values = [float(np.median(noisy(np.random.default_rng(seed * 100 + i), 3.0, 1.0,
                                        cv=0.1, session_cv=0.1))) for i in range(30)]
        assert changepoints.find(values, changepoints.ALPHA) == []
    assert run(tmp_path, series_sessions(20)) == 0
    assert '0 change point(s)' in capsys.readouterr().out


def test_the_split_gain_is_ruptures_l2_cost_reduction():
    y = np.log(np.r_[np.full(6, 2.0), np.full(6, 2.6)] + np.linspace(0, 0.1, 12))
    cost = ruptures.costs.CostL2().fit(y)
    best = max(cost.error(0, 12) - cost.error(0, t) - cost.error(t, 12) for t in range(3, 10))
    assert changepoints.split_gain(y) == pytest.approx(best)
    assert changepoints.locate(y) == 6


def test_too_few_sessions_are_not_judged(tmp_path, capsys):
    assert run(tmp_path, series_sessions(8, k=4, factor=2.0)) == 0
    out = capsys.readouterr().out
    assert 'no series long enough to judge' in out and '0 change point(s)' in out


def test_an_empty_history_names_the_filter(tmp_path, capsys):
    assert run(tmp_path, series_sessions(4), '--profile', 'nightly') == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "profile='nightly'" in err and 'quick' in err and 'PROFILE=' in err


def test_a_renamed_figure_is_two_short_series_never_joined(tmp_path, capsys):
    old = series_sessions(7, figs=('lat_us@8',))
    new = series_sessions(14, k=7, factor=1.3, figs=('latency_us@8',))[7:]
    assert run(tmp_path, old + new) == 0
    out = capsys.readouterr().out
    assert '2 series are in only some of the sessions' in out and 'never joined' in out
    assert 'lat_us@8 | P2PMatrix' in out and 'latency_us@8 | P2PMatrix' in out
    assert '0 change point(s)' in out


def test_a_failed_cases_figures_are_left_out_and_said(tmp_path, capsys):
    reports = series_sessions(14)
    for rep in reports[10:]:            # counted, these would be a change at session 10
        tc = rep['runs'][0]['testcases'][0]
        tc.update(result='fail', fail_phase='sanity', figure_samples={
            f: [v * 10 for v in vs] for f, vs in tc['figure_samples'].items()})
    assert run(tmp_path, reports) == 0
    out = capsys.readouterr().out
    for rep in reports[10:]:
        assert f'session {rep["session_info"]["uuid"][:8]}' in out
    assert out.count('1 test case(s) failed before their figures were measured') == 4
    assert 'phase sanity' in out and '0 change point(s)' in out


def test_two_machine_types_are_refused_unless_all(tmp_path, capsys):
    reports = series_sessions(6)
    reports[3]['runs'][0]['testcases'][0]['machine_type'] = 'x86_64-other-64cpu-bare'
    assert run(tmp_path, reports) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert 'x86_64-other-64cpu-bare' in err and MTYPE in err and 'MACHINE=ALL' in err
    db, arch = str(tmp_path / 'sessions.db'), str(tmp_path / 'archive')
    assert history.main(['--db', db, '--archive', arch, '--machine', 'ALL']) == 0


def test_a_damaged_storage_is_named_in_one_line_and_never_written(tmp_path, capsys):
    db = tmp_path / 'sessions.db'
    db.write_bytes(b'SQLite format 3\x00' + b'\x13' * 4000)
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    assert history.main(['--db', str(db), '--archive', str(tmp_path), '--machine', MTYPE]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(db) in err and 'Traceback' not in err
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before


def test_a_read_leaves_the_storage_as_it_was(tmp_path):
    reports = series_sessions(6)
    db = store(tmp_path / 'sessions.db', reports)
    before = hashlib.sha256(open(db, 'rb').read()).hexdigest()
    assert history.main(['--db', db, '--archive', str(tmp_path), '--machine', MTYPE]) == 0
    assert hashlib.sha256(open(db, 'rb').read()).hexdigest() == before


def test_an_untagged_session_takes_its_profile_from_its_archived_run(tmp_path):
    rep = series_sessions(1)[0]
    del rep['session_info']['profile']
    folder = tmp_path / f'20261128T000000Z-full-{rep["session_info"]["uuid"][:8]}'
    folder.mkdir()
    (folder / 'report.json').write_text(json.dumps(rep))
    (only,) = history.load_sessions(store(tmp_path / 'sessions.db', []), tmp_path)
    assert (only.profile, only.profile_from) == ('full', 'archive')


def test_version_order_puts_releases_in_order(tmp_path):
    reports = [session(i, [dict(case({'t_us@8': [1.0 + v]}, version=f'MPICH Version: {ver}'),
                                stack_name=f'mpich-{ver}')])
               for i, (v, ver) in enumerate([(2, '5.0.2'), (0, '4.3.2'), (1, '4.10.1')])]
    sessions = history.select(history.load_sessions(store(tmp_path / 'sessions.db', reports),
                                                    tmp_path), 'quick', MTYPE)
    series, _ = history.build_series(sessions, order='version')
    (points,) = series.values()
    assert [p.version.split()[-1] for p in points] == ['4.3.2', '4.10.1', '5.0.2']


def test_the_report_draws_the_changed_figures_with_the_change_marked(tmp_path):
    from testbed.report import history as section
    reports = series_sessions(14, k=7)
    db = store(tmp_path / 'sessions.db', reports)
    html = ''.join(section.section('quick', MTYPE, db, tmp_path))
    assert html.count('<svg') == 2      # the headline at 8 B (every stack), the 1 KiB figure
    assert html.count('>x1.3') == 2     # the change's band and label, in each
    assert f'session {reports[7]["session_info"]["uuid"][:8]}' in html
    flat = ''.join(section.section('quick', MTYPE, store(tmp_path / 'flat.db',
                                                        series_sessions(14)), tmp_path))
    assert flat.count('<svg') == 1 and '>x1.' not in flat
    assert 'No history drawn' in ''.join(section.section('nightly', MTYPE, db, tmp_path))
