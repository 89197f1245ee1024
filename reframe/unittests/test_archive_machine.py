"""The run archive keeps the newest N runs with their machine record; the machine record has
what references are keyed by."""
import json

import pytest

from testbed import archive, machine


def test_machine_record_and_keys(monkeypatch):
    rec = machine.record()
    for field in ('cpu_model', 'cpus', 'memory_bytes', 'kernel', 'virtualised'):
        assert rec[field] not in ('', 0, None), field
    assert rec['machine_type'] == machine.machine_type(rec)
    assert rec['machine_id'].startswith('m-')
    monkeypatch.setenv('TESTBED_MACHINE_ID', 'cluster-node-17')
    assert machine.machine_id(rec) == 'cluster-node-17'


def test_machine_type_names_the_cpu_vendor():
    # ratios did not travel from an AMD EPYC VM to an Intel Xeon VM (machine.py says which)
    rec = {'arch': 'x86_64', 'cpus': 2, 'virtualised': 'KVM', 'cpu_vendor': 'intel'}
    assert machine.machine_type(rec) == 'x86_64-intel-2cpu-vm'
    assert machine.machine_type(dict(rec, cpu_vendor='amd', virtualised='no')) == \
        'x86_64-amd-2cpu-bare'
    # no vendor in /proc/cpuinfo (most other architectures): the type goes without it
    assert machine.machine_type(dict(rec, arch='aarch64', cpu_vendor='')) == 'aarch64-2cpu-vm'
    assert machine.VENDORS['AuthenticAMD'] == 'amd'


def test_archive_keeps_the_newest_runs(tmp_path):
    report = tmp_path / 'report.json'
    summary = tmp_path / 'summary'
    (tmp_path / 'summary.md').write_text('# summary\n')
    store = tmp_path / 'archive'
    kept = []
    for i in range(4):
        report.write_text(json.dumps({'session_info': {'uuid': f'{i:08d}-uuid'}}))
        folder = archive.store(report, summary, 'quick', archive=store, keep=2)
        # Folders sort by time; distinct sessions keep distinct names within one second.
        kept.append(folder.name)
        assert (folder / 'report.json').exists() and (folder / 'summary.md').exists()
        assert json.loads((folder / 'machine.json').read_text())['machine_id']
    assert sorted(p.name for p in store.iterdir()) == sorted(kept)[-2:]


def test_archive_keeps_a_run_of_several_reports_and_prunes_by_profile(tmp_path):
    """The emulated cluster's run writes a report per link profile: one folder keeps them all;
    its runs are pruned apart from the quick pass's ('quick' is not 'cluster-quick')."""
    reports = []
    for name in ('cluster-native-mtu1500.json', 'cluster-gige-mtu1500.json'):
        reports.append(tmp_path / name)
        reports[-1].write_text(json.dumps({'session_info': {'uuid': f'{name[8:12]}-uuid'}}))
    store = tmp_path / 'archive'
    quick = tmp_path / 'quick.json'
    quick.write_text(json.dumps({'session_info': {'uuid': 'abcdefgh-uuid'}}))
    archive.store(quick, tmp_path / 'none', 'quick', archive=store, keep=1)
    for _ in range(2):
        folder = archive.store(reports, tmp_path / 'none', 'cluster-quick', archive=store, keep=1)
    assert {p.name for p in folder.iterdir()} == {
        'report.json', 'cluster-native-mtu1500.json', 'cluster-gige-mtu1500.json', 'machine.json'}
    assert [len(archive.runs_of(p, store)) for p in ('quick', 'cluster-quick')] == [1, 1]
    assert archive.main(['--profile', 'x', '--summary', str(tmp_path / 's'),
                         str(tmp_path / 'missing.json')]) == 2


def test_archive_setting_is_checked(monkeypatch):
    monkeypatch.setenv('TESTBED_ARCHIVE_KEEP', 'all')
    with pytest.raises(ValueError, match="TESTBED_ARCHIVE_KEEP: 'all'"):
        archive.keep_count()
