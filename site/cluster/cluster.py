#!/usr/bin/env python3
"""The emulated cluster: munge, slurmctld and N slurmd on this one machine, each Slurm daemon in
its own network namespace (own address in 198.18.0.0/24 on one bridge), UTS namespace (own
hostname) and mount namespace (a hosts file naming the nodes), so that Slurm and every MPI
library see separate nodes and traffic between ranks crosses a real TCP/IP stack.

    cluster.py up [--nodes N] [--profile NAME] [--mtu 1500|9000]
    cluster.py status
    cluster.py down
    cluster.py check [--seconds S]         the profile's rate: a raw TCP stream node1 -> node2
    cluster.py exec NODE -- COMMAND...     run a command inside a node, as root (for a person)

The fallback launcher's agent, for jobs: site/cluster/agent (as the job account, through sudo
and site/cluster/enter-node; `up` copies both into the cluster's folder, where jobs run them,
and allows enter-node in /etc/sudoers.d/mpi-testbed-cluster; `down` removes all three).

Run as root. Everything lives under /run/mpi-testbed-cluster (TESTBED_CLUSTER_DIR); `down` finds
what to remove by name and by that folder, so it also works after a crash or an interrupted `up`.
Link profiles: site/cluster/links.toml. Docs: docs/cluster.md.
"""
import argparse
import json
import os
import pwd
import shlex
import shutil
import signal
import subprocess
import sys
import time
import tomllib
import urllib.request

from testbed_site.cluster import node_images, oci_registry

HERE = os.path.dirname(os.path.abspath(__file__))
LINKS = os.path.join(HERE, 'links.toml')
RUN = os.environ.get('TESTBED_CLUSTER_DIR', '/run/mpi-testbed-cluster')
STATE = os.path.join(RUN, 'state.json')
MAX_NODES = 4
MTUS = (1500, 9000)
PREFIX = 'tbc-'                      # every namespace and link this script makes starts so
BRIDGE = PREFIX + 'br0'
SUBNET = '198.18.0'                  # RFC 2544 benchmarking range; /24 of it
HOST_ADDR = f'{SUBNET}.1'
CTL = {'name': 'tbctl', 'ns': PREFIX + 'ctl', 'veth': PREFIX + 'v0', 'addr': f'{SUBNET}.2'}
REG = oci_registry.REGISTRY          # the OCI registry's member of the bridge (oci_registry.py)
SLURM_PLUGINS = '/usr/lib/x86_64-linux-gnu/slurm-wlm'
SUDOERS = os.environ.get('TESTBED_CLUSTER_SUDOERS', '/etc/sudoers.d/mpi-testbed-cluster')
REPO = os.path.dirname(os.path.dirname(HERE))


class ClusterError(Exception):
    pass


def node(i):
    return {'name': f'node{i}', 'ns': f'{PREFIX}node{i}', 'veth': f'{PREFIX}v{i}',
            'addr': f'{SUBNET}.{10 + i}', 'cpu': (i - 1) % (os.cpu_count() or 1)}


def sh(*argv, check=True):
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if check and r.returncode:
        raise ClusterError(f"{' '.join(argv)}: exit {r.returncode}: {r.stderr.strip()}")
    return r


def in_ns(ns, *argv, check=True):
    return sh('ip', 'netns', 'exec', ns, *argv, check=check)


# -- link profiles -----------------------------------------------------------------------------

