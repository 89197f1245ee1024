"""LinkSockbuf's and LinkMtu's mechanics (reframe/tests/link_sweep.py says what is measured and
asserted): the plan of one job (the point and the sweep's base, interleaved, repeated), the job
script that runs site/cluster/linkprobe.c on two nodes (rank 0 serves each measurement, rank 1
connects to it), and the figures and checks read from rank 1's LINKPROBE lines.

    python3 -m testbed.link_sweep REPORT...     # the sweep table of a run, per partition
"""
import argparse
import json
import math
import os
import statistics
import sys

import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.builtins import (performance_function, run_after, run_before,
                                   sanity_function, variable)

from testbed import registry, results
from testbed.launch import as_job_account

LINKPROBE_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), 'site', 'cluster')
#: socket-buffer values (bytes, set as SO_SNDBUF and SO_RCVBUF on both ends); the kernel holds
#: twice each and caps it at net.core.wmem_max / rmem_max (212992 by default, left alone here:
#: it is global to the machine), so the values stay under it. The base: autotuned buffers (the
#: node's tcp_rmem / tcp_wmem, up to 4 MiB on gige). Study 001: 32 kB and 128-256 kB.
SOCKBUF_VALUES = [4096, 16384, 32768, 131072]
#: MTUs whose segment (TCP_MAXSEG = MTU - 40: IPv4 and TCP headers) the stream uses; the base:
#: MTU 1500's. A segment above the partition's MTU cannot be sent there (the case is skipped).
MTU_VALUES = [1500, 9000]
#: the figures' noise allowance in a direction: the medians of REPEATS interleaved runs each
NOISE = 0.05
#: a shaped link's rate may be passed by the clock's share and a bucket borrowed (p2p.py's rule)
RATE_TOLERANCE = 0.02
PINGPONG_BYTES = 1 << 20


