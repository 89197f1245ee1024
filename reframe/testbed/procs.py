"""Leftover processes: after a run, passed or failed, no MPI daemon or launcher may remain.

    python3 -m testbed.procs --check      list leftovers; exit 1 if there are any
    python3 -m testbed.procs --cleanup    then stop them (lamwipe for LAM, else SIGTERM/SIGKILL)
Both together check first, so a cleanup never hides a leftover from the check.
"""
import argparse
import os
import signal
import subprocess
import sys
import time

# Process names (as the kernel truncates them, 15 characters) of daemons and launchers.
DAEMONS = {'lamd', 'mpiexec', 'mpiexec.hydra', 'mpiexec.mpich', 'hydra_pmi_proxy',
           'hydra_bstrap_pr', 'mpirun', 'mpirun.lam', 'mpirun.openmpi', 'prterun', 'prted',
           'prte', 'orted', 'orterun', 'pvmd', 'pvmd3'}


def leftovers(names=DAEMONS):
    out = subprocess.run(['ps', '-eo', 'pid=,user=,comm=,args='], capture_output=True,
                         text=True, check=True).stdout
    found = []
    for line in out.splitlines():
        pid, user, comm, args = (line.split(None, 3) + [''])[:4]
        if comm in names and int(pid) != os.getpid() and '<defunct>' not in args:
            found.append((int(pid), user, comm, args))
    return found


def cleanup(grace_s=2.0):
    """SIGTERM every leftover, wait (polling, at most grace_s) for them to go, then SIGKILL."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid, *_ in leftovers():
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace_s
        while leftovers() and time.monotonic() < deadline:
            time.sleep(0.05)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--check', action='store_true')
    ap.add_argument('--cleanup', action='store_true')
    args = ap.parse_args(argv)
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