def load_profiles(path=LINKS):
    try:
        with open(path, 'rb') as fh:
            data = tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise ClusterError(f'{path}: {e}')
    known = {'descr', 'rate_mbit', 'bucket_us', 'gso_max_bytes', 'tcp_rmem', 'tcp_wmem'}
    for name, prof in data.items():
        if not isinstance(prof, dict):
            raise ClusterError(f'{path}: [{name}]: a profile is a table')
        for field in prof:
            if field not in known:
                raise ClusterError(f'{path}: [{name}].{field}: unknown field '
                                   f'(known: {", ".join(sorted(known))})')
        if 'delay_us' in prof:
            raise ClusterError(f'{path}: [{name}].delay_us: a delay needs netem, which this '
                               f'kernel lacks (CONFIG_NET_SCH_NETEM is not set)')
        for field in ('rate_mbit', 'bucket_us', 'gso_max_bytes'):
            v = prof.get(field)
            if v is not None and (not isinstance(v, (int, float)) or v <= 0):
                raise ClusterError(f'{path}: [{name}].{field}: {v!r} is not a positive number')
        v = prof.get('gso_max_bytes')
        if v is not None and not (isinstance(v, int) and 1500 <= v <= 65536):
            raise ClusterError(f'{path}: [{name}].gso_max_bytes: {v!r} is not a whole number '
                               f'of bytes in 1500..65536 (the kernel\'s gso_max_size)')
        for field in ('tcp_rmem', 'tcp_wmem'):
            v = prof.get(field)
            if v is not None and (not isinstance(v, str) or len(v.split()) != 3
                                  or not all(x.isdigit() for x in v.split())):
                raise ClusterError(f'{path}: [{name}].{field}: {v!r} is not "min default max" '
                                   f'in bytes')
    return data


def profile(name, path=LINKS):
    profiles = load_profiles(path)
    if name not in profiles:
        raise ClusterError(f'{path}: no link profile {name!r} (known: '
                           f'{", ".join(profiles)})')
    return profiles[name]


# -- configuration files -----------------------------------------------------------------------

def slurm_conf(nodes):
    lines = [
        '# Written by site/cluster/cluster.py for the emulated cluster; rewritten at every up.',
        'ClusterName=testbed',
        f"SlurmctldHost={CTL['name']}({CTL['addr']})",
        'AuthType=auth/munge', 'CredType=cred/munge',
        f'AuthInfo=socket={RUN}/munge/munge.socket',
        'SlurmUser=slurm', 'SlurmdUser=root',
        'SlurmctldPort=6817', 'SlurmdPort=6818',
        f'StateSaveLocation={RUN}/ctld', f'SlurmdSpoolDir={RUN}/%n',
        f'SlurmctldPidFile={RUN}/slurmctld.pid', f'SlurmdPidFile={RUN}/%n/slurmd.pid',
        f'SlurmctldLogFile={RUN}/log/slurmctld.log', f'SlurmdLogFile={RUN}/log/slurmd-%n.log',
        f'PluginDir={SLURM_PLUGINS}',
        # No cgroups: the nodes share one kernel; each slurmd's CPU mask (its node's core) is
        # inherited by its tasks, so ranks on two nodes sit on two different cores.
        'ProctrackType=proctrack/linuxproc', 'TaskPlugin=task/none',
        'JobAcctGatherType=jobacct_gather/none', 'AccountingStorageType=accounting_storage/none',
        'SelectType=select/cons_tres', 'SelectTypeParameters=CR_CPU',
        'SchedulerType=sched/backfill', 'MpiDefault=none', 'ReturnToService=2',
        'SlurmctldTimeout=30', 'SlurmdTimeout=30', 'InactiveLimit=0', 'KillWait=5',
        'MinJobAge=60', 'Waittime=0',
    ]
    for n in nodes:
        lines.append(f"NodeName={n['name']} NodeAddr={n['addr']} NodeHostname={n['name']} "
                     f"CPUs=1 RealMemory=1000 State=UNKNOWN")
    names = ','.join(n['name'] for n in nodes)
    lines.append(f'PartitionName=cluster Nodes={names} Default=YES MaxTime=120 State=UP '
                 f'OverSubscribe=NO')
    return '\n'.join(lines) + '\n'


def hosts_file(nodes):
    lines = ['127.0.0.1 localhost', f'{HOST_ADDR} tbhost', f"{CTL['addr']} {CTL['name']}",
             f"{REG['addr']} {REG['name']}"]
    lines += [f"{n['addr']} {n['name']}" for n in nodes]
    return '\n'.join(lines) + '\n'


# -- network -----------------------------------------------------------------------------------

def add_link(member, mtu):
    """A namespace for `member`, a veth pair: eth0 inside, member['veth'] on the bridge."""
    ns, veth = member['ns'], member['veth']
    sh('ip', 'netns', 'add', ns)
    sh('ip', 'link', 'add', veth, 'mtu', str(mtu), 'type', 'veth', 'peer', 'name', 'eth0',
       'netns', ns)
    sh('ip', 'link', 'set', veth, 'master', BRIDGE, 'up')
    in_ns(ns, 'ip', 'link', 'set', 'lo', 'up')
    in_ns(ns, 'ip', 'link', 'set', 'eth0', 'mtu', str(mtu), 'up')
    in_ns(ns, 'ip', 'addr', 'add', f"{member['addr']}/24", 'dev', 'eth0')


