"""Our point-to-point benchmark beside its peers: one job, the same stack, pinned the same way.

apps/p2p (Send-Recv, receive completed before the reply) runs with IMB-MPI1 PingPong and NetPIPE
3.7.2 and must agree with each within 10% (a factor 1.1 either way, as our references are
multiplicative) at every size it measures (8 B, 1 KiB, 64 KiB, 1 MiB), statistic by statistic,
half round trip in us:

- ours mean against IMB's t_avg[usec]: IMB times one loop of n round trips and prints its time
  / n / 2 (IMB_pingpong.c; scale_time 0.5 in IMB_parse_name_mpi1.c, IMB 2021), a mean, with two
  decimals (so the verdict allows +-0.005 us). Run with -iter 20000,400: 20000 round trips per
  size, at most 400 MiB (400 at 1 MiB), a loop as long as our launch's samples at the size, and
  -multi 0 so it prints t_min, t_max, t_avg.
- ours minimum against NetPIPE's time: NetPIPE runs 3 trials of about 0.1 s (TRIALS 3, RUNTM
  0.10: netpipe.h without -DFINAL, as Debian builds it), a trial's time is its loop time /
  nrepeat / 2, and it prints the least of the trials, in seconds (netpipe.c, main loop). Its
  Mbps is bits / time / 2^20. One launch per size: -l S -u S measures exactly S; -p 0 turns
  the +-3 byte perturbations off. Ours is sampled the same way in that comparison: the least of
  netpipe_trials samples of at least netpipe_trial_ms (3 of 100 ms). The least of many short
  samples is a lower statistic than the least of three long ones: with 1 ms samples (5-8 round
  trips at 1 MiB) ours read 0.90-1.00, most often 0.93-0.96, of NetPIPE's time at 1 MiB.

Rounds (sequence()): `rounds` passes of [ours, IMB, ours in NetPIPE's buffer layout, NetPIPE],
then ours once more. Each peer launch is compared with our launch just before it, and counts
only if the 8-byte shared-memory floor of our launches before and after it agree within
peer_table.STEADY: this VM's vCPUs move between host placements whose floors differ about 5x,
in mid-job. The verdict is the median over the steady rounds (at least min_steady of them);
while a peer has fewer, the job runs another round, up to max_rounds (apps/peers/
steady_rounds.py asks between rounds), so a machine that moves costs rounds, not the verdict.

Peers (each stack's `peers` in site/stacks.toml): IMB-MPI1 from the Intel MPI wheel on
intel-mpi-2021 and, through the MPICH ABI (libmpi.so.12 = libmpich.so.12), on every MPICH-ABI
stack; Debian's NPmpich2 on the same, NPopenmpi on openmpi-4.1 and, through the libmpi.so.40
ABI Open MPI 5 kept, on openmpi-5.0; NPlam on lam-7.1, with the stack's extra sources (LAM's
zero-length iovec fix) preloaded. A stack without peers is skipped, saying so.
Each rank records the MPI library it resolves (pin_exec.py): a peer must load the very file
our p2p loads.

Pinning: the registry's launcher options bind every rank (mpich -bind-to core, Open MPI
--bind-to core, Intel I_MPI_PIN=1 with I_MPI_PIN_DOMAIN=core). LAM's mpirun cannot bind: p2p
pins itself (--bind-self) and NetPIPE is started through pin_exec.py --pin, which binds rank
LAMRANK to the same CPU by the same rule. Sanity asserts each rank of every launch ran on one
CPU of its own.
The side-by-side table is peers.csv in the stage directory (kept), raw outputs in peers/.
"""
import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import fixture, sanity_function, variable

from testbed.checks import APPS
from testbed.p2p import P2PBuild
from testbed.peer_compare import PeerCompareBase


@rfm.simple_test
class PeerCompare(PeerCompareBase):
    descr = 'apps/p2p Send-Recv against IMB-MPI1 PingPong and NetPIPE on the same stack'
    valid_systems = ['*']
    valid_prog_environs = ['+mpi -no-peers']   # a stack opts out: feature no-peers
    num_tasks = 2
    num_tasks_per_node = 2
    time_limit = '5m'
    sourcesdir = str(APPS / 'peers')
    build = fixture(P2PBuild, scope='environment')
    tags = {'peers'}
    #: p2p samples per size in the launches compared with IMB, spread evenly over the rounds
    samples = variable(int, value=40)
    #: our launch compared with IMB samples for at least this long (ms): IMB's mean is one
    #: loop of 20-100 ms, and a stall of the machine weighs in a 1 ms sample 10x what it
    #: weighs in a 10 ms one (mpich-4.0 at 64 KiB: ours 1.3-2x IMB's mean with 1 ms samples,
    #: 0.8-1.0x with 10 ms; docs/peers.md)
    imb_sample_ms = variable(float, value=10.0)
    #: rounds of launches (ours, IMB, ours, NetPIPE): each peer is compared round by round
    #: with our launch just before it, and the figure is the median over the steady rounds
    rounds = variable(int, value=5)
    #: rounds of a peer that must be steady (same floor before and after) for a verdict: 5,
    #: the least the 90 % interval of their median needs (fewer leave it not held)
    min_steady = variable(int, value=5)
    #: a verdict outside the band fails only when the interval that holds the median ratio
    #: with this confidence (order statistics of the steady rounds: 5 rounds at least) lies
    #: wholly outside it; single launches on a VM move +-15 % (docs/peers.md), and a median of
    #: a few such ratios outside 1.1 is as often a draw as a disagreement
    confidence = variable(float, value=0.9)
    #: past `rounds`, the job runs another round while a peer has fewer than min_steady steady
    #: rounds, up to this many (apps/peers/steady_rounds.py decides in the job): a machine
    #: that moves takes more rounds, rather than a verdict given up
    max_rounds = variable(int, value=10)
    #: one peer per stack, the first that runs on it (IMB, else NetPIPE): the quick pass's
    #: budget (IMB is one launch a round for four sizes, NetPIPE four)
    one_peer = variable(bool, value=False)
    #: our launch in NetPIPE's layout samples as NetPIPE times: NetPIPE's time is the least of
    #: 3 trials (TRIALS) of about 0.1 s each (RUNTM), so ours there is the least of as many
    #: samples of at least as long. The least of ten 1 ms samples is another statistic: at
    #: 1 MiB a 1 ms sample holds 5-8 round trips, and the least of ten such read 0.90-1.00
    #: (most often 0.93-0.96) of NetPIPE's time on every stack (docs/peers.md)
    netpipe_trials = variable(int, value=3)
    netpipe_trial_ms = variable(float, value=100.0)
    #: IMB round trips per size (-iter; its 400 MiB cap leaves 400 at 1 MiB): 20000 make
    #: IMB's loop at 8 bytes 2-20 ms, as long as our launch's samples at that size, so that
    #: a preemption weighs the same in IMB's mean and in ours
    imb_iterations = variable(int, value=20000)

    @sanity_function
    def validate(self):
        return sn.all([
            sn.assert_eq(self.job.exitcode, 0, msg='the job exited with {0}'),
            sn.assert_found(r'^P2P-END \{', self.stdout, msg='no P2P-END record: p2p cut short'),
            sn.assert_false(self.problems, msg='; '.join(self.problems)),
        ])
