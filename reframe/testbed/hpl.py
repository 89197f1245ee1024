"""HplRun's mechanics (reframe/tests/hpl.py says what is measured and asserted): the build
through apps/hpl/build.sh, HPL.dat and the job's commands (the DGEMM baselines around xhpl, the
run again), the figures from xhpl's report and records (efficiency over the largest baseline,
the panels over their copies) and the rule for a figure whose baselines did not hold."""
import os
import shlex

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import run_after, run_before, sanity_function
from reframe.core.exceptions import BuildError, ReframeError

from testbed import hpl_input, machine, registry
from testbed.binding import placement_problem
from testbed.checks import (APPS, BuildInRunSlot, ReferenceLookup, install_failure,
                            kernel_copy_problem, records, stack_of)
from testbed.launch import (StackLaunch, after_launch, baseline_line, extra_launch,
                            in_job_as_account)
from testbed.held import sides_not_held, why_not_held
from testbed.perf import lookup, set_perf_variables
from testbed.references import floor_of


class HplBuild(BuildInRunSlot, rfm.CompileOnlyRegressionTest):
    """apps/hpl/build.sh for one stack: extract, patch, build against single-threaded OpenBLAS."""
    valid_systems = ['*']
    valid_prog_environs = ['+mpi']
    sourcesdir = None
    build_system = 'CustomBuild'
    build_locally = True

    @run_before('compile')
    def configure_build(self):
        reg, stack = stack_of(self)
        home = os.path.dirname(reg.prefix_root)
        for reason in (install_failure(reg, stack),
                       install_failure(reg, stack, status_name='hpl-source')):
            if reason:
                raise BuildError(reason)
        extra = [a for src in stack.extra_sources for a in ('--extra-src', str(APPS / src))]
        self.build_system.commands = [shlex.join([
            'bash', str(APPS / 'hpl' / 'build.sh'), '--cc', stack.compiler,
            '--out', os.path.join(self.stagedir, 'bin'),
            '--src-dir', os.path.join(home, 'src', 'hpcc'), *extra])]

    @sanity_function
    def built(self):
        return sn.assert_found(r'^HPL-BUILD \{', self.stdout, msg='build.sh printed no record')

    @property
    def xhpl(self):
        return os.path.join(self.stagedir, 'bin', 'xhpl')

    @property
    def dgemm_rate(self):
        return os.path.join(self.stagedir, 'bin', 'dgemm_rate')


