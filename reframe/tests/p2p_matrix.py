"""The point-to-point send-mode matrix: Send/Isend/Ssend/Issend x Recv/Irecv on every stack.

One build of apps/p2p per stack (fixture, scope 'environment'); one run-only test per
(pair, variant, size range). Perf variables: latency (us, median half round trip) at the
range's smallest size and bandwidth (MB/s = 10^6 bytes/s, from the median) at its largest.
"""
import json
import os
import sys

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import (fixture, parameter, performance_function, run_after,
                                   run_before, sanity_function, variable)

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..'))
from testbed.checks import (AppBuild, ReferenceLookup, StackLaunch, records,  # noqa: E402
                            stack_of)
from testbed.perf import lookup  # noqa: E402
from testbed.sizes import SCHEDULES  # noqa: E402

PAIRS = [f'{s}-{r}' for s in ('Send', 'Isend', 'Ssend', 'Issend') for r in ('Recv', 'Irecv')]
# 'preposted' posts the next Irecv before the partner can send: it exists for Irecv pairs only.
MODES = [(p, 'complete') for p in PAIRS] + [(p, 'preposted') for p in PAIRS
                                             if p.endswith('Irecv')]


class P2PBuild(AppBuild):
    app = 'p2p'


@rfm.simple_test
class P2PMatrix(StackLaunch, ReferenceLookup, rfm.RunOnlyRegressionTest):
    descr = 'Ping-pong round trips for one send/receive pair over one size range'
    mode = parameter(MODES, fmt=lambda m: f'{m[0]}/{m[1]}')
    size_range = parameter(['small', 'medium', 'large', 'netpipe'])
    #: samples per size (passes over the size list); the README's quick pass lowers it
    samples = variable(int, value=30)
    #: test-only: rank 1 corrupts its reply at this size, so the payload check must fail
    corrupt_at = variable(int, value=0)
    valid_systems = ['*']
    valid_prog_environs = ['+mpi']
    num_tasks = 2
    num_tasks_per_node = 2
    time_limit = '10m'
    reference_file = 'p2p.csv'
    build = fixture(P2PBuild, scope='environment')
    tags = {'p2p'}

    @run_after('init')
    def name_case(self):
        self.pair, self.variant = self.mode
        self.reference_case = f'{self.pair}/{self.variant}/{self.size_range}'

    @run_before('run')
    def set_command(self):
        self.executable = self.build.executable_path
        self.executable_opts = ['--pair', self.pair, '--variant', self.variant,
                                '--sizes', self.size_range, '--samples', str(self.samples),
                                '--stack', self.stack_name]
        if stack_of(self)[1].self_bind:
            self.executable_opts += ['--bind-self']
        if self.corrupt_at:
            self.executable_opts += ['--corrupt-at', str(self.corrupt_at)]

    @sanity_function
    def validate(self):
        return sn.all([
            sn.assert_eq(self.job.exitcode, 0, msg='benchmark exited with {0}, expected {1}'),
            sn.assert_found(r'^P2P-RUN \{', self.stdout, msg='no P2P-RUN record'),
            sn.assert_found(r'^P2P-END \{', self.stdout, msg='no P2P-END record: run cut short'),
            sn.assert_eq(sn.sorted(sn.extractall(r'^P2P \{.*"size_bytes":\s*(\d+)', self.stdout,
                                                 1, int)),
                         SCHEDULES[self.size_range],
                         msg='sizes measured {0} differ from the schedule {1}'),
            sn.assert_not_found(r'"payload_checked":\s*false', self.stdout,
                                msg='a size was not payload-checked'),
        ])

    @run_after('sanity')
    def keep_tables(self):
        """Library version for the report; every size's statistics as a CSV beside the log."""
        stdout = os.path.join(self.stagedir, self.stdout.evaluate())
        run = records(stdout, 'P2P-RUN')[0]
        self.library_version = run.get('library_version', 'unknown')
        rows = records(stdout, 'P2P')
        cols = ['size_bytes', 'samples', 'reps_per_sample', 'min_us', 'median_us', 'mean_us',
                'p95_us', 'bandwidth_MBps']
        with open(os.path.join(self.stagedir, 'p2p_sizes.csv'), 'w') as fh:
            fh.write('# ' + json.dumps(run) + '\n' + ','.join(cols) + '\n')
            for r in rows:
                fh.write(','.join(str(r[c]) for c in cols) + '\n')
        self.keep_files = ['p2p_sizes.csv']

    def _size(self, size, field):
        return lookup(lambda: records(os.path.join(self.stagedir, self.stdout.evaluate()),
                                      'P2P'), 'size_bytes', size, field, 'P2P record')

    @performance_function('us')
    def latency(self):
        return self._size(SCHEDULES[self.size_range][0], 'median_us')

    @performance_function('MB/s')
    def bandwidth(self):
        return self._size(SCHEDULES[self.size_range][-1], 'bandwidth_MBps')
