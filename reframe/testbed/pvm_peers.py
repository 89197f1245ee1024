"""PvmPeerCompare's mechanics (reframe/tests/pvm_peers.py says what is compared and asserted):
NetPIPE's NPpvm and p2p-pvm in both buffer layouts launched in rounds on one pvmd, their figures
read, the pinning of every launch checked, the verdict per size and the table peers.csv."""
import csv
import glob
import json
import os
import pwd
import shutil

import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.builtins import run_before, variable

from testbed.binding import placement_problem
from testbed.checks import APPS, records, stack_of
from testbed.launch import StackLaunch, drop_privileges, extra_launch
from testbed.peer_table import netpipe_repetitions, parse_netpipe
from testbed.peer_verdict import FACTOR     # the same agreement as PeerCompare's
from testbed.perf import set_perf_variables
from testbed.registry import shell_join

SIZES = [8, 1024, 65536, 1048576]
ASSERTED = [8, 1048576]
#: NPpvm's calls, as our records name them
PAIR, VARIANT = 'send-recv', 'direct-inplace'
#: our buffer layouts, the compared one (NetPIPE's) first
LAYOUTS = ['shared', 'separate']


class PvmPeerCompareBase(StackLaunch, rfm.RunOnlyRegressionTest):
    """What PvmPeerCompare runs and reads; its variables and sanity are the test's."""
    #: every figure of the comparison, 'netpipe_<size>B_<kind>' (also when sanity fails)
    peer_figures = variable(typ.Dict[str, float], value={})

    @run_before('run')
    def define_perf(self):
        set_perf_variables(self, {
            f'netpipe_{size}B_{kind}': (unit, self._figure(f'netpipe_{size}B_{kind}'))
            for size in SIZES
            for kind, unit in (('ours', 'us'), ('peer', 'us'), ('ratio', 'ours/peer'))} | {
            f'separate_{size}B_ratio': ('separate/shared', self._figure(f'separate_{size}B_ratio'))
            for size in SIZES})

    @sn.deferrable
    def _figure(self, name):
        return self.peer_figures[name]

    @run_before('run')
    def set_commands(self):
        reg, stack = stack_of(self)
        out = os.path.join(self.stagedir, 'peers')
        os.makedirs(out, exist_ok=True)
        shutil.copy(APPS / 'peers' / 'pin_exec.py', self.stagedir)
        drop = drop_privileges(reg)
        if drop:        # the tasks write NetPIPE's files and their records here
            account = pwd.getpwnam(reg.run_as)
            os.chown(out, account.pw_uid, account.pw_gid)
        p2p = [self.build.executable_path, '--pvm-route', 'direct', '--pvm-send', 'send',
               '--pvm-recv', 'recv', '--pvm-encoding', 'inplace',
               '--sizes', ','.join(map(str, SIZES)),
               '--samples', str(max(1, self.samples // self.rounds)),
               '--min-time-ms', str(self.min_time_ms),
               '--stack', stack.name, '--bind-self']
        launch = extra_launch(self, self.num_tasks)
        commands = []
        for k in range(1, self.rounds + 1):
            for size in SIZES:
                tag = f'netpipe-{size}-r{k}'
                commands.append(shell_join(drop + ['sh', './nppvm-pair', str(size),
                                                   os.path.join(out, f'{tag}.out'),
                                                   os.path.join(out, tag)]) + f' > {tag}.log 2>&1')
            for layout in LAYOUTS:
                commands.append(shell_join(launch + p2p + ['--buffers', layout]) +
                                f' > p2p-{layout}-r{k}.log 2>&1')
        # the last one (ours, separate buffers, last round) is the job's own launch
        self.prerun_cmds += commands[:-1]
        self.executable = p2p[0]
        self.executable_opts = p2p[1:] + ['--buffers', LAYOUTS[-1]]

    def p2p_log(self, layout, k):
        if (layout, k) == (LAYOUTS[-1], self.rounds):
            return os.path.join(self.stagedir, self.stdout.evaluate())
        return os.path.join(self.stagedir, f'p2p-{layout}-r{k}.log')

    @run_before('sanity')
    def compare(self):
        """Read every output, write peers.csv, collect the problems sanity reports."""
        self.problems, self.table = [], []
        ours, runs = {layout: {} for layout in LAYOUTS}, []
        try:
            for k in range(1, self.rounds + 1):
                for layout in LAYOUTS:
                    log = self.p2p_log(layout, k)
                    found = records(log, 'P2P-RUN')
                    if not found:
                        self.problems.append(f'{os.path.basename(log)}: no P2P-RUN record, '
                                             f'the run ended early (see that log)')
                        continue
                    run = found[0]
                    if run.get('buffers') != layout:
                        self.problems.append(f'{log}: buffers {run.get("buffers")!r}, '
                                             f'asked {layout!r}')
                    ends = records(log, 'P2P-END')
                    runs.append((run, ends[0] if ends else {'cpus_end': []}))
                    for r in records(log, 'P2P'):
                        if (r['transport'], r['pair'], r['variant']) == ('pvm', PAIR, VARIANT):
                            ours[layout].setdefault(r['size_bytes'], []).append(r['min_us'])
            if runs:
                self.library_version = runs[0][0].get('library_version', 'unknown')
        except (OSError, ValueError) as err:
            self.problems.append(f'p2p-pvm output: {err!r}')
            return
        theirs, reps = self._netpipe()
        self._check_pinning(runs)
        figures = {}
        for size in SIZES:
            counts = [len(ours[layout].get(size, [])) for layout in LAYOUTS] + \
                [len(theirs.get(size, []))]
            if counts != [self.rounds] * 3:
                self.problems.append(f'{size} bytes: {counts} figures (p2p-pvm shared, '
                                     f'separate, NPpvm), expected {self.rounds} of each')
                continue
            mine, peer = min(ours['shared'][size]), min(theirs[size])
            separate = min(ours['separate'][size])
            ratio = mine / peer
            figures.update({f'netpipe_{size}B_ours': mine, f'netpipe_{size}B_peer': peer,
                            f'netpipe_{size}B_ratio': ratio,
                            f'separate_{size}B_ratio': separate / mine})
            asserted = size in ASSERTED
            agrees = 1 / FACTOR <= ratio <= FACTOR
            self.table.append([size, f'{mine:.4f}', f'{peer:.4f}', f'{ratio:.4f}',
                               f'{separate:.4f}', f'{separate / mine:.4f}',
                               ' '.join(f'{v:.4f}' for v in ours['shared'][size]),
                               ' '.join(f'{v:.4f}x{n}' for v, n in zip(theirs[size],
                                                                        reps.get(size, []))),
                               asserted, agrees if asserted else ''])
            if asserted and not agrees:
                self.problems.append(f'p2p-pvm min {mine:.3f} us vs NPpvm time {peer:.3f} us '
                                     f'at {size} bytes: ratio {ratio:.3f}, outside '
                                     f'1/{FACTOR}..{FACTOR}')
        self.peer_figures = figures
        self._write_csv()

    def _netpipe(self):
        """{size: [NPpvm's time in us, one per round]}, {size: [its repeats per trial]}."""
        times, reps = {}, {}
        for k in range(1, self.rounds + 1):
            for size in SIZES:
                tag = f'netpipe-{size}-r{k}'
                try:
                    with open(os.path.join(self.stagedir, 'peers', f'{tag}.out')) as fh:
                        rows = parse_netpipe(fh.read())
                    with open(os.path.join(self.stagedir, 'peers',
                                           f'{tag}.transmitter.log')) as fh:
                        n = netpipe_repetitions(fh.read()).get(size, 0)
                except (OSError, ValueError) as err:
                    self.problems.append(f'{tag}: {err} (see {tag}.log)')
                    continue
                for r in rows:
                    times.setdefault(r['size_bytes'], []).append(r['time_us'])
                    reps.setdefault(r['size_bytes'], []).append(n)
        return times, reps

    def _check_pinning(self, runs):
        """Every launch: two tasks, each pinned to a CPU of its own (p2p-pvm pins itself to
        the CPU asked for; the rule of every MPI test: placement_problem), none moved."""
        for k, (run, end) in enumerate(runs, 1):
            problem = placement_problem(run, end, self_bind=True)
            if problem:
                self.problems.append(f'p2p-pvm launch {k}: {problem}')
        for k in range(1, self.rounds + 1):
            for size in SIZES:
                prefix = os.path.join(self.stagedir, 'peers', f'netpipe-{size}-r{k}')
                cpus = []
                for path in sorted(glob.glob(prefix + '.rank*.json')):
                    with open(path) as fh:
                        cpus.append(tuple(json.load(fh)['cpus']))
                if len(cpus) != 2 or any(len(c) != 1 for c in cpus) or cpus[0] == cpus[1]:
                    self.problems.append(f'NPpvm {size} bytes round {k}: tasks not each on '
                                         f'a CPU of its own: {cpus}')

    def _write_csv(self):
        self.keep_files = ['peers.csv', 'peers']
        with open(os.path.join(self.stagedir, 'peers.csv'), 'w', newline='') as fh:
            fh.write(f'# {self.library_version}; p2p-pvm {PAIR} {VARIANT} against NPpvm, both '
                     f'with one buffer per task (ours also with separate buffers); half round '
                     f'trip in us (microseconds); asserted within a factor {FACTOR}\n')
            w = csv.writer(fh, lineterminator='\n')
            w.writerow(['size_bytes', 'ours_shared_min_us', 'netpipe_time_us', 'ratio',
                        'ours_separate_min_us', 'separate_over_shared', 'ours_shared_per_round',
                        'netpipe_per_round_x_repeats', 'asserted', 'agrees'])
            w.writerows(self.table)
