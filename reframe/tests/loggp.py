"""LogGP per stack (Bell et al., seed 002) and stream throughput (seed 003), as modes of apps/p2p's
timing core: the same driver, transports, payload checks and records as the ping-pong
(apps/p2p/modes.c; docs/loggp.md says how each parameter is measured and read off).

LogGP, one job per MPI stack, two ranks on one host, two-sided MPI, non-blocking calls as Bell et al.:
- eel (us): half the round trip of the 8-byte ping-pong, Isend-Irecv (median); eel_blocking the
  same with Send-Recv, from a launch just before the peers.
- o_s, o_r (us): the CPU-overlap test: the flood at q = 1 and 8 bytes with a calibrated busy
  loop of w us after each send is started (o_s) or after each receive is posted (o_r); the time
  per message T(w) is flat while the loop hides and w + o once it cannot: o is the median of
  T(w) - w over the ladder's points with w >= T(0).
- g_q1 .. g_q64 (us): the flood's time per 8-byte message with q messages outstanding (start q,
  wait for q/2, start q/2, ...; one reply at the end); g_q64_over_q1.
- G_eager, G_rndv (ns/B = ns per byte): the flood's time per message over 1 KiB..1 MiB at
  q = fit_q, two straight lines with the split found in the data (least squares over every
  split); eager_last (bytes) the last size of the first range; crossover (bytes) = g / G.
- The one-sided layer (study 002's "lower layer"), in a launch before ours: the same modes over
  MPI_Put with passive-target flush (rma_NAME), each of eel, o_s, o_r, g_q1, G_eager, G_rndv
  also as two-sided over one-sided (NAME_over_rma); not run where the stack cannot flush
  (site/stacks.toml skip_calls; the reason is the test's one_sided_not_run).
- Peers in the same job, where the stack has them (site/stacks.toml `peers`): NetPIPE at 8 B
  (eel_over_netpipe: our blocking least sample over NetPIPE's least trial) and IMB-MPI1 Uniband
  (window 64) against the flood at q = 64: message rate at 8 B, bandwidth at 1 MiB.
Streams, the same stacks: NetPIPE's stream (back to back, one reply), MPBench/OSU's one-way and
bidirectional windows of `window` messages, memcpy on one core in the same job; MB/s (10^6
bytes/s) at 64 KiB and 1 MiB; unidir and bidir against IMB's Uniband and Biband.

Asserted (hold on any machine), each "within noise" (the inter-quartile ranges of the samples
apart, testbed.loggp.above_within_noise): G_eager, G_rndv > 0; at every size stream and unidir
<= memcpy on one core (a message is at least one copy, made by one core) and bidir aggregate <=
2 x memcpy; every payload checked, every mode supported, ranks placed as asked, in both launches
where the one-sided one runs. Reported, not
asserted, as libraries break them: o_s, o_r <= EEL (LAM 7.1), g at q=64 <= g at q=1 (LAM 7.1)
and bidir aggregate >= unidir (LAM 7.1, Open MPI 5: bidir_over_unidir); and the peers' ratios
(-S assert_peers=yes asserts them within 1.1; docs/loggp.md: why not by default).
Everything else is reported. -S LogGP.quick=yes (and Streams.quick) runs a short variant.

LogGPNodes, on the emulated cluster (or any partition of two nodes): the same parameters
between two nodes, one rank on each, of MPI two-sided, of raw TCP between the same hosts
(the layer under MPI there) and of MPI one-sided, in one job; each of EEL, o_s, o_r, g at
q = 1, G_eager and G_rndv also as MPI over TCP (NAME_over_tcp) and over one-sided
(NAME_over_rma). Asserted: every launch that ran completes, payloads checked, one rank on each
node, G positive; one-sided that the library lacks between nodes (Open MPI 4.1 over TCP) is
reported in one_sided_not_run; the rest is reported.
"""
import reframe as rfm
from reframe.core.builtins import fixture, sanity_function

import reframe.utility.sanity as sn
from testbed.loggp import LogGPBase, LogGPNodesBase, StreamsBase
from testbed.p2p import P2PBuild


@rfm.simple_test
class LogGP(LogGPBase):
    descr = 'LogGP parameters (EEL, o_s, o_r, g per q, G per protocol range) of one stack'
    valid_systems = ['testbed-local']
    valid_prog_environs = ['+mpi -no-p2p']   # as P2PMatrix: a stack opts out with no-p2p
    build = fixture(P2PBuild, scope='environment')
    tags = {'loggp', 'studies'}

    @sanity_function
    def validate(self):
        return sn.assert_eq(self.loggp_problems(), [], msg='{0}')


@rfm.simple_test
class LogGPNodes(LogGPNodesBase):
    descr = 'LogGP of MPI two-sided, raw TCP and MPI one-sided between two nodes, side by side'
    valid_systems = ['testbed-cluster']
    valid_prog_environs = ['+mpi -no-p2p']
    build = fixture(P2PBuild, scope='environment')
    tags = {'loggp', 'studies'}

    @sanity_function
    def validate(self):
        return sn.assert_eq(self.loggp_problems(), [], msg='{0}')


@rfm.simple_test
class Streams(StreamsBase):
    descr = 'Stream, one-way and bidirectional window throughput of one stack'
    valid_systems = ['testbed-local']
    valid_prog_environs = ['+mpi -no-p2p']
    build = fixture(P2PBuild, scope='environment')
    tags = {'streams', 'studies'}

    @sanity_function
    def validate(self):
        return sn.assert_eq(self.streams_problems(), [], msg='{0}')
