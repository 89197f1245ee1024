"""The emulated cluster's life cycle and bad input (site/cluster/cluster.py), as root with the
set-up's packages: each case says what went wrong in one message and leaves nothing behind.
Bounded: every cluster brought up here is taken down in the same test, whatever happens."""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CLUSTER = [sys.executable, str(REPO / 'site' / 'cluster' / 'cluster.py')]
STATE = Path('/run/mpi-testbed-cluster/state.json')

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not Path('/usr/sbin/slurmd').exists(),
    reason='needs root and the set-up (make setup) for namespaces and Slurm')


#: the registry's storage for these tests, never the one a person may have kept
REGISTRY_DIR = Path('/var/tmp/mpi-testbed-registry-unittest')
os.environ['TESTBED_REGISTRY_DIR'] = str(REGISTRY_DIR)
#: the nodes' image storage for these tests (site/cluster/node_images.py)
NODE_IMAGES = Path('/var/tmp/mpi-testbed-node-images-unittest')
os.environ['TESTBED_NODE_IMAGES'] = str(NODE_IMAGES)


def cluster(*args, timeout=120):
    return subprocess.run(CLUSTER + list(args), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=timeout)


def until(condition, what, timeout=30):
    """Wait for `condition` (polled), failing the test after `timeout` seconds."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if condition():
            return
        time.sleep(0.1)
    pytest.fail(f'waited {timeout} s for {what}')


def alive(pid):
    """A process that exists and is not a zombie (a zombie's cmdline is empty). Where the
    parent reaps it at once (in a container whose init does), /proc/PID is simply gone."""
    try:
        return bool(Path(f'/proc/{pid}/cmdline').read_bytes())
    except FileNotFoundError:
        return False


def nothing_left():
    netns = subprocess.run(['ip', 'netns', 'list'], stdout=subprocess.PIPE, text=True).stdout
    links = subprocess.run(['ip', '-o', 'link'], stdout=subprocess.PIPE, text=True).stdout
    procs = subprocess.run(['ps', '-eo', 'args'], stdout=subprocess.PIPE, text=True).stdout
    return ('tbc-' not in netns and 'tbc-' not in links and not STATE.exists()
            and '/run/mpi-testbed-cluster/' not in procs and not REGISTRY_DIR.exists()
            and not NODE_IMAGES.exists())


@pytest.fixture
def clean():
    if not nothing_left():
        pytest.fail('a cluster was up before the test: run `make cluster-down`')
    yield
    cluster('down')
    assert nothing_left(), 'the test left part of a cluster behind'


def test_bad_input_is_named_and_builds_nothing(clean):
    r = cluster('up', '--profile', 'infiniband')
    assert r.returncode == 2 and 'links.toml' in r.stderr and "'infiniband'" in r.stderr
    r = cluster('up', '--nodes', '5')
    assert r.returncode == 2 and 'NODES: 5 is outside 1..4' in r.stderr
    r = cluster('up', '--nodes', 'two')
    assert r.returncode == 2 and "NODES: 'two'" in r.stderr
    r = cluster('up', '--mtu', '1234')
    assert r.returncode == 2 and 'MTU: 1234' in r.stderr
    assert nothing_left()
    r = cluster('down')
    assert r.returncode == 0 and 'nothing was up' in r.stdout


def test_bad_profile_file_names_the_field(tmp_path):
    from testbed_site.cluster import cluster as c
    bad = tmp_path / 'links.toml'
    bad.write_text('[slow]\nrate_mbit = -3\n')
    with pytest.raises(c.ClusterError, match=r'links.toml: \[slow\].rate_mbit: -3'):
        c.load_profiles(str(bad))
    bad.write_text('[slow]\nrate = 3\n')
    with pytest.raises(c.ClusterError, match=r'\[slow\].rate: unknown field'):
        c.load_profiles(str(bad))


def test_up_twice_then_a_killed_slurmd_then_down(clean):
    r = cluster('up', '--nodes', '2', '--profile', 'gige')
    assert r.returncode == 0, r.stderr
    state = json.loads(STATE.read_text())
    assert [n['addr'] for n in state['nodes']] == ['198.18.0.11', '198.18.0.12']
    assert 'rate 1000mbit' in state['applied']['node1']['qdisc']
    key = Path('/run/mpi-testbed-cluster/munge/key/munge.key')
    assert oct(key.stat().st_mode & 0o777) == '0o400' and key.owner() == 'munge'
    # A second up refuses and leaves the first cluster as it was.
    r = cluster('up')
    assert r.returncode == 2 and 'already up' in r.stderr
    assert cluster('status').returncode == 0
    # Kill node2's slurmd in the middle of a job: status names it, down still cleans up.
    env = dict(os.environ, SLURM_CONF=state['slurm_conf'])
    job = subprocess.Popen(['srun', '-N2', '-n2', '--time=1', 'sleep', '20'], env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           start_new_session=True)
    try:
        until(lambda: subprocess.run(['squeue', '-h', '-t', 'R', '-o', '%i'], env=env,
                                     stdout=subprocess.PIPE, text=True).stdout.strip(),
              'the job to start running')
        pid = int(Path('/run/mpi-testbed-cluster/node2/slurmd.pid').read_text())
        os.kill(pid, signal.SIGKILL)
        until(lambda: not alive(pid), 'slurmd to die')
        r = cluster('status')
        assert r.returncode == 1 and 'slurmd of node2 is not running' in r.stdout
    finally:
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()
    r = cluster('down')
    assert r.returncode == 0 and 'removed' in r.stdout


def test_the_fallback_agent_enters_a_node_as_the_job_account(clean):
    """The agent runs a command inside another node (its hostname, address and core) as the
    account that called it; the sudo rule that allows this exists only while the cluster is up,
    and lends nothing to root or to a name that is not a node."""
    from testbed import registry
    account = registry.load().run_as
    sudoers = Path('/etc/sudoers.d/mpi-testbed-cluster')
    r = cluster('up', '--nodes', '2')
    assert r.returncode == 0, r.stderr
    assert oct(sudoers.stat().st_mode & 0o777) == '0o440'
    agent = '/run/mpi-testbed-cluster/agent'    # up's copy: the clone may be closed to the account
    as_account = ['setpriv', f'--reuid={account}', f'--regid={account}', '--init-groups']
    r = subprocess.run(as_account + [agent, 'node2', '-n',
                                     'hostname; id -un; ip -4 -o addr show eth0; '
                                     'grep Cpus_allowed_list /proc/self/status'],
                       capture_output=True, text=True, timeout=30, cwd='/')
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == 'node2' and lines[1] == account and '198.18.0.12/24' in lines[2]
    assert lines[3].split()[-1] == str(1 % os.cpu_count())     # node2's core
    r = subprocess.run(as_account + [agent, 'node7', 'true'], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 3 and 'node7 has no slurmd running' in r.stderr
    r = subprocess.run([agent, 'node2', 'true'], capture_output=True, text=True, timeout=30)
    assert r.returncode != 0      # root is not the job account: sudo's rule is not for it
    r = cluster('down')
    assert r.returncode == 0 and not sudoers.exists()


def test_a_process_posing_as_a_slurmd_is_refused(clean):
    """The way to root the issue found (issue 44): the job account starts, in a user and mount
    namespace of its own, a process whose command line reads like a node's slurmd, with its own
    program bound over the tools enter-node runs, and asks sudo to enter that "node". Refused:
    the node is found by root's pid file, never by a command line, and the process it names
    must be root's, in the first user namespace; nothing runs as root inside the node."""
    from testbed import registry
    account = registry.load().run_as
    r = cluster('up', '--nodes', '2')
    assert r.returncode == 0, r.stderr
    as_account = ['setpriv', f'--reuid={account}', f'--regid={account}', '--init-groups']
    # root's folder the account can read (pytest's tmp_path is 0700), with the account's
    # program in it and a folder of the account's where that program leaves its mark
    work = Path(tempfile.mkdtemp(prefix='testbed-attempt-', dir='/var/tmp'))
    work.chmod(0o755)
    (work / 'out').mkdir()
    shutil.chown(work / 'out', account, account)       # given away empty, never entered again
    marker = work / 'out' / 'ran-as'
    evil = work / 'evil'
    evil.write_text(f'#!/bin/sh\nid > {marker}\n')
    evil.chmod(0o755)
    conf = '/run/mpi-testbed-cluster/slurm.conf'
    fakes = []

    def pose_as(node):
        """A process of the job account's, in its own user and mount namespaces, that reads
        exactly like `node`'s slurmd, with `evil` bound over setpriv, taskset, env and nsenter."""
        binds = '; '.join(f'mount --bind {evil} /usr/bin/{tool}'
                          for tool in ('setpriv', 'taskset', 'env', 'nsenter'))
        script = (f'{binds}; exec perl -e \'$0 = "slurmd -D -f {conf} -N {node}"; '
                  f'sleep 120\'')
        fake = subprocess.Popen(as_account + ['unshare', '-Urm', 'sh', '-c', script],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
        fakes.append(fake)
        def posing():      # the account's processes with that command line (not the node's)
            pids = subprocess.run(['pgrep', '-x', '-f', f'slurmd -D -f {conf} -N {node}'],
                                  stdout=subprocess.PIPE, text=True).stdout.split()
            return [int(p) for p in pids if Path(f'/proc/{p}').stat().st_uid != 0]
        until(posing, f'the job account\'s fake slurmd of {node}')
        return posing()[0]

    def enter(node):
        return subprocess.run(as_account + ['sudo', '-n', '/run/mpi-testbed-cluster/enter-node',
                                            node, '/', 'true'],
                              capture_output=True, text=True, timeout=30, cwd='/')
    try:
        # a node that does not exist, posed for: the old lookup by command line entered it
        pose_as('node3')
        r = enter('node3')
        assert r.returncode == 3 and 'node3 has no slurmd running' in r.stderr, r.stderr
        # a pid file that names the job account's process (a stale file, a reused pid)
        fake = pose_as('node2')
        pidfile = Path('/run/mpi-testbed-cluster/node2/slurmd.pid')
        real = int(pidfile.read_text())
        os.kill(real, signal.SIGKILL)
        until(lambda: not alive(real), 'node2\'s slurmd to die')
        pidfile.write_text(f'{fake}\n')
        r = enter('node2')
        assert r.returncode == 3 and f'process {fake} of node2\'s pid file is not root\'s' \
            in r.stderr, r.stderr
        assert not marker.exists(), marker.read_text()
    finally:
        for fake in fakes:
            os.killpg(fake.pid, signal.SIGKILL)
            fake.wait()
        cluster('down')
        # the account empties its folder; root removes its own folder and the empty one
        subprocess.run(as_account + ['find', str(work / 'out'), '-mindepth', '1', '-delete'])
        shutil.rmtree(work, ignore_errors=True)


def test_a_checkout_under_tmp_is_seen_on_every_node(clean):
    """Each node has a /tmp of its own; a checkout there is still seen on the nodes, as on a
    shared file system (jobs run programs from it: StartupTime's launch_times.py once failed)."""
    from testbed import registry
    account = registry.load().run_as
    copy = Path(tempfile.mkdtemp(prefix='testbed-checkout-', dir='/tmp'))
    try:
        for part in ('site', 'reframe/testbed'):
            shutil.copytree(REPO / part, copy / part)
        os.chmod(copy, 0o755)
        r = subprocess.run([sys.executable, str(copy / 'site' / 'cluster' / 'cluster.py'), 'up',
                            '--nodes', '2'], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        as_account = ['setpriv', f'--reuid={account}', f'--regid={account}', '--init-groups']
        r = subprocess.run(as_account + ['/run/mpi-testbed-cluster/agent', 'node2', '-n',
                                         f'hostname; ls {copy}/site/cluster/cluster.py'],
                           capture_output=True, text=True, timeout=30, cwd='/')
        assert r.returncode == 0, r.stderr
        assert r.stdout.split() == ['node2', f'{copy}/site/cluster/cluster.py']
    finally:
        cluster('down')
        shutil.rmtree(copy, ignore_errors=True)


def registry(path, method='GET', data=None):
    """(HTTP status, body) of the cluster's registry at `path` (from the host, on the bridge)."""
    import urllib.error
    import urllib.request
    req = urllib.request.Request(f'http://198.18.0.3:5000{path}', data=data, method=method)
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_the_registry_keeps_its_images_across_down_and_up_only_when_asked(clean):
    """Up starts the registry on the bridge as the package's account; a blob pushed to it
    survives `down --keep-registry` and the next up; a plain down removes the storage; a killed
    registry is named by status."""
    r = cluster('up', '--nodes', '1')
    assert r.returncode == 0, r.stderr
    assert 'OCI registry tbreg 198.18.0.3:5000' in r.stdout
    assert registry('/v2/') == (200, '{}')
    assert REGISTRY_DIR.owner() == 'docker-registry'
    # a blob, pushed as the OCI distribution API has it (a monolithic upload)
    import hashlib
    blob = b'mpi-testbed unittest blob'
    digest = 'sha256:' + hashlib.sha256(blob).hexdigest()
    import urllib.request
    req = urllib.request.Request('http://198.18.0.3:5000/v2/unittest/blobs/uploads/',
                                 method='POST')
    with urllib.request.urlopen(req, timeout=5) as resp:
        assert resp.status == 202
        loc = resp.headers['Location']
    if loc.startswith('/'):
        loc = 'http://198.18.0.3:5000' + loc
    sep = '&' if '?' in loc else '?'
    put = urllib.request.Request(f'{loc}{sep}digest={digest}', data=blob, method='PUT',
                                 headers={'Content-Type': 'application/octet-stream'})
    with urllib.request.urlopen(put, timeout=5) as resp:
        assert resp.status == 201
    assert registry(f'/v2/unittest/blobs/{digest}', 'HEAD')[0] == 200
    # a node's image storage: the job account's, seen by the node at one path, and what the
    # account put there (read-only folders as in an unpacked image) removed at down
    from testbed import registry as stacks
    account = stacks.load().run_as
    assert (NODE_IMAGES / 'node1').owner() == account
    r = subprocess.run(CLUSTER + ['exec', 'node1', '--', 'setpriv', f'--reuid={account}',
                                  f'--regid={account}', '--init-groups', 'sh', '-c',
                                  f'mkdir -p {NODE_IMAGES}/this-node/x/usr && echo hi > '
                                  f'{NODE_IMAGES}/this-node/x/usr/f && chmod 555 '
                                  f'{NODE_IMAGES}/this-node/x/usr'],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert (NODE_IMAGES / 'node1' / 'x' / 'usr' / 'f').read_text() == 'hi\n'
    assert not (NODE_IMAGES / 'this-node' / 'x').exists()      # the host sees the mount point
    r = cluster('down', '--keep-registry')
    assert r.returncode == 0 and 'kept (--keep-registry)' in r.stdout
    assert not NODE_IMAGES.exists()
    assert REGISTRY_DIR.is_dir()
    r = cluster('up', '--nodes', '1')
    assert r.returncode == 0, r.stderr
    assert registry(f'/v2/unittest/blobs/{digest}', 'HEAD')[0] == 200
    # killed: status says so and fails; down still removes everything
    pid = int(subprocess.run(['pgrep', '-f', '^docker-registry serve /run/mpi-testbed-cluster/'],
                             stdout=subprocess.PIPE, text=True).stdout.split()[0])
    os.kill(pid, signal.SIGKILL)
    until(lambda: not alive(pid), 'the registry to die')
    r = cluster('status')
    assert r.returncode == 1 and 'the OCI registry does not answer' in r.stdout
    r = cluster('down')
    assert r.returncode == 0 and 'removed (keep it with KEEP_REGISTRY=1)' in r.stdout
    assert not REGISTRY_DIR.exists()