class HplBase(StackLaunch, ReferenceLookup, rfm.RunOnlyRegressionTest):
    """What HplRun runs and computes; its parameters, variables and sanity are the test's."""

    @run_after('init')
    def set_grid(self):
        self.p, self.q = (int(x) for x in self.grid.split('x'))
        self.num_tasks = self.p * self.q
        self.reference_case = self.grid
        # Ranks beyond the cores take turns on them; such a grid gets its own (small) Ns,
        # and its figures are reported, not asserted (assert_performance: the attribute
        # ReferenceLookup honours).
        self.oversubscribed = self.num_tasks > (os.cpu_count() or 1)
        self.ns = self.n_list_oversubscribed if self.oversubscribed else self.n_list
        if self.oversubscribed:
            self.assert_performance = False

    def perf_variable_names(self):
        """What ReferenceLookup looks up (it asserts none when assert_performance is false,
        and lists the portable ones in the report, so that a run that only reports them can
        make or widen rows); nothing for an oversubscribed grid, whose figures say nothing of
        the library. As Su3Run.perf_variable_names. panel_over_xcopy and panel_over_pipe are
        reported, not looked up (module docstring)."""
        if self.oversubscribed:
            return []
        panels = self.panels and self.num_tasks > 1
        return [f'{what}_N{n}' for n in self.ns for what in ('gflops', 'time', 'efficiency')] \
            + ['dgemm_gflops'] \
            + ([self.panel_figure] if panels else []) \
            + (['panel_posted_over_cma'] if panels and
               self.panel_figure == 'panel_replay_over_cma' else [])

    @property
    def panel_figure(self):
        """The figure of HPL's panels that is looked up: with every rank on one host each
        panel's size sent again through MPI after the run, over the kernel copy of the same
        bytes (panel_replay_over_cma); across nodes, where no kernel copy crosses them, the
        panels in the run over memcpy (panel_over_memcpy). Why the replay: module docstring
        and docs/measurement.md."""
        one_host = self.current_partition.extras.get('nodes', 1) < 2
        return 'panel_replay_over_cma' if one_host else 'panel_over_memcpy'

    @run_after('setup')
    def drop_references(self):
        # after ReferenceLookup.load_references (base-class hooks run first)
        if not self.assert_performance:
            self.reference = {}
        self.fit_to_nodes()     # on a cluster: the grid's ranks over the nodes

    @property
    def baseline_cpus(self):
        """Cores the baseline keeps busy at once: this node's ranks, at most its CPUs."""
        return min(self.num_tasks_per_node or self.num_tasks, os.cpu_count() or 1)

    @run_before('performance')
    def define_perf(self):
        # Cores that can run at once: an oversubscribed grid gets no more than the machine.
        cores = min(self.num_tasks, os.cpu_count() or 1)
        dgemm = self._dgemm_per_core()
        set_perf_variables(self, {f'gflops_N{n}': ('Gflop/s', self._best(n, 'gflops'))
                                  for n in self.ns} |
                           {f'time_N{n}': ('s', self._best(n, 'time_s')) for n in self.ns} |
                           {'dgemm_gflops': ('Gflop/s', dgemm),
                            'dgemm_after_over_before': ('ratio', self._dgemm_drift())} |
                           {f'efficiency_N{n}': ('ratio', self._efficiency(n, cores))
                            for n in self.ns} |
                           self._panel_figures())

    def _panel_figures(self):
        """The panels' figures from the HPL-PANELS record; none with panels off (--no-panels)."""
        if not self.panels:
            return {}
        return (({'panel_over_memcpy': ('ratio', self._panels('recv_over_memcpy_lq'))}
                 if self.num_tasks > 1 else {}) |
                ({'panel_over_xcopy': ('ratio', self._panels('recv_over_xcopy_lq')),
                  'panel_over_pipe': ('ratio', self._panels('recv_over_pipe_lq'))}
                 if self._one_host() else {}) |
                ({'panel_over_cma': ('ratio', self._panels('recv_over_cma_lq')),
                  'panel_replay_over_cma': ('ratio', self._panels('replay_over_cma_lq')),
                  'panel_posted_over_cma': ('ratio', self._panels('posted_over_cma_lq'))}
                 if self._one_host() and self._has_kernel_copy() else {}))

    def _baselines(self):
        """The job's DGEMM baselines, in order: before xhpl, after it, after the run again."""
        return ['dgemm.out', 'dgemm_after.out'] + (['dgemm_again.out'] if self.repeats_run
                                                     else [])

    def _held(self, n, cores):
        """(efficiency, why): HPL's best Gflop/s over the capacity of its cores, the largest
        of the job's baselines (a load that touched one measurement was not on the machine
        HPL had); `why` is None where the figure can be judged, else why not: the baselines
        disagree by more than the figure's own band (the machine changed state during the
        job, docs/verification.md), or the efficiency is above 1 (HPL is DGEMM plus
        communication: above 1 a baseline ran slow, not the library fast)."""
        caps = {name: self._capacity(name) for name in self._baselines()}
        gflops = max(sn.evaluate(self._field(n, 'gflops', name))
                     for name in [None] + (['run_again.out'] if self.repeats_run else []))
        eff = gflops / (cores * sn.evaluate(self._dgemm_per_core()))
        return eff, why_not_held(caps, 'Gflop/s of DGEMM', self._efficiency_band(n), eff,
                                 (1, 'an efficiency of 1'))

    def _efficiency_band(self, n):
        """Half-width in log space of efficiency_N{n}'s row here, else the figure's floor."""
        band = self.band_of(f'efficiency_N{n}')
        return band if band is not None else floor_of('HplRun', f'efficiency_N{n}', True)

    @sn.deferrable
    def _efficiency(self, n, cores):
        return self._held(n, cores)[0]

    @run_before('performance', always_last=True)
    def efficiency_held(self):
        """A figure whose baselines did not hold is reported, not judged (drop_judgement)."""
        if not self.assert_performance:
            return
        cores = min(self.num_tasks, os.cpu_count() or 1)
        caps = {name: self._capacity(name) for name in self._baselines()}
        for n in self.ns:
            figure = f'efficiency_N{n}'
            why, sides = self._held(n, cores)[1], self.sides_of(figure)
            if why:
                self.drop_judgement(figure, why)
            elif sides:
                # an asymmetric row: the narrow side may be past the baselines' spread
                for side, reason in sides_not_held(caps, 'Gflop/s of DGEMM', *sides).items():
                    self.drop_side(figure, side, reason)

    def _has_kernel_copy(self):
        """The HPL-PANELS record has the kernel copy (process_vm_readv) baseline and the replay
        over it: left out where the kernel refused it (panel_time.c says why on stderr)."""
        recs = self._records('HPL-PANELS')
        return bool(recs) and {'recv_over_cma_lq', 'replay_over_cma_lq',
                               'posted_over_cma_lq'} <= set(recs[0])

    def _one_host(self):
        """Every rank of a grid of more than one on this node: the copies between cores need it."""
        return self.num_tasks > 1 and (self.num_tasks_per_node or self.num_tasks) >= self.num_tasks

    @sn.deferrable
    def _panels(self, field):
        """A field of the HPL-PANELS record (validate checked that it has panels)."""
        return self._records('HPL-PANELS')[0][field]

    @sn.deferrable
    def _panels_problem(self):
        """Why the HPL-PANELS record cannot be used, or True (also with panels off: xhpl
        --no-panels prints none). One rank has no broadcast."""
        if not self.panels:
            return True
        recs = self._records('HPL-PANELS')
        if not recs:
            return 'no HPL-PANELS record (apps/hpl/panel_time.c)'
        rec = recs[0]
        if self.num_tasks > 1 and not rec.get('messages'):
            return f'HPL-PANELS timed no panel on {self.num_tasks} ranks: {rec}'
        if not rec.get('kept_all', False):
            return f'HPL-PANELS did not keep every panel: {rec}'
        # an odd count's last rank has no partner: its panels have no copy between cores
        if self._one_host() and rec.get('xcopy_messages') != rec.get('paired_messages'):
            return (f'HPL-PANELS has no xcopy for every panel of a paired rank, with every '
                    f'rank on one host: {rec}')
        return True

    def _baseline(self, name):
        """The DGEMM-RATE record in `name` (dgemm.out: before xhpl, dgemm_after.out: after),
        None if it printed none."""
        recs = records(os.path.join(self.stagedir, name), 'DGEMM-RATE')
        return recs[0] if recs else None

    def _capacity(self, name):
        return self._baseline(name)['capacity_gflops']

    @sn.deferrable
    def _dgemm_per_core(self):
        """A core's DGEMM rate with every core of the node's ranks busy (the slowest core's
        pace): the largest of the job's measurements (before xhpl, after it, after the run
        again). A load that lasts through the run (another tenant for a minute) lowers all;
        one that touches a single measurement (seen once: the capacity after a LAM run 0.68x
        the one before it, in a run where HPL itself was not slower) is not the machine HPL
        ran on."""
        return max(self._capacity(name) for name in self._baselines()) / self.baseline_cpus

    @sn.deferrable
    def _dgemm_drift(self):
        """After over before: far from 1, the machine changed state while HPL ran."""
        return self._capacity('dgemm_after.out') / self._capacity('dgemm.out')

    @run_before('run')
    def write_input(self):
        mem = os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES')
        # Checked here, before any rank starts; the error names the parameter.
        try:
            hpl_input.write_hpl_dat(os.path.join(self.stagedir, 'HPL.dat'), self.ns, self.nb,
                                    self.p, self.q, mem_bytes=0.8 * mem,
                                    threshold=self.threshold)
        except ValueError as err:
            raise ReframeError(f'HPL.dat: {err}') from None
        self.executable = self.build.xhpl
        self.env_vars['OPENBLAS_NUM_THREADS'] = '1'
        if self.forced_blas_core:
            self.env_vars['OPENBLAS_CORETYPE'] = shlex.quote(self.forced_blas_core)
        reg, stack = stack_of(self)
        if stack.self_bind:         # the launcher cannot bind (LAM): ranks pin themselves
            self.executable_opts = ['--bind-self']
        if not self.panels:
            self.executable_opts = [*self.executable_opts, '--no-panels']
        # The DGEMM baseline runs in this job right before xhpl (after StackLaunch's daemon
        # boot, which goes first) and right after it; then, where the ranks fit
        # the cores, xhpl once more (run_again; not a baseline, so an injected slowdown of the
        # run slows it too), and the figures take the faster run, as su3's speedup_busy does:
        # a slow minute of the VM can hold the run and one baseline but not the other
        # (docs/verification.md, "2026-11-27: HPL slowed on the third VM, and run twice").
        dgemm = registry.shell_join(
            in_job_as_account(self, reg) + [self.build.dgemm_rate, '--n', str(self.dgemm_n),
                                            '--reps', str(self.dgemm_reps),
                                            '--cpus', str(self.baseline_cpus)])
        self.prerun_cmds.append(baseline_line(self, f'{dgemm} > dgemm.out 2> dgemm.err'))
        after = [baseline_line(self, f'{dgemm} > dgemm_after.out 2>> dgemm.err')]
        self.keep_files = ['dgemm.out', 'dgemm_after.out']
        if self.repeats_run:
            # --no-panels: its panels are timed as in the run (the same run), not reported
            # nor replayed after it (1-2 s a case; only the run's HPL-PANELS are read).
            xhpl = registry.shell_join(extra_launch(self, self.num_tasks, True) +
                                       [self.executable, *self.executable_opts,
                                        '--no-panels'])
            after.append(f'{xhpl} > run_again.out 2> run_again.err')
            # a third baseline: the run again gets one on each side too, so that a run whose
            # baselines disagree has another to be judged by (efficiency_held)
            after.append(baseline_line(self, f'{dgemm} > dgemm_again.out 2>> dgemm.err'))
            self.keep_files += ['run_again.out', 'run_again.err', 'dgemm_again.out']
        after_launch(self, '; '.join(after))

    @property
    def repeats_run(self):
        """xhpl runs twice where its figures can be asserted (not with more ranks than
        cores: reported only, and slow)."""
        return not self.oversubscribed

    @property
    def forced_blas_core(self):
        """blas_coretype where this machine can run it: Haswell's kernels need AVX2 and FMA."""
        if self.blas_coretype.lower() != 'haswell':
            return self.blas_coretype
        return self.blas_coretype if {'avx2', 'fma'} <= machine.cpu_flags() else ''

    @sn.deferrable
    def _blas_core(self):
        """The kernels that ran are the ones asked for (the baseline's record says)."""
        want = self.forced_blas_core
        for name in ('dgemm.out', 'dgemm_after.out'):
            rec = self._baseline(name)
            if rec is None:
                return f'{name}: no DGEMM-RATE record (see dgemm.err)'
            got = rec.get('blas_core')
            if want and str(got).lower() != want.lower():
                return f'{name}: OpenBLAS ran its {got} kernels, not {want} (blas_coretype)'
        return True

    def _output(self, name=None):
        """The result lines of the run (stdout) or of the run again (`name` run_again.out)."""
        with open(os.path.join(self.stagedir, name or self.stdout.evaluate())) as fh:
            return hpl_input.parse_hpl_output(fh.read())

    def _field(self, n, field, name=None):
        return lookup(lambda: self._output(name), 'N', n, field,
                      'HPL result line' + (f' in {name}' if name else ''))

    @sn.deferrable
    def _best(self, n, field):
        """Gflop/s (the higher) or seconds (the lower) of N over the run and the run again."""
        values = [self._field(n, field)] + ([self._field(n, field, 'run_again.out')]
                                            if self.repeats_run else [])
        return max(values) if field == 'gflops' else min(values)

    @sn.deferrable
    def _again_ok(self):
        """The run again (repeats_run) ended, passed every residual check for every N, and
        its ranks were placed as the run's."""
        if not self.repeats_run:
            return True
        path = os.path.join(self.stagedir, 'run_again.out')
        ends = records(path, 'HPL-END') if os.path.exists(path) else []
        if not ends:
            return 'run_again.out has no HPL-END record: the run again did not end ' \
                   '(see run_again.err)'
        with open(path, errors='replace') as fh:
            failed = 'FAILED' in fh.read()
        if failed or not sn.evaluate(self._complete('run_again.out')):
            return 'run_again.out: not every N of HPL.dat has a PASSED result'
        return sn.evaluate(self._placement('run_again.out'))

    @sn.deferrable
    def _kernel_copy(self):
        """A row of a replay over the kernel copy to meet and no kernel copy measured fails
        (checks.kernel_copy_problem); the panels over it are reported only, never looked up."""
        if not self.panels:
            return True
        return next(filter(None, (kernel_copy_problem(self.reference, name,
                                                      self._has_kernel_copy(), 'HplRun')
                                  for name in ('panel_replay_over_cma',
                                               'panel_posted_over_cma'))), True)

    def _records(self, tag, name=None):
        """`tag`'s records in the run's stdout, or in `name` (run_again.out)."""
        return records(os.path.join(self.stagedir, name or self.stdout.evaluate()), tag)

    @sn.deferrable
    def _placement(self, name=None):
        if self.oversubscribed:
            return True         # ranks take turns on the cores: nothing to assert
        return placement_problem(self._records('HPL-RUN', name)[0],
                                 self._records('HPL-END', name)[0],
                                 stack_of(self)[1].self_bind) or True

    @run_after('sanity')
    def note_version(self):
        self.library_version = self._records('HPL-RUN')[0].get('library_version', 'unknown')
        # One factorisation per N in each run (two with the run again): the compare pools
        # them over sessions (make compare A=s1,s2,s3 B=...).
        samples = {}
        for r in self._output() + (self._output('run_again.out') if self.repeats_run else []):
            samples.setdefault(f"time_s@N{r['N']}", []).append(float(r['time_s']))
        self.figure_samples = samples

    @sn.deferrable
    def _complete(self, name=None):
        out = self._output(name)
        return out.ok and sorted(r['N'] for r in out) == sorted(self.ns)
