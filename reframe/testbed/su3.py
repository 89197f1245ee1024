"""su3_rmd's tests' mechanics (reframe/tests/su3_rmd.py says what is measured and asserted):
the build, the launch lines of the run and its baselines (1 rank, --alone before and after, the
run again), and the figures from its records: plaquettes compared across rank counts, the
gathers over memcpy and over the same exchange with no library, the lower quartile of the
trajectory times that the speedups divide, and the rule for a speedup whose baseline did not
hold."""
import json
import math
import os
import statistics

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import fixture, performance_function, run_after, run_before, variable

from testbed import checks, registry
from testbed.binding import placement_problem
from testbed.checks import AppBuild, ReferenceLookup, records, stack_of
from testbed.launch import StackLaunch, after_launch, baseline_line, extra_launch
from testbed.held import why_not_held

UNITARITY = 1e-10
#: plaquettes of the same seed and lattice agree to this, relative, whatever the ranks
SAME_PLAQUETTE = 1e-10


def plaquette_difference(ref, got):
    """The first pair (ref, got) of plaquettes that differ by more than SAME_PLAQUETTE
    relative, None if all agree (compared over the shorter list)."""
    return next(((a, b) for a, b in zip(ref, got) if abs(a - b) > SAME_PLAQUETTE * abs(a)),
                None)


def over_memcpy(gathers, field='lq_s'):
    """The geometric mean over message sizes of a time per message (`field` of the SU3-GATHER
    records) over the seconds memcpy takes for the same bytes on the same core. 'lq_s': the
    gathers' lower quartile inside MPI during the run (gather_over_memcpy); 'exchange_min_s':
    the same exchange timed alone after the run, the ranks in step, its least sample
    (exchange_over_memcpy)."""
    if not gathers:
        raise ValueError('no SU3-GATHER record in the output')
    logs = []
    for g in gathers:
        if not g.get('memcpy_lq_s') or not g.get(field, 0) > 0:
            raise ValueError(f'SU3-GATHER for {g.get("bytes")} bytes has no {field}: {g}')
        logs.append(math.log(g[field] / g['memcpy_lq_s']))
    return math.exp(sum(logs) / len(logs))


def exchange_problem(gathers):
    """What is wrong with the exchanges timed alone (SU3-GATHER records), None if nothing:
    every size was timed and each sample's last message brought what its sender sent."""
    for g in gathers:
        if 'exchange_bad' not in g:
            return f'the exchange of {g["bytes"]} bytes was not timed (see stderr)'
        if g['exchange_bad']:
            return f'the exchange of {g["bytes"]} bytes delivered a wrong payload in ' \
                f'{g["exchange_bad"]} of {g["exchange_samples"]} samples'
        for way in ('shm', 'cma'):
            if g.get(f'{way}_exchange_bad'):
                return f'the exchange of {g["bytes"]} bytes through ' \
                    f'{"shared memory" if way == "shm" else "the kernel"} (the baseline) ' \
                    f'delivered a wrong payload in {g[f"{way}_exchange_bad"]} of ' \
                    f'{g["exchange_samples"]} samples'
    return None


def over_shm(gathers, way='shm'):
    """The geometric mean over message sizes of the exchange timed alone (its least sample)
    over the same exchange with no library (its least sample, timed sample by sample beside
    it: apps/su3_rmd/shm_exchange.c), `way` 'shm' (copies through shared memory) or 'cma'
    (process_vm_readv); None where a record has no such time (more than two ranks, ranks on
    two hosts, or a kernel that refused process_vm_readv)."""
    field = f'{way}_exchange_min_s'
    if not gathers or not all(g.get(field, 0) > 0 and g.get('exchange_min_s', 0) > 0
                              for g in gathers):
        return None
    logs = [math.log(g['exchange_min_s'] / g[field]) for g in gathers]
    return math.exp(sum(logs) / len(logs))


def kernel_copy_problem(reference, gathers):
    """Why exchange_over_cma, where it has a row to meet, cannot be asserted, or None
    (testbed.checks.kernel_copy_problem): the kernel copy left out of every record."""
    return checks.kernel_copy_problem(reference, 'exchange_over_cma',
                                      over_shm(gathers, 'cma') is not None, 'Su3Run')


