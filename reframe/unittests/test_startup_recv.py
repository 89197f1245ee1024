"""apps/startup's --recv: ThesisStartup's rsh path (one host name and one proxy per process, all
on this machine, through the case's own local agent) on mpich-5.0 at 6 processes, where rank 0
taking the messages from MPI_ANY_SOURCE hung (docs/thesis.md); taking them from each rank in
turn brings every one in. A bad value is one line and exit 2. The set-up must have run."""
import os
import subprocess
import time

import pytest
from apps_copy import apps_copy, open_to_job

from testbed import registry
from testbed.launch import drop_privileges
from testbed.thesis import LOCAL_AGENT, rsh_hosts

STACK = 'mpich-5.0'


@pytest.fixture(scope='module')
def stage():
    stack = registry.load().stacks[STACK]
    with apps_copy('startup-recv', [('startup', f'CC={stack.compiler}')]) as path:
        (path / 'rsh-agent').write_text(LOCAL_AGENT)
        os.chmod(path / 'rsh-agent', 0o755)
        (path / 'agent-calls.log').write_text('')
        (path / 'hosts').write_text(''.join(stack.fallback_hostline.replace('{host}', h) + '\n'
                                            for h in rsh_hosts(6)))
        open_to_job(path, writable=True)
        yield path


def launch(stage, np, *words):
    reg = registry.load()
    stack = reg.stacks[STACK]
    env = stack.fallback_settings(str(stage / 'rsh-agent'), str(stage / 'hosts'))
    cmd = drop_privileges(reg) + ['env', *(f'{k}={v}' for k, v in env.items())] + \
        stack.launch_command(np) + [str(stage / 'apps' / 'startup' / 'startup'), *words,
                                    '--launch-epoch-ns', str(time.time_ns())]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=stage,
                          env=dict(os.environ, TESTBED_HANG_TIMEOUT_S='20'))


def test_ordered_receives_bring_every_message_in_through_one_shell_per_process(stage):
    proc = launch(stage, 6, '--recv', 'ordered')
    assert proc.returncode == 0, proc.stderr[-800:]
    assert '"ranks":6' in proc.stdout and 'first_message_s' in proc.stdout
    calls = (stage / 'agent-calls.log').read_text().split()
    assert len(calls) >= 6            # one remote shell per process (hydra's proxies)


def test_a_bad_recv_is_one_line(stage):
    proc = launch(stage, 2, '--recv', 'sometimes')
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[0] == \
        "startup: invalid value for --recv: 'sometimes' (expected any or ordered)"