def frame_bytes(mtu):
    """A frame as the token bucket counts it, with room for the link-layer header."""
    return mtu + 64


def bucket_bytes(mtu, prof):
    """The token bucket of a shaped link: `bucket_us` microseconds of the rate, and at least
    two frames and one of the largest packets the node's TCP hands the link (gso_max_bytes)
    with a frame's headers, so that tbf never cuts a packet into frames. A bucket of two
    frames made tbf wait for a timer every two frames (2.5 us at 10 Gbit/s, MTU 1500); this
    VM's timers fire tens of microseconds late, so 10gige carried about 100 MB/s
    (docs/cluster.md, "Link profiles")."""
    least = max(2 * frame_bytes(mtu), prof.get('gso_max_bytes', 0) + frame_bytes(mtu))
    return max(least, round(prof['rate_mbit'] * prof.get('bucket_us', 0) / 8))


def shape(member, prof, mtu):
    """Apply a link profile to the egress of the member's eth0; returns what was applied.

    Rate by tbf: this kernel has tbf and htb but no netem (CONFIG_NET_SCH_NETEM is not set),
    so no delay can be added. The bucket (bucket_bytes) is what a message can borrow from an
    idle link: 20 kB at gige (1.9 % of 1 MiB), 200 kB at 10gige (19 %)."""
    ns, applied = member['ns'], {}
    if prof.get('gso_max_bytes'):
        in_ns(ns, 'ip', 'link', 'set', 'dev', 'eth0', 'gso_max_size', str(prof['gso_max_bytes']))
        applied['gso_max_size'] = prof['gso_max_bytes']
    if prof.get('rate_mbit'):
        burst = bucket_bytes(mtu, prof)
        argv = ['tc', 'qdisc', 'add', 'dev', 'eth0', 'root', 'tbf',
                'rate', f"{prof['rate_mbit']}mbit", 'burst', str(burst), 'latency', '50ms']
        in_ns(ns, *argv)
        applied['qdisc'] = ' '.join(argv[6:])
    for key in ('tcp_rmem', 'tcp_wmem'):
        if prof.get(key):
            in_ns(ns, 'sysctl', '-q', '-w', f'net.ipv4.{key}={prof[key]}')
            applied[key] = prof[key]
    return applied


# -- daemons -----------------------------------------------------------------------------------

def enter(ns):
    """The command prefix that enters a node: its network namespace, and new UTS and mount
    namespaces (for its hostname and hosts file) and a new IPC namespace (nodes share no System V
    shared memory: MPICH used it between two nodes when they did). nsenter rather than `ip netns exec`, which
    mounts a fresh /sys and so hides the cgroup mounts that slurmd needs."""
    return ['nsenter', f'--net=/run/netns/{ns}', 'unshare', '--uts', '--ipc', '--mount',
            '--propagation', 'private', '--']


def node_setup(hostname):
    """Shell commands, run in a node's new UTS and mount namespaces, that make it a node: its
    hostname, the hosts file naming every node, and a /tmp and /dev/shm of its own (a node shares
    no memory with another; PMIx's per-job folders in /tmp would collide). /var/tmp, where
    stages live, stays shared like a cluster's shared file system, and so does the repository
    where it is checked out under /tmp (its jobs run programs from it)."""
    tmp = f'{RUN}/tmp/{hostname}'
    shared = repo_under_tmp()
    keep = f' && mount --bind {shlex.quote(REPO)} {shlex.quote(tmp + "/" + shared)}' \
        if shared else ''
    # the node's own image storage at the path every node names (node_images.py)
    images = (f' && mount --bind {shlex.quote(node_images.STORE + "/" + hostname)} '
              f'{shlex.quote(node_images.THIS_NODE)}')
    return (f'hostname {hostname} && mount --bind {RUN}/hosts /etc/hosts{keep}'
            f' && mount --rbind {tmp} /tmp && mount -t tmpfs -o mode=1777,size=4g tmpfs /dev/shm'
            f'{images}')


