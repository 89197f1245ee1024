"""ReFrame's results storage (sqlite, site/local.py), read without ever writing to it.

ReFrame keeps one row per session in `sessions` (uuid, session_start_unix, session_end_unix,
json_blob: the whole run report) and one per test case in `testcases` (name, system,
partition, environ, job_completion_time_unix, session_uuid). The tags a session was run with
(`--session-extras profile=...,testbed_commit=...,machine_type=...`) land as keys of the
report's session_info. Here the file is opened read-only (sqlite's mode=ro), so that a compare,
a report or the progress estimate never changes it, even when the file is damaged."""
import json
import os
import re
import sqlite3
from pathlib import Path

DEFAULT = Path(__file__).resolve().parents[1] / 'results' / 'sessions.db'


class StorageError(ValueError):
    """The storage cannot be read; the message names the file and the fix."""


def path():
    """The storage file: TESTBED_RESULTS_DB, else reframe/results/sessions.db (site/local.py)."""
    return Path(os.environ.get('TESTBED_RESULTS_DB') or DEFAULT)


def _query(sql, args=(), db=None):
    db = Path(db or path())
    if not db.is_file():
        raise StorageError(f'{db}: no results storage (no session stored yet; '
                           'TESTBED_RESULTS_DB names another file)')
    try:
        con = sqlite3.connect(f'file:{db}?mode=ro', uri=True)
        try:
            return con.execute(sql, args).fetchall()
        finally:
            con.close()
    except sqlite3.Error as err:
        raise StorageError(f'{db}: not a readable ReFrame results storage ({err}); move it '
                           'aside or restore it from a copy (it was not modified)') from None


def _report(blob, db, uuid):
    try:
        report = json.loads(blob)
    except (TypeError, json.JSONDecodeError) as err:
        raise StorageError(f'{db}: session {uuid}: json_blob is not JSON ({err}); that session '
                           'cannot be used') from None
    if not isinstance(report, dict):
        raise StorageError(f'{db}: session {uuid}: json_blob is not a run report')
    return report


def session(uuid, db=None):
    """The run report of one stored session (a unique prefix of its UUID will do)."""
    db = Path(db or path())
    if not re.fullmatch(r'[0-9a-f-]{4,36}', str(uuid)):
        raise StorageError(f'{uuid}: not a session UUID')
    try:
        found = _query('select uuid, json_blob from sessions where uuid like ?', (f'{uuid}%',),
                       db)
    except StorageError as err:
        raise StorageError(f'session {uuid}: not in the results storage: {err}') from None
    if not found:
        raise StorageError(f'session {uuid}: not in the results storage {db} '
                           '(reframe --list-stored-sessions lists them)')
    if len(found) > 1:
        raise StorageError(f'session {uuid}: {len(found)} stored sessions start so; give more '
                           'of the UUID')
    return _report(found[0][1], db, found[0][0])


def sessions(db=None, since=None):
    """Every stored session's report, oldest first (started at or after `since`, Unix time)."""
    db = Path(db or path())
    rows = _query('select uuid, json_blob from sessions where session_start_unix >= ? '
                  'order by session_start_unix', (since or 0,), db)
    return [_report(blob, db, uuid) for uuid, blob in rows]


def tags(report):
    """The session's tags (--session-extras): profile, testbed_commit, machine_type ('' when
    the session was stored without them)."""
    info = report.get('session_info') or {}
    return {k: str(info.get(k) or '') for k in ('profile', 'testbed_commit', 'machine_type')}
