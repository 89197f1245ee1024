"""PeerCompare's mechanics (reframe/tests/peers.py says what is compared and asserted): the
job's launches in rounds (ours, IMB, ours in NetPIPE's layout, NetPIPE), each pinned and run as
the job account under the watchdog, the peers' outputs read, and the verdicts of
testbed.peer_verdict per peer and size."""
import glob
import json
import os
import pwd
import shlex
import subprocess

import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.builtins import run_after, run_before, variable
from reframe.core.exceptions import ReframeError

from testbed import hangs, registry
from testbed.checks import APPS, records, shm_floor_8B_us, stack_of
from testbed.launch import (StackLaunch, after_launch, baseline_line, drop_privileges,
                            extra_launch)
from testbed.peer_table import STEADY, imb_version, netpipe_repetitions, parse_imb, parse_netpipe
from testbed.peer_verdict import OURS, judge, launch_problems, write_csv
from testbed.perf import set_perf_variables
from testbed.registry import shell_join

SIZES = [8, 1024, 65536, 1048576]
#: timeout's exit status for a command it ended
TIMED_OUT = 124
ASSERTED = SIZES
# Debian's python: the job account cannot read root's own interpreters.
PYTHON = '/usr/bin/python3'
IMB = '{intel}/bin/IMB-MPI1'


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


class PeerCompareBase(StackLaunch, rfm.RunOnlyRegressionTest):
    """What PeerCompare runs and reads; its variables and sanity are the test's."""
    #: the rounds the job ran (rounds, and the extra ones it needed)
    rounds_run = variable(int, value=0)
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
                # shm alone of the baselines, and at 8 bytes only: its 8-byte floor gates
                # the rounds, and nothing reads it at another size (at 0.1 s a sample it was
                # half of the launch); memcpy of 1 MiB between our samples moved ours at
                # 1 MiB (docs/peers.md)
                floor_only = ['--baselines', 'shm', '--baseline-max', '8']
                if tag.startswith('p2p-shared-'):
                    sampling = every_size + [
                                '--buffers', 'shared', '--samples', str(self.netpipe_trials),
                                '--min-time-ms', f'{self.netpipe_trial_ms:g}', *floor_only]
                elif 'imb' in self.peers:
                    sampling = every_size + [
                        '--samples', str(max(3, self.samples // self.rounds)),
                        '--min-time-ms', f'{self.imb_sample_ms:g}', *floor_only]
                else:
                    # no IMB to compare with: the launch only reads the floor between rounds
                    sampling = ['--sizes', '8', '--samples', '3', '--baselines', 'shm']
                commands.append((tag, {}, wrapped(tag, p2p + sampling)))
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
            env = {'LD_LIBRARY_PATH': library_path(
                os.path.join(self.stagedir, 'abi', peer), needs)} if needs else {}
            commands.append((tag, env, wrapped(tag, argv, imb_pin if peer == 'imb' else pin)))
        # the peers are this test's baselines: an injected slowdown of scope 'run' slows
        # ours only (launch.baseline_line), the proof that a 10 % disagreement fails
        lines = {}
        for tag, env, cmd in commands:
            line = self.bounded(tag, shell_join(extra_launch(self, 2, env=env) + cmd) +
                                f' > {tag}.log 2>&1')
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
                got, row, why, problem = judge(stack.name, peer, size, rounds, shown,
                                               size in ASSERTED, self.rounds_run,
                                               self.min_steady, self.confidence)
                figures.update(got)
                self.table.append(row)
                if why:
                    held[f'{peer}_{size}B'] = why
                if problem:
                    self.problems.append(problem)
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
        """Every launch's rank records (peers/*.rank*.json) checked by launch_problems."""
        for path in sorted(glob.glob(os.path.join(self.stagedir, 'peers', '*.rank*.json'))):
            tag = os.path.basename(path).split('.rank')[0]
            with open(path) as fh:
                self.launches.setdefault(tag, []).append(json.load(fh))
        expected = self.p2p_tags() + \
            [t for k in range(1, self.rounds_run + 1) for p in self.peers
             for t in self.tags_of(p, k)]
        self.problems += launch_problems(self.launches, expected, stack.self_bind, runs)

    def _write_csv(self, stack):
        write_csv(os.path.join(self.stagedir, 'peers.csv'), stack.name, self.library_version,
                  getattr(self, 'imb_version', '-'), self.launches, self.table)
        self.keep_files = ['peers.csv', 'peers'] + [
            f'{tag}.log' for tag in self.sequence() if tag != f'p2p-r{self.rounds + 1}']

    @sn.deferrable
    def _figure(self, name):
        return self.peer_figures[name]
