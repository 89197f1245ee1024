"""Study 004 (Kearns 2002, seed 004) as the thesis defined its experiments: the mechanics of
reframe/tests/thesis.py (which says what is measured and asserted; docs/thesis.md says why and
what differs from the thesis).

- ThesisOriginalBase: apps/p2p with --variant thesis, the 'original' ping-pong (section 4.3.1,
  rank 1 replies before it waits for its Irecv) beside the corrected one in the same passes:
  the corrected one held to P2PMatrix's physical bounds, the original's overstatement of it
  (crossing_verdict, between nodes), and on a shaped link both set beside the profile's rate.
- ThesisSu3Base: su3_rmd at the five lattices of Table 6, wall time taken at the shell around
  the launch and the program's CPU time, communication/IO share = (wall - CPU) / wall (Table 8).
- ThesisHplBase: xhpl at the grids and Ns of Tables 4-5 (HPL.dat of Appendix A), `repeats`
  runs in one job, mean and standard deviation per N.
- ThesisStartupBase: apps/startup for 2-24 ranks (Table 9) through a remote shell per process
  (hydra's ssh launcher, one host line per rank, a local rsh-style agent) or through daemons
  booted once (LAM's lamboot).

The tables below are the thesis's parameters (what it ran), never its results: those are in
the studies' data files (reframe/studies/)."""
import json
import math
import os
import shlex
import statistics
import sys

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import fixture, run_after, run_before
from reframe.core.exceptions import ReframeError

from testbed import binding, hpl_input, registry
from testbed.checks import APPS, AppBuild, payload_problem, records, stack_of
from testbed.hpl import HplBuild
from testbed.launch import StackLaunch, after_launch, drop_privileges, extra_launch
from testbed.p2p import P2PBuild, physical_bound_problem
from testbed.perf import set_perf_variables
from testbed.sizes import SCHEDULES
from testbed.su3 import Su3Base, su3_options

#: Table 6: processes each lattice (su3_rmd --preset) ran on
SU3_PROCESSES = {1: (2, 4, 8, 16), 2: (2, 4, 8, 16), 3: (2, 4, 8, 16), 4: (4, 8, 16), 5: (16,)}
SU3_CASES = [(p, n) for p, nps in SU3_PROCESSES.items() for n in nps]
#: Tables 4 and 5: the Ns each grid ran (what fitted the Wyeast nodes' memory); NB 150
HPL_GRID_NS = {
    '1x1': [2000, 4000, 6000], '1x2': [2000, 4000, 6000],
    '2x2': [2000, 4000, 6000, 8000, 10000],
    **{g: [2000, 4000, 6000, 8000, 10000, 15000] for g in ('2x4', '2x5', '3x4')},
    **{g: [2000, 4000, 6000, 8000, 10000, 15000, 20000] for g in ('4x4', '4x5')},
    '4x6': [2000, 4000, 6000, 8000, 10000, 15000, 20000, 25000]}
HPL_NB = 150
#: Table 9: processes started
STARTUP_NP = [2, 4, 8, 12, 16, 20, 24]

#: the least overstatement that shows the flaw: at one size at least the original reports this
#: many times the corrected program's bandwidth (two messages crossing: up to 2)
CROSSING_MIN = 1.2


def report(test, figures):
    """figures {name: (unit, value)}, computed before the performance stage, as the test's
    performance variables."""
    set_perf_variables(test, {k: (unit, sn.defer(v)) for k, (unit, v) in figures.items()})


def by_variant(rows):
    """{variant: {size: record}} of the MPI records of a p2p run."""
    out = {}
    for r in rows:
        if r['transport'] == 'mpi':
            out.setdefault(r['variant'], {})[r['size_bytes']] = r
    return out


def ratios(rows):
    """{size: the original's reported bandwidth over the corrected program's} (same pair,
    same passes)."""
    v = by_variant(rows)
    sizes = sorted(set(v.get('complete', {})) & set(v.get('original', {})))
    return {s: v['original'][s]['bandwidth_MBps'] / v['complete'][s]['bandwidth_MBps']
            for s in sizes}


def crossing_verdict(rows, least=CROSSING_MIN):
    """None when the original overstates the bandwidth by `least` at one size at least (its
    flaw shown: the thesis's "two messages are being sent across the network at the same
    time"), else why not."""
    r = ratios(rows)
    if not r:
        return 'no size measured by both the original and the corrected program'
    size, top = max(r.items(), key=lambda kv: kv[1])
    if top < least:
        return (f"the original reported at most {top:.2f}x the corrected program's bandwidth "
                f"(at {size} bytes), below {least}x: its flaw did not show")
    return None


