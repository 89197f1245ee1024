"""apps/p2p's raw TCP between two hosts keeps to loopback, 198.18.0.0/15 and the networks
given with --tcp-networks (a site's, from make site's partition extras tcp_networks).

The two hosts are made in one: a network namespace of its own (no route out) whose only
address besides loopback is 203.0.113.1 (TEST-NET-3, RFC 5737: never routed), and rank 1's
gethostname() answering another name (a preloaded shim), so that rank 0 looks for an address
between hosts as it does across nodes. MPI itself stays in the host (hydra, shared memory)."""
import json
import os
import shutil
import subprocess

import pytest
from apps_copy import apps_copy

from testbed import registry
from testbed.launch import drop_privileges

ADDR = '203.0.113.1'
# lo up, and a veth pair holding the one address; `exec "$@"` runs the launch inside
NETNS = ('ip link set lo up && ip link add tbn0 type veth peer name tbn1 && '
         f'ip addr add {ADDR}/24 dev tbn0 && ip link set tbn0 up && ip link set tbn1 up && '
         'exec "$@"')
SHIM = r'''
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
/* Rank 1 (PMI_RANK=1) is on another host, as far as the program can tell. */
int gethostname(char *name, size_t len)
{
    const char *rank = getenv("PMI_RANK"), *other = getenv("TB_OTHER_HOST");
    struct utsname u;
    if (uname(&u) != 0 || len == 0)
        return -1;
    strncpy(name, rank && other && !strcmp(rank, "1") ? other : u.nodename, len);
    name[len - 1] = '\0';
    return 0;
}
'''

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which('unshare') or not shutil.which('mpicc.mpich'),
    reason='needs root (a network namespace) and the set-up\'s MPICH')


@pytest.fixture(scope='module')
def built():
    """p2p for mpich-4.0 and the hostname shim, in a copy under /var/tmp that the job account
    can read."""
    with apps_copy('tcpnet', [('p2p', 'CC=mpicc.mpich')], {'shim': SHIM}) as path:
        yield path


def two_hosts(built, rank0_opts, rank1_opts):
    """Raw TCP between 'two hosts' in a namespace of its own; each rank with its options."""
    program = [str(built / 'apps' / 'p2p' / 'p2p'), '--transport', 'tcp', '--sizes', '8,1024',
               '--samples', '3']
    cmd = ['unshare', '--net', 'sh', '-c', NETNS, 'sh'] + \
        drop_privileges(registry.load()) + \
        ['mpiexec.mpich', '-genv', 'LD_PRELOAD', str(built / 'shim.so'),
         '-genv', 'TB_OTHER_HOST', 'tb-other-host',
         '-n', '1', *program, *rank0_opts, ':', '-n', '1', *program, *rank1_opts]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=built)


def tcp_rows(proc):
    return [json.loads(line[4:]) for line in proc.stdout.splitlines()
            if line.startswith('P2P {')]


def test_an_address_outside_the_allowed_networks_is_refused(built):
    proc = two_hosts(built, [], [])
    assert proc.returncode != 0 and not tcp_rows(proc), proc.stdout
    run = json.loads(proc.stdout.split('P2P-RUN ', 1)[1].splitlines()[0])
    assert run['host_rank1'] == 'tb-other-host' != run['host']      # two hosts, as p2p sees
    assert (f'p2p: transport tcp cannot run: no address in 198.18.0.0/15 on {run["host"]}: '
            'raw TCP goes to loopback or those networks only (--tcp-networks)') in proc.stderr


def test_a_configured_network_is_used(built):
    nets = ['--tcp-networks', '10.9.0.0/16,203.0.113.77/24']
    proc = two_hosts(built, nets, nets)
    assert proc.returncode == 0, proc.stderr
    rows = tcp_rows(proc)
    assert [r['size_bytes'] for r in rows] == [8, 1024]
    assert all(r['transport'] == 'tcp' and r['checked_messages'] >= 6 for r in rows), rows


def test_rank_1_refuses_an_address_its_options_do_not_allow(built):
    proc = two_hosts(built, ['--tcp-networks', '203.0.113.0/24'], [])
    assert proc.returncode != 0 and not tcp_rows(proc), proc.stdout
    assert 'p2p: transport tcp cannot run: rank 1 refused this address (its --tcp-networks ' \
        'differ)' in proc.stderr


def test_bad_networks_are_named(built):
    # a /0 would let raw TCP reach any address; each bad item is named in one line
    for value, bad in (('10.0.0.0/0', '10.0.0.0/0'), ('10.0.0.0/33', '10.0.0.0/33'),
                       ('10.0.0/8', '10.0.0/8'), ('10.1.0.0/16,203.0.113.1', '203.0.113.1'),
                       ('10.1.0.0/16,,10.2.0.0/16', '')):
        proc = subprocess.run(drop_privileges(registry.load()) +
                              [str(built / 'apps' / 'p2p' / 'p2p'), '--tcp-networks', value],
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2 and proc.stderr.strip() == (
            f"p2p: --tcp-networks: '{bad}' is not an IPv4 network a.b.c.d/n with n from 1 to "
            f"32 (e.g. 10.1.0.0/16)"), (value, proc.stderr)