def lower_quartile(trajs):
    """The lower quartile of the seconds of the timed trajectories (trajectory 0, the cold
    start, has no dynamics), interpolated between order statistics."""
    t = [float(x['seconds']) for x in trajs if x['traj'] > 0]
    if not t:
        raise ValueError('no timed trajectory in the output')
    return statistics.quantiles(t, n=4, method='inclusive')[0] if len(t) > 1 else t[0]


class Su3Build(AppBuild):
    app = 'su3_rmd'


def su3_options(test):
    opts = ['--preset', str(test.preset), '--comm', test.comm, '--seed', str(test.seed)]
    if test.trajectories:
        opts += ['--trajectories', str(test.trajectories)]
    if stack_of(test)[1].self_bind:       # the launcher cannot bind (LAM): ranks pin themselves
        opts += ['--bind-self']
    return opts


def launch_line(test, ntasks, opts, out, over_the_nodes=False):
    """A job-script line that runs su3_rmd on `ntasks` ranks the way the stack launches on the
    test's partition, as the job account, output to `out`.out/.err (`over_the_nodes`: placed
    as the test's own ranks, extra_launch). For prerun commands: StackLaunch puts the daemons'
    boot before them."""
    argv = extra_launch(test, ntasks, over_the_nodes) + [test.build.executable_path, *opts]
    return f'{registry.shell_join(argv)} > {out}.out 2> {out}.err'


class Su3Base(StackLaunch, ReferenceLookup, rfm.RunOnlyRegressionTest):
    preset = variable(int, value=1)
    #: override the preset's trajectory count (the README's quick pass lowers it)
    trajectories = variable(int, value=0)
    seed = variable(int, value=2002)
    valid_systems = ['*']
    valid_prog_environs = ['+mpi -no-su3']   # a stack opts out: feature no-su3
    time_limit = '20m'
    reference_file = 'su3_rmd.csv'
    build = fixture(Su3Build, scope='environment')
    #: more ranks than cores: ranks take turns on the cores, so figures are reported only
    oversubscribed = variable(bool, value=False)

    def mark_oversubscribed(self):
        """Called once num_tasks is known. assert_performance is ReferenceLookup's variable
        (default True, -S can clear it); an oversubscribed run clears it."""
        self.oversubscribed = self.num_tasks > (os.cpu_count() or 1)
        if self.oversubscribed:
            self.assert_performance = False

    @run_after('setup')
    def drop_references(self):
        # after ReferenceLookup.load_references (base-class hooks run first)
        if not self.assert_performance:
            self.reference = {}
        self.fit_to_nodes()     # on a cluster: ranks over the nodes, messages between them

    def trajs(self, name=None):
        return records(os.path.join(self.stagedir, name or self.stdout.evaluate()), 'SU3-TRAJ')

    def gathers(self, name=None):
        return records(os.path.join(self.stagedir, name or self.stdout.evaluate()), 'SU3-GATHER')