def overstatement(rows):
    """Geometric mean over the sizes of the original's reported bandwidth over the corrected
    one's (same pair, same passes): above 1, the original overstates it."""
    r = ratios(rows)
    if not r:
        raise ValueError('no size measured by both variants')
    return math.exp(sum(math.log(x) for x in r.values()) / len(r))


def largest_over(rows, variant, layer):
    """The largest, over the sizes, of the variant's bandwidth over the raw layer's bandwidth
    at the same size (layer 'memcpy': one copy on one core, a one-copy message's ceiling).
    None where the layer was not measured."""
    v = by_variant(rows).get(variant, {})
    base = {r['size_bytes']: r['bandwidth_MBps'] for r in rows if r['transport'] == layer}
    ratios = [r['bandwidth_MBps'] / base[s] for s, r in v.items() if base.get(s)]
    return max(ratios) if ratios else None


class ThesisOriginalBase(StackLaunch, rfm.RunOnlyRegressionTest):
    """What ThesisOriginal runs and computes; its parameters and sanity are the test's."""
    build = fixture(P2PBuild, scope='environment')

    @run_after('setup')
    def place_ranks(self):
        """One rank per node where the partition has several (messages cross the link), the
        partition's raw layers (raw TCP on the cluster) or shm,memcpy on one host."""
        self.spread_over_nodes()
        self.baselines = self.baselines or self.current_partition.extras.get('p2p_baselines',
                                                                             'shm,memcpy')

    @run_before('run')
    def set_command(self):
        self.executable = self.build.executable_path
        self.executable_opts = ['--pair', self.pair, '--variant', 'thesis',
                                '--sizes', self.sizes, '--samples', str(self.samples),
                                '--stack', stack_of(self)[1].name, '--baselines', self.baselines]
        if stack_of(self)[1].self_bind:
            self.executable_opts += ['--bind-self']

    def rows(self):
        return records(os.path.join(self.stagedir, self.stdout.evaluate()), 'P2P')

    @property
    def between_nodes(self):
        """The two ranks on two nodes, as the thesis ran its bandwidth tests: the crossing is
        asserted there only (on one host the crossing messages share the cores that copy
        them, and 3 of 8 stacks showed no overstatement of 1.2x at any size)."""
        return self.current_partition.extras.get('nodes', 1) >= 2 and \
            self.num_tasks_per_node == 1

    @property
    def shaped_link(self):
        """(rate_mbit, bucket_bytes) of the shaped link the two ranks cross, None on one host."""
        extras = self.current_partition.extras
        if self.num_tasks_per_node != 1 or not extras.get('rate_mbit'):
            return None
        return extras['rate_mbit'], extras.get('bucket_bytes') or 0

    @sn.deferrable
    def checked(self):
        """Every size measured by both variants, payloads checked on both ranks; the corrected
        program within its physical bounds (memcpy, the 8-byte shared-memory floor); on a
        shaped link, link_verdict."""
        rows = self.rows()
        want = SCHEDULES[self.sizes] if self.sizes in SCHEDULES else \
            sorted(int(s) for s in self.sizes.split(','))
        for variant, got in by_variant(rows).items():
            if sorted(got) != want:
                return f'{variant}: sizes measured {sorted(got)[:5]}... differ from {self.sizes}'
            problem = payload_problem(got.values(), self.samples, lambda r: variant)
            if problem:
                return problem
        if sorted(by_variant(rows)) != ['complete', 'original']:
            return f'variants measured: {sorted(by_variant(rows))}, expected complete, original'
        problem = physical_bound_problem([r for r in rows if r.get('variant') != 'original']) \
            or (crossing_verdict(rows) if self.between_nodes else None)
        if problem:
            return problem
        return binding.launch_placement_problem(
            os.path.join(self.stagedir, self.stdout.evaluate()), stack_of(self)[1].self_bind) \
            or True

    @run_before('performance')
    def define_perf(self):
        rows = self.rows()
        v = by_variant(rows)
        figures = {'original_over_complete': ('ratio', overstatement(rows)),
                   'original_over_complete_max': ('ratio', max(ratios(rows).values()))}
        for variant in ('complete', 'original'):
            bws = [r['bandwidth_MBps'] for r in v[variant].values()]
            figures[f'{variant}_bandwidth_max'] = ('MB/s', max(bws))
            for layer in ('memcpy', 'shm', 'tcp_poll'):
                ratio = largest_over(rows, variant, layer)
                if ratio is not None:
                    figures[f'{variant}_over_{layer}_max'] = ('ratio', ratio)
        if self.shaped_link:
            # the profile's rate, not what the link carried: messages below about 64 KiB
            # crossed the emulated gige link at up to 1.9x it in the corrected program too
            link = self.shaped_link[0] / 8
            for variant in ('complete', 'original'):
                figures[f'{variant}_over_link_rate_max'] = (
                    'ratio', figures[f'{variant}_bandwidth_max'][1] / link)
        report(self, figures)

    @run_after('sanity')
    def note_version(self):
        run = records(os.path.join(self.stagedir, self.stdout.evaluate()), 'P2P-RUN')[0]
        self.library_version = run.get('library_version', 'unknown')


