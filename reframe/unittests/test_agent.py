"""The fallback launcher's agent (site/cluster/agent) takes rsh's command line from every
launcher that calls it: options before or after the node name, the command as one shell line,
the caller's search paths and LAM session names passed on, unset variables left unset. A fake
sudo on PATH prints what the agent would run, so no cluster is needed here."""
import os
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
AGENT = REPO / 'site' / 'cluster' / 'agent'


def run_agent(tmp_path, *args, env=None):
    fake = tmp_path / 'bin'
    fake.mkdir(exist_ok=True)
    sudo = fake / 'sudo'
    sudo.write_text('#!/bin/sh\nfor a in "$@"; do printf "%s\\n" "$a"; done\n')
    sudo.chmod(0o755)
    base = {'PATH': f'{fake}:/usr/bin:/bin', 'TESTBED_CLUSTER_DIR': str(tmp_path / 'run')}
    return subprocess.run([str(AGENT), *args], capture_output=True, text=True, cwd=tmp_path,
                          env={**base, **(env or {})}, timeout=10)


def test_rsh_forms_reach_the_node_with_one_command_line(tmp_path):
    for args in (['node2', '-n', 'echo', '$SHELL'],          # LAM: options after the node
                 ['-x', '-l', 'someone', 'node2', 'echo', '$SHELL'],  # ssh-style, before
                 ['node2', 'echo $SHELL']):                 # hydra, Open MPI: one word
        r = run_agent(tmp_path, *args)
        assert r.returncode == 0, r.stderr
        words = r.stdout.splitlines()
        assert words[:4] == ['-n', str(tmp_path / 'run' / 'enter-node'), 'node2',
                             str(tmp_path)]
        assert words[-3:] == ['sh', '-c', 'echo $SHELL']


def test_environment_passed_only_when_set(tmp_path):
    r = run_agent(tmp_path, 'node1', 'true', env={'LAM_MPI_SESSION_SUFFIX': 'testbed42',
                                                  'LD_LIBRARY_PATH': '/opt/x/lib'})
    words = r.stdout.splitlines()
    assert 'LAM_MPI_SESSION_SUFFIX=testbed42' in words
    assert 'LD_LIBRARY_PATH=/opt/x/lib' in words
    # LAM reads an empty LAM_MPI_SESSION_PREFIX as '/': an unset one must stay unset
    assert not any(w.startswith('LAM_MPI_SESSION_PREFIX') for w in words)


def test_no_node_or_no_command_is_a_usage_error(tmp_path):
    for args in ([], ['node1'], ['-n', 'node1']):
        r = run_agent(tmp_path, *args)
        assert r.returncode == 2 and 'usage: agent' in r.stderr and r.stdout == ''


def test_enter_node_refuses_without_sudo_and_bad_nodes():
    enter = REPO / 'site' / 'cluster' / 'enter-node'
    env = {k: v for k, v in os.environ.items() if not k.startswith('SUDO_')}
    r = subprocess.run([str(enter), 'node1', '/', 'true'], capture_output=True, text=True,
                       env=env, timeout=10)
    assert r.returncode == 2 and 'through sudo by the job account only' in r.stderr
    for bad in ('node0', 'node1;id', '../node1', 'tbctl'):
        r = subprocess.run([str(enter), bad, '/', 'true'], capture_output=True, text=True,
                           env={**env, 'SUDO_UID': '1001', 'SUDO_GID': '1001'}, timeout=10)
        assert r.returncode == 2 and 'is not a node of the emulated cluster' in r.stderr, bad
