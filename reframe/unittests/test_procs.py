"""testbed.procs considers only the run's processes: a launcher-named process counts when its
environment holds TESTBED_RUN_ID=<this run>; without a run id, only the job account's."""
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from testbed import procs, registry
from testbed.launch import drop_privileges


@pytest.fixture
def fake_mpiexec():
    """Start copies of /bin/sleep named 'mpiexec' (the kernel's comm), stop them at the end."""
    # Under /var/tmp, where the job account can reach it (pytest's tmp_path is root's only).
    tmp = Path(tempfile.mkdtemp(prefix='testbed-procs-', dir='/var/tmp'))
    os.chmod(tmp, 0o755)
    exe = tmp / 'mpiexec'
    shutil.copy('/bin/sleep', exe)
    started = []

    def start(env_extra=None, prefix=()):
        env = {k: v for k, v in os.environ.items() if k != procs.RUN_ID}
        env.update(env_extra or {})
        proc = subprocess.Popen([*prefix, str(exe), '300'], env=env)
        started.append(proc)
        for _ in range(100):        # until exec has renamed it
            try:
                with open(f'/proc/{proc.pid}/comm') as fh:
                    if fh.read().strip() == 'mpiexec':
                        break
            except OSError:
                pass
            time.sleep(0.01)
        return proc.pid

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    shutil.rmtree(tmp, ignore_errors=True)


def pids(found):
    return {pid for pid, *_ in found}


def test_only_the_marked_process_is_reported_and_killed(fake_mpiexec):
    run_id = f'pytest-{uuid.uuid4()}'
    marked = fake_mpiexec({procs.RUN_ID: run_id})
    other_run = fake_mpiexec({procs.RUN_ID: run_id + '-other'})
    unmarked = fake_mpiexec()
    assert pids(procs.leftovers(run_id=run_id)) == {marked}
    procs.cleanup(run_id=run_id)
    assert procs.leftovers(run_id=run_id) == []
    for pid, alive in ((marked, False), (other_run, True), (unmarked, True)):
        with open(f'/proc/{pid}/stat') as fh:
            state = fh.read().rsplit(')', 1)[1].split()[0]
        assert (state != 'Z') == alive, (pid, state)


@pytest.mark.skipif(os.geteuid() != 0, reason='needs root to start a job-account process')
def test_without_run_id_only_the_job_account_counts(fake_mpiexec, monkeypatch):
    monkeypatch.delenv(procs.RUN_ID, raising=False)
    reg = registry.load()
    mine = fake_mpiexec()                                          # root's
    job = fake_mpiexec(prefix=drop_privileges(reg))                # the job account's
    found = pids(procs.leftovers())          # listed only: other runs' processes are not ours
    assert job in found and mine not in found
    out = subprocess.run(['python3', '-m', 'testbed.procs'], capture_output=True, text=True,
                         env={k: v for k, v in os.environ.items() if k != procs.RUN_ID})
    assert f'{procs.RUN_ID} is not set: considering only processes of the job account ' \
        f'{reg.run_as}' in out.stdout