class ThesisSu3Base(Su3Base):
    """What ThesisSu3 runs and computes: one lattice of Table 6 on one process count."""

    @run_after('init')
    def set_case(self):
        self.preset, self.num_tasks = self.case
        self.reference_case = f'thesis/preset{self.preset}/np{self.num_tasks}'
        self.mark_oversubscribed()

    def perf_variable_names(self):
        return []       # reported: no row is made for these cases (ReferenceLookup)

    @run_before('run')
    def set_command(self):
        self.executable = self.build.executable_path
        self.executable_opts = su3_options(self)
        # Wall clock "at the shell" (section 4.2.2): around the launch, after the daemons'
        # boot (StackLaunch puts it first), so LAM's universe is up as it was on Wyeast.
        self.prerun_cmds.append('tb_wall0=$(date +%s.%N)')
        after_launch(self, 'awk -v t0="$tb_wall0" -v t1="$(date +%s.%N)" \'BEGIN { printf '
                           '"THESIS-WALL {\\"shell_wall_s\\":%.6f}\\n", t1 - t0 }\' '
                           '> shell_wall.out')
        self.keep_files = ['shell_wall.out']

    def shell_wall(self):
        return records(os.path.join(self.stagedir, 'shell_wall.out'), 'THESIS-WALL')[0][
            'shell_wall_s']

    def end(self):
        return records(os.path.join(self.stagedir, self.stdout.evaluate()), 'SU3-END')[0]

    @run_before('performance')
    def define_perf(self):
        wall, end = self.shell_wall(), self.end()
        report(self, {
            'shell_wall_s': ('s', wall),
            'cpu_s': ('s', end['cpu_s']),
            # Table 8's definition: what of the wall time at the shell was not the program's
            # CPU time (start-up, communication, I/O, waiting)
            'comm_io_share': ('fraction', (wall - end['cpu_s']) / wall),
            # su3's own: the time inside MPI calls over the program's wall time
            'mpi_share': ('fraction', end['comm_share']),
            'launch_and_exit_s': ('s', wall - end['wall_s'])})

    @run_after('sanity')
    def note_version(self):
        run = records(os.path.join(self.stagedir, self.stdout.evaluate()), 'SU3-RUN')[0]
        self.library_version = run.get('library_version', 'unknown')


def thesis_hpl_dat(ns, p, q, mem_bytes=None):
    """HPL.dat for the thesis's Ns on a P x Q grid, NB 150 and the rest of Appendix A (the
    defaults of testbed.hpl_input). The thesis's Ns (2000, 4000, ...) are not multiples of its
    NB, which HPL allows and hpl_input's writer refuses (the testbed's own runs keep N a
    multiple of NB), so the writer checks every other parameter with one N that is, and the
    Ns line is then the thesis's, each N checked against the memory here."""
    for n in ns:
        if not isinstance(n, int) or n < 1:
            raise ValueError(f'N must be a positive integer, got {n!r}')
        if mem_bytes is not None and 8 * n * n > mem_bytes:
            raise ValueError(f'N={n} needs {8 * n * n / 2**30:.1f} GiB, more than the '
                             f'{mem_bytes / 2**30:.1f} GiB allowed here')
    lines = hpl_input.hpl_dat_text([HPL_NB], HPL_NB, p, q).splitlines()
    at = next(i for i, line in enumerate(lines) if line.endswith(' Ns'))
    lines[at] = f"{' '.join(map(str, ns)):<12} Ns"
    lines[at - 1] = f"{len(ns):<12} # of problems sizes (N)"
    return '\n'.join(lines) + '\n'


