"""Run a job script as the reaper of its orphans: `python3 subreaper.py SCRIPT` marks this
process PR_SET_CHILD_SUBREAPER (Linux 3.4+; the mark survives exec) and becomes `bash SCRIPT`.

Why: a stack's daemons (LAM's lamd) leave their launcher's process tree when they daemonise,
so the kernel hands them to the nearest subreaper, else PID 1. This VM's PID 1 reaps late, and
lamhalt waits for the lamd it stopped to be gone: about 3 s per job. With the job's own shell
as the subreaper, bash reaps the stopped daemon at once. StackLaunch puts the line that calls
this first in a local job that boots daemons; the script then runs again from its top, once.
"""
import ctypes
import os
import sys

PR_SET_CHILD_SUBREAPER = 36


def main(argv):
    if len(argv) != 2:
        print('usage: subreaper.py JOB_SCRIPT', file=sys.stderr)
        return 2
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        # Not fatal: the job runs as before, only its daemons' halt waits on PID 1.
        print(f'subreaper.py: prctl(PR_SET_CHILD_SUBREAPER): '
              f'{os.strerror(ctypes.get_errno())}', file=sys.stderr)
    os.environ['TESTBED_SUBREAPER'] = '1'
    os.execv('/bin/bash', ['bash', argv[1]])


if __name__ == '__main__':
    sys.exit(main(sys.argv))