def repo_under_tmp():
    """The repository's path below /tmp where it is checked out there (a node's /tmp is its
    own: node_setup), else ''."""
    rel = os.path.relpath(os.path.realpath(REPO), '/tmp')
    return '' if rel == '.' or rel == '..' or rel.startswith('../') else rel


def start_in(member, hostname, argv, log, cpu=None):
    """Start a daemon in the member's network namespace, with its own hostname and hosts file.
    Output goes to a file: a daemon holding a pipe would keep its caller waiting."""
    script = node_setup(hostname) + ' && exec "$@"'
    cmd = enter(member['ns']) + ['sh', '-c', script, 'sh']
    if cpu is not None:
        cmd += ['taskset', '-c', str(cpu)]
    cmd += argv
    with open(log, 'ab') as out:
        subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                         start_new_session=True, env=daemon_env())


def daemon_env():
    env = {k: v for k, v in os.environ.items() if not k.startswith(('SLURM_', 'TESTBED_RUN'))}
    env['SLURM_CONF'] = f'{RUN}/slurm.conf'
    return env


def wait_for(what, test, timeout, log=None):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if test():
            return
        time.sleep(0.2)
    tail = ''
    if log and os.path.exists(log):
        with open(log, errors='replace') as fh:
            tail = '\n  ' + '\n  '.join(fh.read().splitlines()[-8:])
    raise ClusterError(f'{what} did not come up within {timeout} s{tail}')


def start_munge():
    """munged for this cluster only: its own key, socket and seed under RUN/munge. The socket's
    folder must be searchable by all (every client connects); the key's folder is munge's."""
    d, keydir = f'{RUN}/munge', f'{RUN}/munge/key'
    munge = pwd.getpwnam('munge')
    for path, mode in ((d, 0o755), (keydir, 0o700)):
        os.makedirs(path)
        os.chmod(path, mode)
        os.chown(path, munge.pw_uid, munge.pw_gid)
    key = f'{keydir}/munge.key'
    # A key made for this cluster only: 1024 random bytes, 0400, owned by munge.
    fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400)
    with os.fdopen(fd, 'wb') as fh:
        fh.write(os.urandom(1024))
    os.chown(key, munge.pw_uid, munge.pw_gid)
    argv = ['runuser', '-u', 'munge', '--', 'munged', '--foreground', f'--key-file={key}',
            f'--socket={d}/munge.socket', f'--pid-file={d}/munged.pid',
            f'--log-file={RUN}/log/munged.log', f'--seed-file={keydir}/munged.seed']
    with open(f'{RUN}/log/munged.out', 'ab') as out:
        subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                         start_new_session=True)
    wait_for('munged', lambda: os.path.exists(f'{d}/munge.socket'), 15,
             f'{RUN}/log/munged.out')


def start_registry():
    """The OCI registry (oci_registry.py) in its own namespace, as the account Debian's package
    made; its storage outside RUN survives `down --keep-registry`. Returns the state's entry."""
    acct = pwd.getpwnam(oci_registry.ACCOUNT)
    os.makedirs(oci_registry.STORAGE, mode=0o750, exist_ok=True)
    os.chown(oci_registry.STORAGE, acct.pw_uid, acct.pw_gid)
    conf = f'{RUN}/registry.yml'
    with open(conf, 'w') as fh:
        fh.write(oci_registry.config())
    os.chmod(conf, 0o640)
    os.chown(conf, 0, acct.pw_gid)
    argv = ['nsenter', f"--net=/run/netns/{REG['ns']}", 'runuser', '-u', oci_registry.ACCOUNT,
            '--', 'docker-registry', 'serve', conf]
    log = f'{RUN}/log/registry.log'
    with open(log, 'ab') as out:
        subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                         start_new_session=True)
    url = f"http://{REG['addr']}:{oci_registry.PORT}/v2/"
    wait_for(f'the OCI registry ({url})', lambda: registry_answers(url), 20, log)
    return {'addr': REG['addr'], 'port': oci_registry.PORT, 'storage': oci_registry.STORAGE,
            'log': log}


def registry_answers(url):
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


