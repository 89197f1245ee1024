"""Leftover processes: after a run, passed or failed, no MPI daemon or launcher may remain.

    python3 -m testbed.procs --check      list leftovers; exit 1 if there are any
    python3 -m testbed.procs --cleanup    then stop them (SIGTERM, then SIGKILL)
Both together check first, so a cleanup never hides a leftover from the check.

Only the run's own processes count: ci/suite.sh exports TESTBED_RUN_ID=<unique id> before
ReFrame starts, every process of the run inherits it (launchers, lamd booted in a job, ranks),
and a leftover is a daemon or launcher whose /proc/PID/environ holds that marker. Another
user's mpiexec, or a run beside this one, is never reported nor killed. Without
TESTBED_RUN_ID the check says so and falls back to the job account's processes (registry
run_as). Reading another account's environ needs root, which is how the suite runs.
"""
import argparse
import os
import pwd
import signal
import subprocess
import sys
import time

RUN_ID = 'TESTBED_RUN_ID'

# Process names (as the kernel truncates them, 15 characters) of daemons and launchers.
DAEMONS = {'lamd', 'mpiexec', 'mpiexec.hydra', 'mpiexec.mpich', 'hydra_pmi_proxy',
           'hydra_bstrap_pr', 'mpirun', 'mpirun.lam', 'mpirun.openmpi', 'prterun', 'prted',
           'prte', 'orted', 'orterun', 'pvmd', 'pvmd3'}


def _has_marker(pid, marker):
    """Whether process `pid` was started with `marker` (b'NAME=value') in its environment."""
    try:
        with open(f'/proc/{pid}/environ', 'rb') as fh:
            return marker in fh.read().split(b'\0')
    except OSError:         # gone, or not ours to read: not provably the run's
        return False


def _job_account_uid():
    from testbed import registry
    return pwd.getpwnam(registry.load().run_as).pw_uid


def leftovers(names=DAEMONS, run_id=None, uid=None):
    """Daemons and launchers of this run: [(pid, user, comm, args)].

    run_id: the run's marker value (default: $TESTBED_RUN_ID). Without one, only processes
    of `uid` (default: the registry's job account) are considered."""
    run_id = run_id if run_id is not None else os.environ.get(RUN_ID, '')
    marker = f'{RUN_ID}={run_id}'.encode()
    if not run_id and uid is None:
        uid = _job_account_uid()
    out = subprocess.run(['ps', '-eo', 'pid=,uid=,user:32=,comm=,args='], capture_output=True,
                         text=True, check=True).stdout
    found = []
    for line in out.splitlines():
        pid, puid, user, comm, args = (line.split(None, 4) + [''])[:5]
        pid = int(pid)
        if comm not in names or pid == os.getpid() or '<defunct>' in args:
            continue
        if run_id and not _has_marker(pid, marker):
            continue
        if not run_id and int(puid) != uid:
            continue
        found.append((pid, user, comm, args))
    return found


def cleanup(grace_s=2.0, **which):
    """SIGTERM every leftover, wait (polling, at most grace_s) for them to go, then SIGKILL.
    `which`: leftovers()'s run_id / uid."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid, *_ in leftovers(**which):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace_s
        while leftovers(**which) and time.monotonic() < deadline:
            time.sleep(0.05)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--check', action='store_true')
    ap.add_argument('--cleanup', action='store_true')
    args = ap.parse_args(argv)
    if os.environ.get(RUN_ID):
        print(f'leftovers of run {os.environ[RUN_ID]} ({RUN_ID} in their environment)')
    else:
        from testbed import registry
        print(f'{RUN_ID} is not set: considering only processes of the job account '
              f'{registry.load().run_as}')
    found = leftovers()
    rc = 0
    if args.check:
        if found:
            print('leftover MPI daemons or launchers after the run:')
            for pid, user, comm, cmd in found:
                print(f'  pid {pid} user {user} {comm}: {cmd[:100]}')
            rc = 1
        else:
            print('no leftover MPI daemon or launcher')
    if args.cleanup and found:
        cleanup()
        still = leftovers()
        if still:
            print(f'could not stop: {still}', file=sys.stderr)
            rc = 1
    return rc


if __name__ == '__main__':
    sys.exit(main())