class LinkSweepBase(rfm.RunOnlyRegressionTest):
    """One point of a raw-TCP knob sweep between the first two nodes of a cluster partition."""
    #: the knob swept ('sockbuf' or 'mtu') and the point's value: set by the test
    knob = variable(str)
    #: interleaved repeats of point and base
    repeats = variable(int, value=3)
    #: seconds of each stream
    stream_seconds = variable(float, value=1.0)
    #: round trips of each 1 MiB ping-pong (after two untimed)
    pingpong_reps = variable(int, value=20)
    #: what the kernel read back for the point (sanity): knob -> value
    reached = variable(typ.Dict[str, int], value={})
    valid_systems = ['testbed-cluster']
    valid_prog_environs = ['*']
    num_tasks = 2
    num_tasks_per_node = 1
    time_limit = '5m'
    sourcesdir = LINKPROBE_DIR
    tags = {'link', 'cluster'}

    @run_after('init')
    def name_point(self):
        self.point = f'{self.knob}={self.value}'

    @run_after('setup')
    def only_between_nodes(self):
        extras = self.current_partition.extras
        self.skip_if(extras.get('nodes', 1) < 2 or not extras.get('link_profile'),
                     'raw TCP between two nodes of the emulated cluster (198.18.0.0/15): this '
                     'partition is not one')
        first = self.current_partition.environs[0].name
        self.skip_if(self.current_environ.name != first,
                     f'raw TCP needs no MPI stack: measured once per partition, with its first '
                     f'environment ({first})')
        if self.knob == 'mtu':
            self.skip_if(self.value > extras.get('mtu', 1500),
                         f"MTU {self.value}'s segment cannot cross this partition's MTU "
                         f"{extras.get('mtu')} (make cluster-up MTU=9000)")

    def options(self, value):
        """linkprobe's options for a value of the knob (None: the base)."""
        if value is None:
            return [] if self.knob == 'sockbuf' else ['--mss', str(1500 - 40)]
        return ['--sockbuf', str(value)] if self.knob == 'sockbuf' else ['--mss', str(value - 40)]

    def base_value(self):
        """The sweep's base as a knob value (None: autotuned buffers), or the point's own when
        the point is the base."""
        return None if self.knob == 'sockbuf' else 1500

    def plan(self):
        """[(label, mode, options)]: the point and, unless it is the base, the base, each
        measured `repeats` times, interleaved; streams, then ping-pongs."""
        cfgs = [('point', self.value)]
        if self.value != self.base_value():
            cfgs.append(('base', None))
        out = []
        for _ in range(self.repeats):
            for mode, extra in (('stream', ['--seconds', f'{self.stream_seconds:g}']),
                                ('pingpong', ['--size', str(PINGPONG_BYTES),
                                              '--reps', str(self.pingpong_reps)])):
                out += [(label, mode, self.options(v) + extra) for label, v in cfgs]
        return out

    @run_before('run')
    def write_job(self):
        plan = self.plan()
        with open(os.path.join(self.stagedir, 'plan.txt'), 'w') as fh:
            for label, mode, opts in plan:
                fh.write(f"{label} {mode} {' '.join(opts)}\n")
        with open(os.path.join(self.stagedir, 'linkprobe-job.sh'), 'w') as fh:
            fh.write(JOB_SCRIPT)
        self.prerun_cmds = ['cc -O2 -o linkprobe linkprobe.c']
        self.executable = 'sh'
        self.executable_opts = ['linkprobe-job.sh']
        as_job_account(self, registry.load())

    def _records(self):
        out = []
        with open(os.path.join(self.stagedir, self.stdout.evaluate()), errors='replace') as fh:
            for line in fh:
                if line.startswith('LINKPROBE '):
                    _, label, text = line.split(' ', 2)
                    out.append(dict(json.loads(text), label=label))
        return out

    def median(self, label, mode):
        vals = [r['MBps'] for r in self._records() if (r['label'], r['mode']) == (label, mode)]
        if not vals:
            raise ValueError(f'no {mode} of the {label} measured')
        return statistics.median(vals)

    def problem(self):
        """Why the run is not valid, or None: every measurement of the plan made, the knob
        read back as set, no figure above a shaped link's rate, and the sweep's direction."""
        recs = self._records()
        if len(recs) != len(self.plan()):
            return f'{len(recs)} of {len(self.plan())} measurements made (see the output)'
        point = [r for r in recs if r['label'] == 'point']
        if self.knob == 'sockbuf':
            want = 2 * self.value           # the kernel holds twice the value set
            got = {(r['sndbuf_bytes'], r['rcvbuf_bytes']) for r in point}
            if got != {(want, want)}:
                return (f'SO_SNDBUF/SO_RCVBUF read back {sorted(got)}, not {want} (twice '
                        f'{self.value}): the knob did not reach the socket')
            self.reached = {'sockbuf': self.value}
        else:
            # the segment with TCP timestamps (40 bytes of IPv4 and TCP headers and 12 of the
            # option); a stream's socket, read after its FIN, gives it without the option
            want = {self.value - 52, self.value - 40}
            got = {r['mss_bytes'] for r in point}
            if not got <= want:
                return (f'TCP_MAXSEG read back {sorted(got)}, not {self.value - 52} (MTU '
                        f'{self.value} less 52 bytes of headers): the knob did not reach the '
                        f'socket')
            self.reached = {'mss_bytes': self.value - 52}
        extras = self.current_partition.extras
        rate, bucket = extras.get('rate_mbit'), extras.get('bucket_bytes') or 0
        if rate:
            for r in recs:
                size = PINGPONG_BYTES if r['mode'] == 'pingpong' else r['bytes']
                cap = rate / 8 * size / max(size - bucket, 1) * (1 + RATE_TOLERANCE)
                if r['MBps'] > cap:
                    return (f"{r['label']} {r['mode']}: {r['MBps']:.0f} MB/s, above the "
                            f"{rate} Mbit/s link ({cap:.0f} MB/s): is the profile in force?")
        return self.direction_problem()

    def direction_problem(self):
        if self.value == self.base_value():
            return None
        if self.knob == 'sockbuf':
            ratio = self.median('point', 'stream') / self.median('base', 'stream')
            if ratio > 1 + NOISE:
                return (f'a stream with {self.value}-byte buffers was {ratio:.2f}x the '
                        f'autotuned one: a capped window cannot carry more (beyond '
                        f'{NOISE:.0%} noise)')
        else:
            ratio = self.median('point', 'pingpong') / self.median('base', 'pingpong')
            if ratio < 1 - NOISE:
                return (f"1 MiB ping-pong with MTU {self.value}'s segment was {ratio:.2f}x MTU "
                        f"1500's: slower (beyond {NOISE:.0%} noise)")
        return None

    @sanity_function
    def validate(self):
        return sn.assert_eq(sn.defer(self.problem()), None, msg='{0}')

    @performance_function('MB/s')
    def stream(self):
        return self.median('point', 'stream')

    @performance_function('MB/s')
    def pingpong_1MiB(self):
        return self.median('point', 'pingpong')

    @performance_function('ratio')
    def stream_over_base(self):
        return self.median('point', 'stream') / self.median(
            'point' if self.value == self.base_value() else 'base', 'stream')

    @performance_function('ratio')
    def pingpong_over_base(self):
        return self.median('point', 'pingpong') / self.median(
            'point' if self.value == self.base_value() else 'base', 'pingpong')