class ThesisHplBase(StackLaunch, rfm.RunOnlyRegressionTest):
    """What ThesisHpl runs and computes: one grid, its Ns, `repeats` runs in one job."""
    build = fixture(HplBuild, scope='environment')

    @run_after('init')
    def set_grid(self):
        self.p, self.q = (int(x) for x in self.grid.split('x'))
        self.num_tasks = self.p * self.q
        self.oversubscribed = self.num_tasks > (os.cpu_count() or 1)
        ns = HPL_GRID_NS[self.grid]
        cap = self.n_max_oversubscribed if self.oversubscribed else self.n_max
        self.ns = [n for n in ns if n <= cap] or ns[:1]

    @run_after('setup')
    def spread(self):
        self.fit_to_nodes()

    def outputs(self):
        return [self.stdout.evaluate()] + [f'repeat{k}.out' for k in range(2, self.repeats + 1)]

    @run_before('run')
    def write_input(self):
        mem = os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES')
        try:
            text = thesis_hpl_dat(self.ns, self.p, self.q, mem_bytes=0.8 * mem)
        except ValueError as err:
            raise ReframeError(f'HPL.dat: {err}') from None
        with open(os.path.join(self.stagedir, 'HPL.dat'), 'w') as fh:
            fh.write(text)
        self.executable = self.build.xhpl
        self.env_vars['OPENBLAS_NUM_THREADS'] = '1'
        # the thesis's runs: xhpl alone, no panel timing (apps/hpl: --no-panels)
        self.executable_opts = ['--no-panels'] + \
            (['--bind-self'] if stack_of(self)[1].self_bind else [])
        again = extra_launch(self, self.num_tasks, True) + [self.executable,
                                                           *self.executable_opts]
        lines = [f'{registry.shell_join(again)} > repeat{k}.out 2> repeat{k}.err'
                 for k in range(2, self.repeats + 1)]
        if lines:
            after_launch(self, '; '.join(lines))
        self.keep_files = [f'repeat{k}.out' for k in range(2, self.repeats + 1)]

    def results(self):
        out = []
        for name in self.outputs():
            with open(os.path.join(self.stagedir, name), errors='replace') as fh:
                out.append(hpl_input.parse_hpl_output(fh.read()))
        return out

    @sn.deferrable
    def all_passed(self):
        for name, res in zip(self.outputs(), self.results()):
            if not res.ok or sorted(r['N'] for r in res) != sorted(self.ns):
                return f'{name}: not every N of {self.ns} PASSED its residual checks'
        return True

    @run_before('performance')
    def define_perf(self):
        figures = {}
        for n in self.ns:
            for field, unit in (('gflops', 'Gflop/s'), ('time_s', 's')):
                vals = [r[field] for res in self.results() for r in res if r['N'] == n]
                name = 'gflops' if field == 'gflops' else 'time'
                figures[f'{name}_mean_N{n}'] = (unit, statistics.mean(vals))
                figures[f'{name}_sd_N{n}'] = (unit, statistics.stdev(vals)
                                              if len(vals) > 1 else 0.0)
        report(self, figures)

    @run_after('sanity')
    def note_version(self):
        run = records(os.path.join(self.stagedir, self.stdout.evaluate()), 'HPL-RUN')
        self.library_version = run[0].get('library_version', 'unknown') if run else 'unknown'


#: an rsh-style agent for one host: called as launchers call rsh or ssh (agent [-n] [-x]
#: [-l USER] HOST COMMAND...), it runs COMMAND here, as the caller, a process per call
LOCAL_AGENT = r'''#!/bin/sh
skip() { n=0; while [ $# -gt 0 ]; do case $1 in -l) n=$((n+2)); shift 2;; -*) n=$((n+1)); shift;; *) break;; esac; done; }
skip "$@"; shift $n
[ $# -gt 0 ] && shift
skip "$@"; shift $n
[ $# -gt 0 ] || { echo "agent: usage: agent [-n] [-x] [-l USER] HOST COMMAND..." >&2; exit 2; }
echo "$$" >> "$(dirname "$0")/agent-calls.log"
exec sh -c "$*"
'''