def slurm_ready(nodes):
    r = subprocess.run(['sinfo', '-h', '-N', '-o', '%N %t'], stdout=subprocess.PIPE,
                       stderr=subprocess.DEVNULL, text=True, env=daemon_env())
    if r.returncode:
        return False
    states = dict(line.split() for line in r.stdout.splitlines() if line.strip())
    return all(states.get(n['name'], '').rstrip('*') == 'idle' for n in nodes)


# -- up / down / status ------------------------------------------------------------------------

def up(n_nodes, profile_name, mtu):
    if not 1 <= n_nodes <= MAX_NODES:
        raise ClusterError(f'NODES: {n_nodes} is outside 1..{MAX_NODES} (every node shares '
                           f'this machine\'s {os.cpu_count()} cores)')
    if mtu not in MTUS:
        raise ClusterError(f'MTU: {mtu} is not one of {", ".join(map(str, MTUS))}')
    prof = profile(profile_name)
    left = leftovers()
    if os.path.exists(STATE) or left:
        raise ClusterError(f'a cluster is already up or half-built ({STATE}; '
                           f'{", ".join(left) or "state file only"}): '
                           f'run `make cluster-down` first')
    for tool in ('slurmctld', 'slurmd', 'munged', 'sinfo', 'tc', 'docker-registry'):
        if not shutil.which(tool):
            raise ClusterError(f'{tool} is not installed: run `make setup`')
    nodes = [node(i) for i in range(1, n_nodes + 1)]
    kept_before = os.path.isdir(oci_registry.STORAGE)   # images kept by an earlier down
    try:
        os.makedirs(f'{RUN}/log', mode=0o755)
        os.chmod(RUN, 0o755)
        slurm = pwd.getpwnam('slurm')
        os.makedirs(f'{RUN}/ctld', mode=0o700)
        os.chown(f'{RUN}/ctld', slurm.pw_uid, slurm.pw_gid)
        os.chown(f'{RUN}/log', 0, slurm.pw_gid)
        os.chmod(f'{RUN}/log', 0o775)        # slurmctld (user slurm) writes its log here
        shared = repo_under_tmp()
        make_node_stores([CTL] + nodes)
        for member in [CTL] + nodes:
            name = member['name']
            os.makedirs(f'{RUN}/{name}', mode=0o755)
            os.makedirs(f'{RUN}/tmp/{name}')
            os.chmod(f'{RUN}/tmp/{name}', 0o1777)
            if shared:                  # the mount point of the checkout (node_setup)
                os.makedirs(f'{RUN}/tmp/{name}/{shared}')
        for name, text in (('slurm.conf', slurm_conf(nodes)), ('hosts', hosts_file(nodes))):
            with open(f'{RUN}/{name}', 'w') as fh:
                fh.write(text)
            os.chmod(f'{RUN}/{name}', 0o644)
        sh('ip', 'link', 'add', BRIDGE, 'mtu', str(mtu), 'type', 'bridge')
        sh('ip', 'addr', 'add', f'{HOST_ADDR}/24', 'dev', BRIDGE)
        sh('ip', 'link', 'set', BRIDGE, 'up')
        add_link(CTL, mtu)
        add_link(REG, mtu)
        registry = start_registry()
        shaping = {}
        for n in nodes:
            add_link(n, mtu)
            shaping[n['name']] = shape(n, prof, mtu)
        allow_agent()
        start_munge()
        start_in(CTL, CTL['name'], ['slurmctld', '-D', '-i', '-f', f'{RUN}/slurm.conf'],
                 f'{RUN}/log/slurmctld.out')
        for n in nodes:
            start_in(n, n['name'], ['slurmd', '-D', '-f', f'{RUN}/slurm.conf',
                                    '-N', n['name']],
                     f"{RUN}/log/slurmd-{n['name']}.out", cpu=n['cpu'])
        wait_for('Slurm (every node idle in sinfo)', lambda: slurm_ready(nodes), 60,
                 f'{RUN}/log/slurmctld.log')
        state = {'nodes': nodes, 'profile': profile_name, 'mtu': mtu,
                 'link': {k: v for k, v in prof.items()}, 'applied': shaping,
                 'bucket_bytes': bucket_bytes(mtu, prof) if prof.get('rate_mbit') else None,
                 'controller': CTL, 'bridge': BRIDGE, 'host_addr': HOST_ADDR,
                 'slurm_conf': f'{RUN}/slurm.conf', 'registry': registry,
                 'started': time.time()}
        with open(STATE, 'w') as fh:
            json.dump(state, fh, indent=1)
    except BaseException as e:
        kept = keep_logs()
        print(f'cluster up failed: {e}\ntaking down what was built; daemon logs kept in '
              f'{kept}', file=sys.stderr)
        down(quiet=True, keep_registry=kept_before)
        raise
    print(f"cluster up: {n_nodes} node(s) {', '.join(n['name'] for n in nodes)}, link profile "
          f"{profile_name}, MTU {mtu}; SLURM_CONF={RUN}/slurm.conf; OCI registry "
          f"{REG['name']} {REG['addr']}:{oci_registry.PORT} (storage {oci_registry.STORAGE})")


