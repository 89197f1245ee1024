"""PVM through our timing core beside NetPIPE's PVM module, in one job, on the same pvmd.

NetPIPE 3.7.2's NPpvm (Debian netpipe-pvm) sends with pvm_initsend(PvmDataInPlace) +
pvm_pkbyte + pvm_send on the direct route (PvmRouteDirect) and receives with pvm_recv +
pvm_upkbyte (NetPIPE's src/pvm.c): our p2p-pvm case send-recv, variant direct-inplace. NetPIPE
sends from and receives into one buffer (args.s_buff = args.r_buff in netpipe.c); ours runs the
same way here (--buffers shared) for the comparison, and once more with its default separate
buffers, reported beside it: on this machine the layout alone moves 64 KiB by +15 % and 1 MiB
by -8 % (docs/pvm.md).

Statistic, as in PeerCompare for NetPIPE's MPI modules: our minimum (over samples of a sample's
mean half round trip) against NetPIPE's time (the least of its 3 trials of about 0.1 s, a trial's
loop time / repeats / 2), both the least over all rounds; asserted within a factor 1.1 at 8 bytes
and 1 MiB, 1 KiB and 64 KiB reported. The launches alternate in `rounds` passes (NetPIPE at each
size, then ours, shared and separate), so that a change of the machine's state in mid-job hits
all alike: on this 2-core VM whole-machine states move the 8-byte figure of both between 7 and
11 us.

Pinning: p2p-pvm pins itself (--bind-self: rank r on the r-th CPU the job may use); NPpvm's two
tasks are pinned by pin_exec.py by the same rule (apps/pvm/nppvm-pair). Sanity asserts each of
every launch's two tasks ran on a CPU of its own. The side-by-side table is peers.csv in the
stage directory; the summary shows it beside the MPI peers (testbed/peer_table.py).
"""
import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import fixture, sanity_function, variable

from testbed.checks import APPS
from testbed.pvm import PvmBuild
from testbed.pvm_peers import PvmPeerCompareBase


@rfm.simple_test
class PvmPeerCompare(PvmPeerCompareBase):
    descr = 'p2p-pvm send-recv direct-inplace against NetPIPE 3.7.2 NPpvm on the same pvmd'
    # one host: NPpvm is started by hand and its tasks would not spread over a cluster's nodes
    valid_systems = ['testbed-local']
    valid_prog_environs = ['+pvm']
    # apps/pvm holds pvmd-job (the registry's boot and halt) and nppvm-pair
    sourcesdir = str(APPS / 'pvm')
    num_tasks = 2
    num_tasks_per_node = 2
    time_limit = '5m'
    build = fixture(PvmBuild, scope='environment')
    tags = {'peers', 'pvm'}
    #: our samples per size, spread evenly over the rounds, each at least min_time_ms long:
    #: as NetPIPE's 3 trials of about 0.1 s a round, so that both minima are over windows of
    #: one length (with 1 ms samples ours caught the machine's short fast spells that
    #: NetPIPE's trials average out: 8 bytes 0.79 in one run of seven)
    samples = variable(int, value=9)
    min_time_ms = variable(float, value=100.0)
    rounds = variable(int, value=3)

    @sanity_function
    def validate(self):
        return sn.all([
            sn.assert_eq(sn.defer(self.exit_code()), 0,
                         msg='p2p-pvm exited with {0}, expected {1}'),
            sn.assert_found(r'^PVMD-BOOT \{', self.boot_log(),
                            msg='no PVMD-BOOT record: the pvmd was not booted by this job'),
            sn.assert_eq(sn.defer('; '.join(self.problems)), '', msg='{0}'),
        ])