def rsh_hosts(n):
    """n host names that reach this host and no two alike (127.0.0.2 ...): hydra starts one
    proxy per host, so one remote shell per process, as MPICH's ch_p4 did."""
    if not 1 <= n <= 250:
        raise ValueError(f'{n} processes: the local agent has hosts for 1 to 250')
    return [f'127.0.0.{k}' for k in range(2, 2 + n)]


class ThesisStartupBuild(AppBuild):
    app = 'startup'


class ThesisStartupBase(rfm.RunOnlyRegressionTest):
    """What ThesisStartup runs: apps/startup/launch_times.py over Table 9's process counts,
    through a remote shell per process ('rsh') or through daemons booted once ('daemons')."""
    build = fixture(ThesisStartupBuild, scope='environment')

    @run_after('setup')
    def choose_path(self):
        reg, stack = stack_of(self)
        if self.path == 'daemons':
            self.skip_if(not stack.boot, f'{stack.name} starts no daemons (no boot in '
                                         f'{reg.path}): the daemons path is LAM\'s')
        else:
            self.skip_if('HYDRA_LAUNCHER' not in stack.fallback_env,
                         f'{stack.name}: no hydra launcher (fallback_env HYDRA_LAUNCHER in '
                         f'{reg.path}) to start one proxy per process through an agent')
        self.skip_if(self.current_partition.launcher_type.registered_name != 'local',
                     'one host: the remote shells and daemons here are this host\'s')

    @run_before('run')
    def set_command(self):
        reg, stack = stack_of(self)
        self.stack_name = stack.name
        launcher = stack.launch_command('{np}', {})
        if self.path == 'rsh':
            agent = os.path.join(self.stagedir, 'rsh-agent')
            with open(agent, 'w') as fh:
                fh.write(LOCAL_AGENT)
            os.chmod(agent, 0o755)
            calls = os.path.join(self.stagedir, 'agent-calls.log')
            open(calls, 'w').close()
            os.chmod(calls, 0o666)      # the job account's agent calls append to it
            hostfile = os.path.join(self.stagedir, 'hosts')
            with open(hostfile, 'w') as fh:
                fh.write(''.join(stack.fallback_hostline.replace('{host}', h) + '\n'
                                 for h in rsh_hosts(max(self.np_list))))
            env = stack.fallback_settings(agent, hostfile)
            launcher = ['env', *(f'{k}={v}' for k, v in env.items()), *launcher]
            self.keep_files = ['agent-calls.log']
        self.executable = sys.executable
        self.executable_opts = [
            str(APPS / 'startup' / 'launch_times.py'), '--launcher',
            shlex.quote(shlex.join(launcher)), '--np', ','.join(map(str, self.np_list)),
            '--repeats', str(self.repeats), '--json', 'startup.json']
        if drop_privileges(reg):
            self.executable_opts += ['--run-as', reg.run_as]
        if self.path == 'daemons':
            self.executable_opts += ['--boot', shlex.quote(shlex.join(stack.boot)),
                                     '--halt', shlex.quote(shlex.join(stack.halt))]
        self.executable_opts += ['--', self.build.executable_path, '--recv', self.recv]
        self.keep_files = getattr(self, 'keep_files', []) + ['startup.json']

    def data(self):
        with open(os.path.join(self.stagedir, 'startup.json')) as fh:
            return json.load(fh)

    @sn.deferrable
    def one_shell_per_process(self):
        """The rsh path started every process of every launch through its own agent call."""
        if self.path != 'rsh':
            return True
        with open(os.path.join(self.stagedir, 'agent-calls.log')) as fh:
            calls = len(fh.read().split())
        want = sum(self.np_list) * (1 + self.repeats)
        return True if calls == want else \
            f'{calls} agent calls for {want} processes: not one remote shell per process'

    @run_before('performance')
    def define_perf(self):
        summary = {row['np']: row for row in self.data()['summary']}
        figures = {f'first_np{np}': ('s', summary[np]['warm_median_first_message_s'])
                   for np in self.np_list}
        boot = self.data().get('boot', {}).get('boot_s') if self.path == 'daemons' else None
        if boot is not None:
            figures['boot_s'] = ('s', boot)
        report(self, figures)

    @run_after('sanity')
    def note_version(self):
        self.library_version = self.data()['launches'][0]['library_version']