class Su3RunBase(Su3Base):
    """What Su3Run runs and computes; its parameters and sanity are the test's."""

    @run_after('init')
    def set_case(self):
        self.num_tasks = self.ranks
        self.reference_case = f'preset{self.preset}/{self.comm}/np{self.ranks}'
        self.mark_oversubscribed()

    def perf_variable_names(self):
        """What ReferenceLookup looks up (it asserts none when assert_performance is false,
        and lists the portable ones in the report, so that a run that only reports them, as
        the README's quick pass does, can make or widen rows); nothing for an oversubscribed
        run, whose figures say nothing of the library; speedup_busy only where its baseline
        runs (busy_baseline). Not looked up, so only reported: comm_share (the share of
        time inside MPI holds the wait for a partner still computing, as the gathers do: a
        machine's own rows of it missed by 0.76x to 1.51x in clean runs), `speedup`
        (speedup_busy supersedes it) and gather_over_memcpy (exchange_over_memcpy times the
        same calls without the wait for a partner that it holds)."""
        if self.oversubscribed:
            return []
        return ['s_per_traj', 'gflops', self.exchange_figure] + \
            (['speedup_busy'] if self.busy_baseline else [])

    @property
    def exchange_figure(self):
        """The figure of su3's exchange that is looked up: over the kernel copy of the same
        bytes (exchange_over_cma) where that baseline runs, two ranks on one host; over memcpy
        (exchange_over_memcpy) across nodes. Why the kernel copy: over 14 runs in a row on the
        Xeon VM (mean over the 12 cases of each run) the exchange's time drifted 0.934-1.088x of
        its median, its ratio over memcpy 0.933-1.085x, over the kernel copy 0.982-1.024x
        (docs/measurement.md)."""
        one_host = self.current_partition.extras.get('nodes', 1) < 2
        return 'exchange_over_cma' if self.ranks == 2 and one_host else 'exchange_over_memcpy'

    @run_before('run')
    def set_command(self):
        self.executable = self.build.executable_path
        self.executable_opts = su3_options(self) + (['--corrupt-link'] if self.corrupt_link
                                                    else [])
        # The baseline of `speedup`: the same case on 1 rank, in this job, first. That of
        # `speedup_busy`: the whole lattice on each of the run's ranks at once (--alone), just
        # before the run and just after it (after_launch), then the run once more (run_again:
        # not a baseline, so an injected slowdown of the run slows it too).
        # Only where speedup_busy is asserted (not with more ranks than cores, nor in the
        # README's quick pass, which reports it): three launches of the ranks cost time.
        self.prerun_cmds.append(baseline_line(self, launch_line(self, 1, su3_options(self),
                                                                'np1')))
        self.keep_files = ['np1.out', 'np1.err']
        if not self.busy_baseline:
            return
        # The --alone ranks sit where the run's do (on a cluster, spread over its nodes).
        alone = su3_options(self) + ['--alone']
        self.prerun_cmds.append(baseline_line(self, launch_line(self, self.ranks, alone,
                                                                'alone', True)))
        # right after the run, in this order: the second baseline, then the run again
        after_launch(self, '; '.join([
            baseline_line(self, launch_line(self, self.ranks, alone, 'alone_after', True)),
            launch_line(self, self.ranks, su3_options(self), 'run_again', True)]))
        self.keep_files += [f'{name}.{ext}' for name in ('alone', 'alone_after', 'run_again')
                            for ext in ('out', 'err')]

    @property
    def busy_baseline(self):
        """Whether the --alone baselines run: where speedup_busy can be asserted (never with
        more ranks than cores: mark_oversubscribed clears assert_performance; not where it is
        reported only, as in the README's quick pass: -S Su3Run.report_only=speedup_busy,...)."""
        return self.assert_performance and 'speedup_busy' not in self.report_only

    def gather_records(self):
        """The SU3-GATHER records of each launch of the run: the run's, and the run again's
        where it ran (busy_baseline; a run again that left no output is _alone_same's to
        report)."""
        launches = [self.gathers()]
        if self.busy_baseline and os.path.exists(os.path.join(self.stagedir, 'run_again.out')):
            launches.append(self.gathers('run_again.out'))
        return launches

    @run_before('performance')
    def drop_busy_speedup(self):
        if not self.busy_baseline:     # no --alone baseline ran
            self.perf_variables.pop('speedup_busy', None)
        for way in ('shm', 'cma'):      # no exchange through shm or the kernel ran
            if over_shm(self.gathers(), way) is None:
                self.perf_variables.pop(f'exchange_over_{way}', None)

    @sn.deferrable
    def _kernel_copy(self):
        return kernel_copy_problem(self.reference, self.gathers()) or True

    @sn.deferrable
    def _placement(self):
        if self.oversubscribed:
            return True         # ranks take turns on the cores: nothing to assert
        out = os.path.join(self.stagedir, self.stdout.evaluate())
        return placement_problem(records(out, 'SU3-RUN')[0], records(out, 'SU3-END')[0],
                                 stack_of(self)[1].self_bind) or True

    @sn.deferrable
    def _exchanges(self):
        for launch, gathers in zip(('the run', 'the run again'), self.gather_records()):
            problem = exchange_problem(gathers)
            if problem:
                return f'{launch}: {problem}'
        return True

    @sn.deferrable
    def _alone_same(self):
        """The --alone runs (where they ran: busy_baseline) ended and evolved the 1-rank
        run's lattice: the same plaquettes (the same seed and lattice on one rank), so the
        baseline did the same work; and the run again ended with the run's plaquettes."""
        if not self.busy_baseline:
            return True
        one = [t['plaquette'] for t in self.trajs('np1.out')]
        run = [t['plaquette'] for t in self.trajs()]
        for name, same_as, what in (('alone.out', one, 'the 1-rank run'),
                                    ('alone_after.out', one, 'the 1-rank run'),
                                    ('run_again.out', run, 'the run')):
            path = os.path.join(self.stagedir, name)
            if not os.path.exists(path) or not records(path, 'SU3-END'):
                return f'{name} has no SU3-END record: that launch did not end (see the .err file)'
            got = [t['plaquette'] for t in self.trajs(name)]
            if len(got) != len(same_as) or plaquette_difference(same_as, got):
                return f'{name}: plaquettes differ from {what} ({got[:3]} against ' \
                    f'{same_as[:3]}...)'
        return True

    @sn.deferrable
    def _physics(self):
        trajs = self.trajs()
        plaq = [t['plaquette'] for t in trajs]
        if not trajs or trajs[0]['traj'] != 0 or plaq[0] != 3.0:
            return f'cold start plaquette is {plaq[:1]}, expected exactly 3.0'
        worst = max(t['max_unitarity_dev'] for t in trajs)
        if worst > UNITARITY:
            return f'unitarity deviation {worst:g} > {UNITARITY:g}'
        if len(plaq) < 3 or not all(p < 3.0 for p in plaq[1:]) or not plaq[-1] < plaq[1]:
            return f'at beta 6 the plaquette should fall from 3.0; measured {plaq[:6]}...'
        return True

    @run_after('sanity')
    def note_version(self):
        run = records(os.path.join(self.stagedir, self.stdout.evaluate()), 'SU3-RUN')[0]
        self.library_version = run.get('library_version', 'unknown')
        # Trajectory 0 is the cold start (no dynamics): the timed ones are the samples.
        self.figure_samples = {'s_per_traj': [float(t['seconds']) for t in self.trajs()
                                              if t['traj'] > 0]}

    def _end(self, field, out=None):
        return sn.extractsingle(r'^SU3-END (\{.*\})$', out or self.stdout, 1,
                                lambda s: json.loads(s)[field])

    @performance_function('s')
    def s_per_traj(self):
        return self._end('s_per_traj')

    @performance_function('Gflop/s')
    def gflops(self):
        return self._end('gflops')

    @performance_function('fraction')
    def comm_share(self):
        return self._end('comm_share')

    @performance_function('ratio')
    def speedup(self):
        """1-rank seconds per trajectory over this run's, both measured in this job: the lower
        quartiles over the timed trajectories. Every trajectory does the same work, so a slower
        library lengthens them all and moves the quartile; another tenant's load lengthens the
        ones it lands on. The median was not enough: a tenant's load on half the trajectories
        moved it by a sixth (docs/verification.md, "2026-11-24: two placements of the vCPUs,
        lower-quartile speedups, ...")."""
        return sn.defer(lower_quartile(self.trajs('np1.out')) / lower_quartile(self.trajs()))

    @performance_function('ratio')
    def gather_over_memcpy(self):
        """su3's own communication, undiluted by its arithmetic: the gathers' time inside MPI
        (lower quartile per message size) over memcpy of the same bytes on the same cores
        just after the run, geometric mean over the sizes (gather_over_memcpy above). Reported
        only: its lower quartile also holds the wait for a partner still computing, which
        doubled for hours with every library unchanged (docs/verification.md, "2026-11-26:
        su3's exchange, from a pause to the kernel copy"); exchange_over_memcpy is the same
        calls without it."""
        return sn.defer(over_memcpy(self.gathers()))

    @performance_function('ratio')
    def exchange_over_memcpy(self):
        """su3's communication with no wait in it: each gather size's exchange (the gather's
        own calls, partners and bytes) timed alone after the run with both ranks in step,
        each exchange timed on its own and followed by the same untimed pause on both ranks
        (not back to back: LAM 7.1 took three times its gathers' time that way, and got
        faster when slowed; docs/measurement.md), the least of 51 samples of at least 1 ms
        of exchanges (NetPIPE's statistic: a sample is the mean of 66-423 exchanges here, and
        noise only lengthens it; over 15 runs the least spread 1.06-1.25x per case and the
        lower quartile 1.11-1.44x, docs/measurement.md); over memcpy of the same bytes,
        geometric mean over the sizes (over_memcpy above). The gathers inside the run also
        wait for a partner still computing, and that wait moved with the machine's state
        (docs/measurement.md); this does not hold it."""
        return sn.defer(over_memcpy(self.gathers(), 'exchange_min_s'))

    @performance_function('ratio')
    def exchange_over_shm(self):
        """The exchange timed alone (exchange_over_memcpy's numerator) over the same bytes
        moved both ways between the two ranks' cores through shared memory with no library,
        sample by sample beside it (apps/su3_rmd/shm_exchange.c), least samples, geometric
        mean over the sizes. Reported only, to find out whether a baseline between the cores
        follows the state of the machine that moved the exchanges of every stack at once while
        memcpy within a core stayed (docs/measurement.md). Two ranks on one host only."""
        return sn.defer(over_shm(self.gathers()))

    @performance_function('ratio')
    def exchange_over_cma(self):
        """The exchange timed alone over the same bytes read from the partner's memory with one
        process_vm_readv each way and no library, sample by sample beside it: the copy MPICH
        and Open MPI make for these messages here (docs/measurement.md). The figure asserted
        for su3's exchange on one host (exchange_figure): the kernel copy crosses the same
        two cores the same way and follows the VM's drift (correlation 0.98 with the
        exchange over 14 runs), which memcpy within a core does not. Where the run is
        launched again (busy_baseline) the lower of the two launches' figures, each over its
        own kernel copy: a launch can be slow throughout, every sample (docs/verification.md,
        "2026-11-27: su3's exchange from the faster of two launches"), and an injected
        slowdown or a slower library slows both launches."""
        figures = [over_shm(gathers, 'cma') for gathers in self.gather_records()]
        figures = [f for f in figures if f is not None]
        return sn.defer(min(figures) if figures else None)

    @run_before('performance', always_last=True)
    def speedup_busy_held(self):
        """speedup_busy is reported, not judged (drop_judgement), where its baseline did not
        hold: the two --alone baselines around the run disagree by more than the figure's own
        band (the machine changed state during the job), or the speedup exceeds the run's rank
        count (a 1-rank lattice split over N ranks that ran more than N times faster: the
        baseline ran slow; docs/verification.md)."""
        if not self.busy_baseline or 'speedup_busy' not in self.perf_variables:
            return
        alone = {name: lower_quartile(self.trajs(name)) * 1e3
                 for name in ('alone.out', 'alone_after.out')}
        why = why_not_held(alone, 'ms a trajectory', self.band_of('speedup_busy'),
                           sn.evaluate(self.speedup_busy()),
                           (self.num_tasks, f'the {self.num_tasks} ranks of the run'))
        if why:
            self.drop_judgement('speedup_busy', why)

    @performance_function('ratio')
    def speedup_busy(self):
        """The 1-rank seconds per trajectory with every core of the run busy (--alone: each
        trajectory's seconds are its slowest rank's), the faster of the runs before and after,
        over the faster of this run and the run again; lower quartiles as in `speedup`. A
        tenant that takes part of one core through the run slows the run and both baselines
        alike, and leaves the ratio; a load that touches one baseline only was not on the
        machine the run had (as in HplRun), and one that touches one run only was not on the
        machine its baselines had (docs/verification.md, "2026-11-27: the rows on a third Xeon
        VM, and su3's run twice")."""
        busy = min(lower_quartile(self.trajs('alone.out')),
                   lower_quartile(self.trajs('alone_after.out')))
        run = min(lower_quartile(self.trajs()), lower_quartile(self.trajs('run_again.out')))
        return sn.defer(busy / run)