#: run by srun on both nodes: rank 0 serves each measurement of plan.txt in turn (a listener of
#: its own, its port in port.<i>), rank 1 connects to it and prints its record
JOB_SCRIPT = r'''#!/bin/sh
wait_for() { n=0; while [ ! -f "$1" ]; do n=$((n+1)); [ $n -gt 600 ] && { echo "no $1" >&2; exit 1; }; sleep 0.05; done; }
i=0
if [ "$SLURM_PROCID" = 0 ]; then
    hostname > host.tmp && mv host.tmp host
    while read -r label mode opts; do
        ./linkprobe serve "port.$i" $opts || exit 1
        i=$((i+1))
    done < plan.txt
else
    wait_for host
    host=$(cat host)
    while read -r label mode opts; do
        wait_for "port.$i"
        out=$(./linkprobe "$mode" "$host" "$(cat "port.$i")" $opts) || exit 1
        echo "LINKPROBE $label $out"
        i=$((i+1))
    done < plan.txt
fi
'''


def table(report_paths):
    """The sweep table of runs: one row per partition, test and point (passed cases)."""
    lines = ['| partition | knob=value | stream (MB/s) | 1 MiB ping-pong (MB/s) | stream over '
             'base | ping-pong over base |', '|---|---|---:|---:|---:|---:|']
    for path in report_paths:
        with open(path) as fh:
            report = json.load(fh)
        for tc in results.final_cases(report):
            if not tc['name'].startswith(('LinkSockbuf', 'LinkMtu')) or tc['result'] != 'pass':
                continue
            pv = {results.variable(k): v[0] for k, v in (tc.get('perfvalues') or {}).items()}
            knob = 'sockbuf' if tc['name'].startswith('LinkSockbuf') else 'mtu'
            value = str(tc.get('value'))
            point = value if '=' in value else f'{knob}={value}'     # the parameter's name
            lines.append(f"| {tc['partition']} | {point} | {pv.get('stream', math.nan):.0f} | "
                         f"{pv.get('pingpong_1MiB', math.nan):.0f} | "
                         f"{pv.get('stream_over_base', math.nan):.2f} | "
                         f"{pv.get('pingpong_over_base', math.nan):.2f} |")
    return lines


def main(argv=None):
    ap = argparse.ArgumentParser(description='the raw-TCP sweep table of ReFrame reports')
    ap.add_argument('reports', nargs='+')
    a = ap.parse_args(argv)
    try:
        print('\n'.join(table(a.reports)))
    except (OSError, ValueError, KeyError) as e:
        print(f'error: {e}', file=sys.stderr)
        return 2
    return 0


if __name__ == '__main__':
    sys.exit(main())
