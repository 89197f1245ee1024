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
import csv
import glob
import json
import os
import pwd
import shlex
import subprocess

import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.builtins import fixture, run_after, run_before, sanity_function, variable
from reframe.core.exceptions import ReframeError

from testbed import hangs, registry
from testbed.checks import (APPS, StackLaunch, after_launch, baseline_line,
                            drop_privileges, records, shm_floor_8B_us, stack_of)
from testbed.peer_table import (STEADY, imb_version,
                                netpipe_repetitions, paired_rounds, parse_imb, parse_netpipe)
from testbed.perf import set_perf_variables
from testbed.registry import shell_join
from p2p_matrix import P2PBuild

SIZES = [8, 1024, 65536, 1048576]
#: timeout's exit status for a command it ended
TIMED_OUT = 124
ASSERTED = SIZES
FACTOR = 1.10
# Debian's python: the job account cannot read root's own interpreters.
PYTHON = '/usr/bin/python3'
IMB = '{intel}/bin/IMB-MPI1'
# What of ours each peer is compared with: the same statistic as the peer prints.
OURS = {'imb': 'mean_us', 'netpipe': 'min_us'}
NAMES = {'imb': 'IMB t_avg', 'netpipe': 'NetPIPE time'}
# Half the last digit each peer prints, in us: IMB's t_avg has 2 decimals; NetPIPE's time is
# taken from its Mbps column, 9 digits (parse_netpipe).
HALF_UNIT = {'imb': 0.005, 'netpipe': 0.0}


def runpath_dirs(lib):
    """The RUNPATH/RPATH of `lib` with $ORIGIN expanded against its real directory: loaded under
    another name from a shim directory, the loader would expand $ORIGIN against the shim."""
    real = os.path.realpath(lib)
    text = subprocess.run(['readelf', '-d', real], capture_output=True, text=True).stdout
    dirs = []
    for line in text.splitlines():
        if '(RUNPATH)' in line or '(RPATH)' in line:
            paths = line.split('[', 1)[1].rstrip(']')
            dirs += [p.replace('${ORIGIN}', '$ORIGIN').replace('$ORIGIN', os.path.dirname(real))
                     for p in paths.split(':') if p]
    return dirs


def library_path(shim, needs):
    """LD_LIBRARY_PATH that makes a peer load the stack's library under the soname it needs."""
    dirs = []
    for soname, lib in needs.items():
        if os.path.basename(lib) != soname:
            os.makedirs(shim, exist_ok=True)
            link = os.path.join(shim, soname)
            if not os.path.lexists(link):
                os.symlink(lib, link)
            dirs += [shim, os.path.dirname(lib)] + runpath_dirs(lib)
        else:
            dirs.append(os.path.dirname(lib))
    return ':'.join(dict.fromkeys(dirs))