def make_node_stores(members):
    """Each member's image storage (node_images.py), the job account's, and the mount point
    where a node sees its own."""
    acct = pwd.getpwnam(job_account())
    os.makedirs(node_images.THIS_NODE, mode=0o755, exist_ok=True)
    for m in members:
        path = os.path.join(node_images.STORE, m['name'])
        os.makedirs(path, mode=0o755, exist_ok=True)
        os.chown(path, acct.pw_uid, acct.pw_gid)


def remove_node_stores():
    """The nodes' images: their contents removed by the job account that pulled them (root
    never acts inside what the account made), then the folders root made."""
    store = node_images.STORE
    if not os.path.isdir(store):
        return
    account = job_account()
    for name in os.listdir(store):
        path = os.path.join(store, name)
        if name != 'this-node' and os.path.isdir(path):
            sh('setpriv', f'--reuid={account}', f'--regid={account}', '--init-groups', 'sh',
               '-c', 'cd "$1" && chmod -R u+w . && find . -mindepth 1 -delete', 'sh', path,
               check=False)
    for name in os.listdir(store):
        try:
            os.rmdir(os.path.join(store, name))
        except OSError as err:
            raise ClusterError(f'{os.path.join(store, name)}: not removed ({err.strerror}): '
                               f'the job account\'s files are left in it')
    os.rmdir(store)


def job_account():
    from testbed import registry      # the set-up installed the package into the venv
    return registry.load().run_as


def allow_agent():
    """Let the job account enter the nodes through the fallback agent: root-owned copies of
    agent and enter-node in the cluster's folder (root's 0755, so the account cannot change
    what sudo runs, and can run the agent even when the clone is in a folder it may not enter,
    as root's home) and one sudoers rule for enter-node alone, checked by visudo before it is
    put in place."""
    account = job_account()
    if not account.replace('-', '').replace('_', '').isalnum():
        raise ClusterError(f'defaults.run_as: {account!r} is not a plain account name')
    for name, default in (('agent', 'run=${TESTBED_CLUSTER_DIR:-/run/mpi-testbed-cluster}\n'),
                          ('enter-node', 'run=/run/mpi-testbed-cluster\n')):
        with open(os.path.join(HERE, name)) as fh:
            text = fh.read()
        if default not in text:
            raise ClusterError(f'site/cluster/{name}: no line {default.strip()!r} to set')
        with open(f'{RUN}/{name}', 'w') as fh:
            fh.write(text.replace(default, f'run={RUN}\n', 1))
        os.chmod(f'{RUN}/{name}', 0o755)
    target = f'{RUN}/enter-node'
    if not shutil.which('sudo'):
        raise ClusterError('sudo is not installed (the fallback agent needs it): run `make setup`')
    tmp = f'{RUN}/sudoers'
    with open(tmp, 'w') as fh:
        fh.write(f'# made by site/cluster/cluster.py up; removed by down\n'
                 f'{account} ALL=(root) NOPASSWD: {target}\n')
    os.chmod(tmp, 0o440)
    sh('visudo', '-c', '-q', '-f', tmp)
    shutil.move(tmp, SUDOERS)


def keep_logs():
    """Copy the daemons' logs out of RUN (which `down` removes) so a failure can be read."""
    dest = os.environ.get('TESTBED_CLUSTER_LOGS', '/var/tmp/mpi-testbed-cluster-logs')
    shutil.rmtree(dest, ignore_errors=True)
    if os.path.isdir(f'{RUN}/log'):
        shutil.copytree(f'{RUN}/log', dest)
    return dest


