"""Raw TCP between two nodes of a cluster partition, one knob swept: the socket buffers (study
001's decisive knob) and the segment size of an MTU (study 003: MTU 1500 against 9000).

Each knob value is a parameter, so a case of its own with its own rows in the results; its name
carries the value as knob=value (the knob sweeps' way, reframe/testbed/knob_sweep.py). In one job
on two nodes, site/cluster/linkprobe.c measures, interleaved and repeated, the point and the
sweep's base (autotuned buffers; MTU 1500's segment): a stream (MB/s, 10^6 bytes/s) and the half
round trip of 1 MiB messages (as bandwidth). Reported: both figures at the point and its ratio
to the base in the same job; asserted: the knob reached the sockets (the kernel's read-back), no
figure above a shaped link's rate, and the direction that holds on any machine:
  - LinkSockbuf: a capped buffer is no faster than autotuned ones (a window over a round trip
    bounds a stream; here with no delay, so the cap shows only where the window is below the
    round trip's bytes); the study: tuning the buffers up to 5x, TCGMSG 32 kB -> 128 kB 500 ->
    900 Mbit/s (1.8x);
  - LinkMtu: MTU 9000's segment is no slower at 1 MiB than MTU 1500's (fewer headers and
    packets per byte); the study: 1 MiB ping-pong over 10GbE 2.8 -> 5.0 Gbit/s peak (1.8x).
Mechanics: reframe/testbed/link_sweep.py. Runs in `ci/cluster.sh full` (gige: buffers;
10gige MTU 9000: segments), not in `make test`.
"""
import reframe as rfm
from reframe.core.builtins import parameter

from testbed.link_sweep import LinkSweepBase, SOCKBUF_VALUES, MTU_VALUES


@rfm.simple_test
class LinkSockbuf(LinkSweepBase):
    descr = 'Raw TCP between two nodes: SO_SNDBUF/SO_RCVBUF capped at one value'
    knob = 'sockbuf'
    value = parameter(SOCKBUF_VALUES, fmt=lambda v: f'sockbuf={v}')


@rfm.simple_test
class LinkMtu(LinkSweepBase):
    descr = "Raw TCP between two nodes: the segment size of one MTU (TCP_MAXSEG)"
    knob = 'mtu'
    value = parameter(MTU_VALUES, fmt=lambda v: f'mtu={v}')