@rfm.simple_test
class PeerCompare(StackLaunch, rfm.RunOnlyRegressionTest):
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
    #: rounds of a peer that must be steady (same floor before and after) for a verdict
    min_steady = variable(int, value=3)
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
    #: the rounds the job ran (rounds, and the extra ones it needed)
    rounds_run = variable(int, value=0)
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
    #: every figure of the comparison, 'peer_sizeB_kind' -> value (also when sanity fails)
    peer_figures = variable(typ.Dict[str, float], value={})
    #: verdicts that did not hold ('peer_sizeB' -> why): too few steady rounds in max_rounds,
    #: or a median outside the band whose confidence interval reaches into it
    #: (peer_table.paired_rounds); reported in the summary, not judged
    not_held = variable(typ.Dict[str, str], value={})

    @run_after('setup')
    def choose_peers(self):
        reg, stack = stack_of(self)
        self.skip_if(not stack.peers, f'no peer benchmark runs on {stack.name} (its peers in '
                     'site/stacks.toml)')
        self.peers = {}
        chosen = list(stack.peers.items())[:1 if self.one_peer else None]
        for name, needs in chosen:
            peer = registry.PEER_PROGRAMS[name]      # imb or netpipe
            if peer == 'imb' and 'intel-mpi-2021' not in reg.stacks:
                raise ReframeError(f'imb on {stack.name}: IMB-MPI1 comes from the '
                                   'intel-mpi-2021 stack, which the registry does not hold')
            program = IMB.format(intel=reg.stacks['intel-mpi-2021'].prefix) \
                if peer == 'imb' else name
            missing = [p for p in (program, *needs.values())
                       if os.path.isabs(p) and not os.path.exists(p)]
            if missing:
                raise ReframeError(f'{peer} on {stack.name}: {missing[0]} not found '
                                   f'(installed by make setup)')
            self.peers[peer] = (program, needs)
        set_perf_variables(self, {
            f'{peer}_{size}B_{kind}': (unit, self._figure(f'{peer}_{size}B_{kind}'))
            for peer in self.peers for size in SIZES
            for kind, unit in (('ours', 'us'), ('peer', 'us'), ('ratio', 'ours/peer'))})

    def tags_of(self, peer, k):
        """The launches of one peer in round k (record prefixes and log names)."""
        return [f'imb-r{k}'] if peer == 'imb' else [f'netpipe-{s}-r{k}' for s in SIZES]

    def sequence(self, rounds=None):
        """Every launch of a job of `rounds` rounds (default: the rounds it ran), in order:
        round k is p2p-r{k} (separate buffers, ours against IMB), imb-r{k}, p2p-shared-r{k}
        (NetPIPE's one buffer per rank, ours against NetPIPE), the NetPIPE launches; then
        p2p-r{rounds+1}. So every peer launch has one of ours just before it (the figure it
        is compared with) and one just after it (whose shared-memory floor tells whether the
        machine stayed put). p2p-r{rounds+1} of the first `rounds` is the job's own launch;
        an extra round k is the launches after p2p-r{k} up to p2p-r{k+1}."""
        rounds = rounds or self.rounds_run or self.rounds
        seq = []
        for k in range(1, rounds + 1):
            seq.append(f'p2p-r{k}')
            if 'imb' in self.peers:
                seq += self.tags_of('imb', k)
            if 'netpipe' in self.peers:
                seq.append(f'p2p-shared-r{k}')
                seq += self.tags_of('netpipe', k)
        return seq + [f'p2p-r{rounds + 1}']

    @run_before('run')
    def set_commands(self):
        reg, stack = stack_of(self)
        out = os.path.join(self.stagedir, 'peers')
        os.makedirs(out, exist_ok=True)
        drop = drop_privileges(reg)
        if drop:        # the ranks write NetPIPE's file and their records here
            account = pwd.getpwnam(reg.run_as)
            os.chown(out, account.pw_uid, account.pw_gid)
        with open(os.path.join(out, 'imb-sizes.txt'), 'w') as fh:
            fh.write(''.join(f'{s}\n' for s in SIZES))
        launch = stack.launch_command(2, self.knobs)
        pin = (['--pin'] if stack.self_bind else []) + self.preload(stack)
        # IMB's buffers page-aligned, as ours (apps/peers/page_alloc.c says why)
        imb_pin = (['--pin'] if stack.self_bind else []) + \
            (self.preload(stack, ['peers/page_alloc.c'], 'imb-alloc') if 'imb' in self.peers
             else [])

        def wrapped(tag, argv, pin=()):
            # '--' after the program: LAM's mpirun takes it as the end of its own options
            # (NetPIPE's -l is also one of mpirun's); python reads it as the end of its own.
            return [PYTHON, '--', os.path.join(self.stagedir, 'pin_exec.py'), *pin,
                    '--record', os.path.join(out, tag), '--', *argv]

        p2p = [self.build.executable_path, '--pair', 'Send-Recv', '--variant', 'complete',
               '--stack', stack.name] + (['--bind-self'] if stack.self_bind else [])
        every_size = ['--sizes', ','.join(map(str, SIZES))]
        if not 1 <= self.rounds <= self.max_rounds or not 1 <= self.min_steady <= self.rounds:
            raise ReframeError(f'PeerCompare: rounds {self.rounds}, min_steady '
                               f'{self.min_steady}, max_rounds {self.max_rounds}: need '
                               f'1 <= min_steady <= rounds <= max_rounds')
        commands = []
        for tag in self.sequence(self.max_rounds):
            if tag.startswith('p2p-'):      # ours: pins itself where it must, no ABI shim
                if tag.startswith('p2p-shared-'):
                    # shm alone of the baselines: its 8-byte floor gates the rounds, and
                    # memcpy at 0.1 s a sample would only lengthen the launch
                    sampling = every_size + [
                                '--buffers', 'shared', '--samples', str(self.netpipe_trials),
                                '--min-time-ms', f'{self.netpipe_trial_ms:g}',
                                '--baselines', 'shm']
                elif 'imb' in self.peers:
                    # shm alone of the baselines, as in NetPIPE's layout: memcpy of 1 MiB
                    # between our samples moved ours at 1 MiB (docs/peers.md)
                    sampling = every_size + [
                        '--samples', str(max(3, self.samples // self.rounds)),
                        '--min-time-ms', f'{self.imb_sample_ms:g}', '--baselines', 'shm']
                else:
                    # no IMB to compare with: the launch only reads the floor between rounds
                    sampling = ['--sizes', '8', '--samples', '3', '--baselines', 'shm']
                commands.append((tag, [], wrapped(tag, p2p + sampling)))
                continue
            peer = tag.split('-')[0]
            program, needs = self.peers[peer]
            if peer == 'imb':
                argv = [program, 'PingPong', '-msglen', os.path.join(out, 'imb-sizes.txt'),
                        '-multi', '0', '-iter', f'{self.imb_iterations},400']
            else:
                size = tag.split('-')[1]
                argv = [program, '-l', size, '-u', size, '-p', '0',
                        '-o', os.path.join(out, f'{tag}.out')]
            env = ['env', 'LD_LIBRARY_PATH=' + library_path(
                os.path.join(self.stagedir, 'abi', peer), needs)] if needs else []
            commands.append((tag, env, wrapped(tag, argv, imb_pin if peer == 'imb' else pin)))
        # the peers are this test's baselines: an injected slowdown of scope 'run' slows
        # ours only (checks.baseline_line), the proof that a 10 % disagreement fails
        lines = {}
        for tag, env, cmd in commands:
            line = self.bounded(tag, shell_join(drop + env + launch + cmd) + f' > {tag}.log 2>&1')
            lines[tag] = line if tag.startswith('p2p-') else baseline_line(self, line)
        first = self.sequence(self.rounds)
        self.prerun_cmds += [lines[tag] for tag in first[:-1]]
        # the last launch of the first rounds, ours, is the job's own: the launcher (and the
        # job account) come from StackLaunch, as for every other test
        self.executable, *self.executable_opts = \
            next(cmd for tag, _, cmd in commands if tag == first[-1])
        # then another round while a peer lacks steady rounds, each a script of its launches
        every = self.sequence(self.max_rounds)
        for k in range(self.rounds + 1, self.max_rounds + 1):
            start, end = every.index(f'p2p-r{k}') + 1, every.index(f'p2p-r{k + 1}') + 1
            with open(os.path.join(self.stagedir, f'round-{k}.sh'), 'w') as fh:
                fh.write(''.join(f'{lines[tag]}\n' for tag in every[start:end]))
        check = shell_join(drop + [PYTHON, os.path.join(self.stagedir, 'steady_rounds.py'),
                                   '--need', str(self.min_steady), '--steady', str(STEADY),
                                   '--peers', ','.join(self.peers),
                                   '--last-log', self.stdout.evaluate()])
        after_launch(self, f'k={self.rounds}; while [ $k -lt {self.max_rounds} ] && '
                           f'! {check} --rounds $k; do k=$((k + 1)); sh round-$k.sh || '
                           f'{{ [ $? -eq {TIMED_OUT} ] && break; }}; done')

    def bounded(self, tag, line):
        """A launch line of the job, given the hang bound and as long again (the peers have no
        watchdog of their own): one that overruns, or whose watchdog ended it, says so in a
        TB-HUNG record on the job's output, which the hang guard reads as for our programs,
        and ends the job, so a deadlocked library costs one bound, not the case's time limit
        (testbed/hangs.py)."""
        limit = hangs.timeout_s(self.hang_timeout_s)
        if not limit:
            return line
        record = shlex.quote('TB-HUNG ' + json.dumps(
            {'program': tag.split('-r')[0], 'rank': -1, 'call': f'{tag} launch',
             'phase': tag, 'stalled_s': 2 * limit}))
        # 124 is also what our programs' own watchdog exits with: its record, in the launch's
        # log, names the call; the bound's own record stands in only when there is none
        return (f'timeout -k 5 {2 * limit:g} {line} || {{ tb_rc=$?; if [ $tb_rc -eq '
                f'{TIMED_OUT} ]; then tb_r=$(grep -h -m1 "^TB-HUNG " {tag}.log) || '
                f'tb_r={record}; echo "$tb_r"; echo "$tb_r" >&2; exit {TIMED_OUT}; fi; }}')

    def preload(self, stack, more=(), name='extra-sources'):
        """['--preload', LIB] built from the stack's extra sources (the fixes our own programs
        link in, LAM's zero-length iovec, preloaded into the peers, built elsewhere) and the
        sources `more` (relative to apps/)."""
        sources = list(stack.extra_sources) + list(more)
        if not sources:
            return []
        lib = os.path.join(self.stagedir, 'abi', f'{name}.so')
        os.makedirs(os.path.dirname(lib), exist_ok=True)
        cmd = ['cc', '-shared', '-fPIC', '-O2', '-o', lib] + [str(APPS / src) for src in sources]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode:
            raise ReframeError(f'{shlex.join(cmd)}: {done.stderr.strip()}')
        return ['--preload', lib]

    def log_of(self, tag):
        last = f'p2p-r{self.rounds + 1}'     # the job's own launch: its stdout
        return os.path.join(self.stagedir, self.stdout.evaluate() if tag == last else
                            f'{tag}.log')

    def p2p_tags(self):
        """Our launches: separate buffers (against IMB), and shared ones (against NetPIPE)."""
        return [t for t in self.sequence() if t.startswith('p2p-')]

    @staticmethod
    def read_p2p(log):
        """(P2P-RUN record, {size: the MPI transport's record}, the 8-byte shm floor in us)."""
        rows = records(log, 'P2P')
        ours = {r['size_bytes']: r for r in rows if r.get('transport', 'mpi') == 'mpi'}
        return records(log, 'P2P-RUN')[0], ours, shm_floor_8B_us(rows)

    @run_before('sanity')
    def compare(self):
        """Read every output, build the table (peers.csv) and the list of problems that
        sanity reports; nothing here raises, so a broken peer shows up as a sanity message."""
        self.problems, self.table, self.launches = [], [], {}
        reg, stack = stack_of(self)
        # an extra round k ran when its last launch, ours, left its log
        self.rounds_run = self.rounds + sum(
            1 for k in range(self.rounds + 1, self.max_rounds + 1)
            if os.path.exists(os.path.join(self.stagedir, f'p2p-r{k + 1}.log')))
        seq = self.sequence()
        runs, ours, floors, held = {}, {}, {}, {}
        for tag in self.p2p_tags():
            try:
                runs[tag], ours[tag], floors[tag] = self.read_p2p(self.log_of(tag))
            except (OSError, ValueError, IndexError) as err:
                self.problems.append(f'{tag} output: {err!r}')
        if not runs:
            return
        self.library_version = next(iter(runs.values())).get('library_version', 'unknown')
        if any(r.get('buffers', 'shared') != 'shared'
               for t, r in runs.items() if t.startswith('p2p-shared-')):
            self.problems.append('a p2p-shared run did not run with shared buffers')
        self._check_launches(stack, runs)
        figures = {}
        for peer in self.peers:
            theirs = self._peer_rows(peer)
            for size in SIZES:
                rounds, shown = [], []
                for k in range(1, self.rounds_run + 1):
                    first = seq.index(self.tags_of(peer, k)[0])
                    before = seq[first - 1]     # ours, in the layout compared with this peer
                    after = next(t for t in seq[first:] if t.startswith('p2p-'))
                    mine = ours.get(before, {}).get(size)
                    peer_us = theirs.get(k, {}).get(size)
                    if mine is None or peer_us is None:
                        self.problems.append(f'{stack.name} round {k}: no '
                                             f'{"p2p" if mine is None else peer} figure at '
                                             f'{size} bytes')
                        continue
                    rounds.append({'ours': mine[OURS[peer]], 'peer': peer_us[0],
                                   'floor_before': floors.get(before),
                                   'floor_after': floors.get(after)})
                    shown.append(f'{mine[OURS[peer]]:.4f}/{peer_us[0]:.4f}x{peer_us[1]}'
                                 f'@{floors.get(before) or 0:.3f}-{floors.get(after) or 0:.3f}')
                got = paired_rounds(rounds, FACTOR, HALF_UNIT[peer],
                                    confidence=self.confidence)
                steady = got['steady_rounds'] if got else 0
                asserted = size in ASSERTED
                if got:
                    figures.update({f'{peer}_{size}B_ours': got['ours'],
                                    f'{peer}_{size}B_peer': got['peer'],
                                    f'{peer}_{size}B_ratio': got['ratio']})
                fmt = {k: f'{got[k]:.4f}' if got else '' for k in
                       ('ours', 'peer', 'ratio', 'judged_ratio')}
                self.table.append([stack.name, peer, size, OURS[peer], fmt['ours'], NAMES[peer],
                                   fmt['peer'], fmt['ratio'], fmt['judged_ratio'],
                                   f'{steady}/{self.rounds_run}', ' '.join(shown), asserted,
                                   got['agrees'] if asserted and got else ''])
                if not asserted:
                    continue
                if steady < self.min_steady:
                    held[f'{peer}_{size}B'] = (
                        f'{steady} of {self.rounds_run} rounds steady, {self.min_steady} needed '
                        f'(the 8-byte shm floor moved by more than {STEADY}x across the peer\'s '
                        f'launch; rounds ours/peer@floors: {" ".join(shown)})')
                elif got['agrees']:
                    pass        # the median of the steady rounds lies within the band
                elif not got['disagrees']:
                    reach = (f'its {self.confidence:.0%} interval '
                             f'{got["interval"][0]:.3f}..{got["interval"][1]:.3f} reaches '
                             f'into the band' if got['interval'] else
                             f'{steady} steady rounds, too few for a {self.confidence:.0%} '
                             f'interval')
                    held[f'{peer}_{size}B'] = (
                        f'median ratio {got["judged_ratio"]:.3f}, outside 1/{FACTOR}..{FACTOR}, '
                        f'but {reach}: the launches drew states a 10 % verdict cannot see '
                        f'through (rounds ours/peer@floors: {" ".join(shown)})')
                else:       # the median's interval wholly outside the band
                    self.problems.append(
                        f'{stack.name}: p2p {OURS[peer].replace("_us", "")} {got["ours"]:.3f} us'
                        f' vs {NAMES[peer]} {got["peer"]:.3f} us at {size} bytes: median ratio '
                        f'of {steady} steady rounds {got["ratio"]:.3f} (nearest 1 within the '
                        f'peer\'s rounding {got["judged_ratio"]:.3f}, its {self.confidence:.0%} '
                        f'interval {got["interval"][0]:.3f}..{got["interval"][1]:.3f}), outside '
                        f'1/{FACTOR}..{FACTOR}')
        self.peer_figures = figures
        self.not_held = held
        self._write_csv(stack)

    def _peer_rows(self, peer):
        """{round: {size: (the peer's figure in us, its repetitions)}}: IMB's t_avg (a mean
        over one loop), NetPIPE's time (the least of its trials' means)."""
        out = {}
        try:
            for k in range(1, self.rounds_run + 1):
                for tag in self.tags_of(peer, k):
                    log = open(os.path.join(self.stagedir, f'{tag}.log')).read()
                    if peer == 'imb':
                        self.imb_version = imb_version(log)
                        rows = [(r['size_bytes'], r['t_avg_us'], r['repetitions'])
                                for r in parse_imb(log)]
                    else:
                        text = open(os.path.join(self.stagedir, 'peers', f'{tag}.out')).read()
                        reps = netpipe_repetitions(log)
                        rows = [(r['size_bytes'], r['time_us'], reps.get(r['size_bytes'], 0))
                                for r in parse_netpipe(text)]
                    for size, us, n in rows:
                        out.setdefault(k, {})[size] = (us, n)
        except (OSError, ValueError, KeyError) as err:
            self.problems.append(f'{peer} output: {err!r}')
        return out

    def _check_launches(self, stack, runs):
        """Each launch: two ranks, each on one CPU of its own; every peer on our p2p's library.
        runs: {our launch tag: its P2P-RUN record}."""
        for path in sorted(glob.glob(os.path.join(self.stagedir, 'peers', '*.rank*.json'))):
            tag = os.path.basename(path).split('.rank')[0]
            with open(path) as fh:
                self.launches.setdefault(tag, []).append(json.load(fh))
        ours = {lib for tag, ranks in self.launches.items() if tag.startswith('p2p-')
                for r in ranks for lib in r['mpi_libraries'].values()}
        expected = self.p2p_tags() + \
            [t for k in range(1, self.rounds_run + 1) for p in self.peers
             for t in self.tags_of(p, k)]
        for tag in expected:
            ranks = self.launches.get(tag, [])
            cpus = [tuple(r['cpus']) for r in ranks]
            if tag.startswith('p2p-') and stack.self_bind:   # p2p pins itself after the record
                run = runs.get(tag, {})
                cpus = [(c,) for c in run.get('cpus_start', [None, None])]
            if len(ranks) != 2:
                self.problems.append(f'{tag}: {len(ranks)} rank records, expected 2')
            elif any(len(c) != 1 for c in cpus) or cpus[0] == cpus[1]:
                self.problems.append(f'{tag}: ranks not each on a CPU of its own: {cpus}')
            for r in ranks:
                libs = set(r['mpi_libraries'].values())
                if r['ldd_problems']:
                    self.problems.append(f'{tag} rank {r["rank"]}: {r["ldd_problems"][0]}')
                elif not tag.startswith('p2p-') and ours and libs != ours:
                    self.problems.append(f'{tag} rank {r["rank"]} loads {sorted(libs)}, '
                                         f'our p2p {sorted(ours)}')

    def _write_csv(self, stack):
        path = os.path.join(self.stagedir, 'peers.csv')
        with open(path, 'w', newline='') as fh:
            fh.write(f'# {stack.name} {self.library_version}; IMB '
                     f'{getattr(self, "imb_version", "-")}; half round trip in us '
                     f'(microseconds); asserted within a factor {FACTOR}\n')
            for tag, ranks in sorted(self.launches.items()):
                fh.write(f'# launch {tag}: ' + '; '.join(
                    f'rank {r["rank"]} cpus {r["cpus"]} {sorted(r["mpi_libraries"].values())}'
                    for r in sorted(ranks, key=lambda r: str(r['rank']))) + '\n')
            w = csv.writer(fh, lineterminator='\n')
            # medians over the steady rounds; each round as ours/peer x the peer's repetitions
            # @ the 8-byte shm floor (us) of our launches just before and just after the peer
            w.writerow(['stack', 'peer', 'size_bytes', 'ours_statistic', 'ours_us',
                        'peer_statistic', 'peer_us', 'ratio', 'judged_ratio', 'steady_rounds',
                        'rounds_ours/peer_x_repetitions@floors_us', 'asserted', 'agrees'])
            w.writerows(self.table)
        self.keep_files = ['peers.csv', 'peers'] + [
            f'{tag}.log' for tag in self.sequence() if tag != f'p2p-r{self.rounds + 1}']

    @sanity_function
    def validate(self):
        return sn.all([
            sn.assert_eq(self.job.exitcode, 0, msg='the job exited with {0}'),
            sn.assert_found(r'^P2P-END \{', self.stdout, msg='no P2P-END record: p2p cut short'),
            sn.assert_false(self.problems, msg='; '.join(self.problems)),
        ])

    @sn.deferrable
    def _figure(self, name):
        return self.peer_figures[name]