def our_netns():
    """This project's network namespaces that exist now."""
    r = sh('ip', 'netns', 'list', check=False)
    return [line.split()[0] for line in r.stdout.splitlines() if line.startswith(PREFIX)]


def our_links():
    """This project's bridge and veths (host side) that exist now."""
    r = sh('ip', '-o', 'link', 'show', check=False)
    names = [line.split(':')[1].strip().split('@')[0] for line in r.stdout.splitlines()]
    return [name for name in names if name.startswith(PREFIX)]


def leftovers():
    """Names of this project's namespaces, links and daemons that exist now."""
    return our_netns() + our_links() + [f'pid {p}' for p in daemon_pids()] + (
        [SUDOERS] if os.path.exists(SUDOERS) else [])


def daemon_pids():
    """Processes started for the cluster: their command line names the cluster's folder."""
    pids = []
    for p in os.listdir('/proc'):
        if not p.isdigit() or int(p) == os.getpid():
            continue
        try:
            with open(f'/proc/{p}/cmdline', 'rb') as fh:
                cmd = fh.read().replace(b'\0', b' ').decode(errors='replace')
        except OSError:
            continue
        if RUN + '/' in cmd and any(d in cmd for d in ('slurmctld', 'slurmd', 'munged',
                                                       'slurmstepd', 'docker-registry')):
            pids.append(int(p))
    return pids


def down(quiet=False, keep_registry=False):
    """Remove everything this script makes, whatever state it is in; idempotent. The registry's
    storage (outside RUN) is removed too unless `keep_registry`."""
    had = leftovers() or os.path.exists(RUN)
    # Jobs first (their steps run under slurmstepd), then the daemons.
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = daemon_pids()
        for p in pids:
            try:
                os.kill(p, sig)
            except ProcessLookupError:
                pass
        end = time.monotonic() + 10
        while daemon_pids() and time.monotonic() < end:
            time.sleep(0.2)
    # Anything still inside a node's namespace (a job's ranks) goes with it.
    for ns in our_netns():
        pids = sh('ip', 'netns', 'pids', ns, check=False).stdout.split()
        for p in pids:
            try:
                os.kill(int(p), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
        sh('ip', 'netns', 'del', ns, check=False)
    for name in our_links():
        sh('ip', 'link', 'del', name, check=False)
    if os.path.exists(SUDOERS):
        os.remove(SUDOERS)
    shutil.rmtree(RUN, ignore_errors=True)
    remove_node_stores()
    kept = os.path.isdir(oci_registry.STORAGE)
    if kept and not keep_registry:
        shutil.rmtree(oci_registry.STORAGE, ignore_errors=True)
    left = leftovers()
    if left:
        raise ClusterError(f'cluster down left behind: {", ".join(left)}')
    if not quiet:
        print('cluster down: removed the namespaces, bridge, veths, daemons and '
              f'{RUN}' if had else 'cluster down: nothing was up')
        if kept:
            print(f'cluster down: the registry\'s storage {oci_registry.STORAGE} '
                  + ('kept (--keep-registry): the next up serves its images' if keep_registry
                     else 'removed (keep it with KEEP_REGISTRY=1)'))


def status():
    if not os.path.exists(STATE):
        left = leftovers()
        print('cluster: not up' + (f'; half-built leftovers: {", ".join(left)} '
                                   f'(run `make cluster-down`)' if left else ''))
        return 1 if left else 0
    with open(STATE) as fh:
        st = json.load(fh)
    print(f"cluster: {len(st['nodes'])} node(s), link profile {st['profile']}, MTU {st['mtu']}, "
          f"SLURM_CONF={st['slurm_conf']}")
    for n in st['nodes']:
        print(f"  {n['name']:6} {n['addr']:14} netns {n['ns']:12} cpu {n['cpu']}  "
              f"{st['applied'].get(n['name']) or 'unshaped'}")
    dead = [f'{what} is not running (killed? see {RUN}/log; `make cluster-down` cleans up)'
            for what, pidfile in [('munged', f'{RUN}/munge/munged.pid'),
                                  ('slurmctld', f'{RUN}/slurmctld.pid')] +
            [(f"slurmd of {n['name']}", f"{RUN}/{n['name']}/slurmd.pid") for n in st['nodes']]
            if not alive(pidfile)]
    reg = st['registry']
    print(f"  registry {REG['name']} {reg['addr']}:{reg['port']}, storage {reg['storage']}")
    if not registry_answers(f"http://{reg['addr']}:{reg['port']}/v2/"):
        dead.append(f"the OCI registry does not answer (see {reg['log']})")
    for line in dead:
        print(f'  {line}')
    r = subprocess.run(['sinfo', '-N', '-o', '%N %t %c'], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, env=daemon_env(), timeout=30)
    print('  ' + r.stdout.strip().replace('\n', '\n  '))
    return 0 if r.returncode == 0 and not dead else 1


def alive(pidfile):
    """The pid file's process exists and is not a zombie (a killed daemon whose parent, init
    here, has not reaped it yet)."""
    try:
        with open(pidfile) as fh:
            pid = int(fh.read().split()[0])
        with open(f'/proc/{pid}/stat') as fh:
            return fh.read().rsplit(')', 1)[1].split()[0] != 'Z'
    except (OSError, ValueError, IndexError):
        return False


def exec_in(name, argv):
    """The fallback agent: run `argv` inside node `name` (its netns, hostname and hosts)."""
    if not os.path.exists(STATE):
        raise ClusterError('cluster: not up (run `make cluster-up`)')
    with open(STATE) as fh:
        st = json.load(fh)
    member = next((n for n in st['nodes'] if n['name'] == name), None)
    if member is None:
        raise ClusterError(f"no node {name!r} (nodes: {', '.join(n['name'] for n in st['nodes'])})")
    script = node_setup(name) + ' && exec "$@"'
    cmd = enter(member['ns']) + ['sh', '-c', script, 'sh', *argv]
    os.execvp(cmd[0], cmd)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    sub = ap.add_subparsers(dest='cmd', required=True)
    u = sub.add_parser('up', help='start the cluster')
    u.add_argument('--nodes', default='2', help=f'number of nodes, 1..{MAX_NODES} (default 2)')
    u.add_argument('--profile', default='native', help='link profile of links.toml')
    u.add_argument('--mtu', default='1500', help='1500 or 9000')
    sub.add_parser('status', help='what is up')
    d = sub.add_parser('down', help='remove everything, also after a crash')
    d.add_argument('--keep-registry', action='store_true',
                   help="keep the OCI registry's storage (its images) for the next up")
    c = sub.add_parser('check', help="the profile's rate: a raw TCP stream between two nodes")
    c.add_argument('--seconds', default='1', help='length of each stream (default 1)')
    e = sub.add_parser('exec', help='run a command inside a node')
    e.add_argument('node')
    e.add_argument('command', nargs=argparse.REMAINDER)
    a = ap.parse_args(argv)
    try:
        if os.geteuid() != 0:
            raise ClusterError('the cluster needs root (namespaces, daemons): run as root')
        if a.cmd == 'up':
            for field, v in (('NODES', a.nodes), ('MTU', a.mtu)):
                if not v.isdigit():
                    raise ClusterError(f'{field}: {v!r} is not a whole number')
            up(int(a.nodes), a.profile, int(a.mtu))
        elif a.cmd == 'down':
            down(keep_registry=a.keep_registry)
        elif a.cmd == 'status':
            return status()
        elif a.cmd == 'check':
            from testbed_site.cluster import link_rate
            try:
                seconds = float(a.seconds)
            except ValueError:
                seconds = 0
            if not 0.2 <= seconds <= 30:
                raise ClusterError(f'--seconds: {a.seconds!r} is not a number of seconds in '
                                   f'0.2..30')
            ok, line = link_rate.check(seconds)
            print(line)
            return 0 if ok else 1
        elif a.cmd == 'exec':
            cmd = a.command[1:] if a.command[:1] == ['--'] else a.command
            if not cmd:
                raise ClusterError('exec: give a command after the node name')
            exec_in(a.node, cmd)
    except ClusterError as e:
        print(f'error: {e}', file=sys.stderr)
        return 2
    return 0


if __name__ == '__main__':
    sys.exit(main())
