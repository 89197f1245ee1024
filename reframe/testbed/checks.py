"""ReFrame building blocks shared by every test: the stack of a test, the per-stack build
fixture, the programs' records, and the reference lookup. How a test launches is
testbed/launch.py."""
import json
import math
import os
import shlex
import subprocess
from pathlib import Path

import reframe as rfm
import reframe.utility.typecheck as typ
from reframe.core.builtins import run_after, run_before, variable
from reframe.core.exceptions import BuildError, ReframeError

from testbed import machine, references, registry, results

APPS = registry.REPO / 'apps'
REFERENCES = registry.REPO / 'reframe' / 'references'

_REGISTRY = None


def stack_of(test):
    """The registry entry of the environment a test runs in (environments are named by stack)."""
    global _REGISTRY
    if _REGISTRY is None:
        _REGISTRY = registry.load()
    try:
        return _REGISTRY, _REGISTRY.by_environ(test.current_environ.name)
    except registry.RegistryError as err:
        raise ReframeError(str(err)) from None


_COMMIT = None


def project_commit():
    """The checkout's commit, '-dirty' when its tracked files differ ('' outside git)."""
    global _COMMIT
    if _COMMIT is None:
        try:
            out = subprocess.run(['git', '-C', str(registry.REPO), 'describe', '--always',
                                  '--dirty', '--abbrev=12'], capture_output=True, text=True,
                                 timeout=20)
            _COMMIT = out.stdout.strip() if out.returncode == 0 else ''
        except (OSError, subprocess.SubprocessError):
            _COMMIT = ''
    return _COMMIT


def install_failure(reg, stack, status_name=None):
    """The reason the embedded installer recorded for a failed stack (or for another set-up
    step, `status_name`, such as the HPL source), or None."""
    status = Path(reg.prefix_root).parent / 'status' / f'{status_name or stack.name}.json'
    try:
        info = json.loads(status.read_text())
    except (OSError, json.JSONDecodeError):
        return None     # not installed by the embedded installer (a cluster, say): try the build
    return None if info.get('ok') else (f'{status_name or "stack " + stack.name} failed to install: '
                                        f'{info.get("reason", "no reason recorded")} '
                                        f'(log: {info.get("log", "none")})')


def slowdown_shim(who):
    """The path of the test-only slowdown shim (apps/slowdown; TESTBED_SLOWDOWN_LIB), or a
    ReframeError naming `who` (the setting that asked for it) and how to build it."""
    lib = os.environ.get('TESTBED_SLOWDOWN_LIB', '/var/tmp/mpi-testbed-slowdown/libslowdown.so')
    if not os.path.exists(lib):
        raise ReframeError(f'{who}: no shim at {lib} (build it: make -C apps/slowdown)')
    return lib


def records(path, tag):
    """The JSON records behind `tag` in a program's output ('TAG {...}' lines)."""
    out = []
    with open(path) as fh:
        for line in fh:
            if line.startswith(tag + ' {'):
                out.append(json.loads(line[len(tag) + 1:]))
    return out


def payload_problem(rows, samples, label=lambda r: r['transport'], per_sample=2):
    """Why a timing program's records do not prove their payloads, or None: every sample checks
    at least one received message on each receiving rank, so a record (a size of one transport,
    pair or mode) holds `per_sample` (a number, or a function of the record) checked messages a
    sample at least. `label` names the record in the line."""
    for r in rows:
        least = samples * (per_sample(r) if callable(per_sample) else per_sample)
        if r['checked_messages'] < least:
            return (f"{label(r)} {r['size_bytes']} bytes: {r['checked_messages']} messages "
                    f'payload-checked, fewer than {least}')
    return None


def kernel_copy_problem(reference, figure, measured, test):
    """Why `figure`, a ratio over the kernel copy (process_vm_readv) where it has a row to meet
    (`reference`: the test's, a ScopedDict with 'system:partition:variable' keys, or a dict of
    dicts), cannot be asserted, or None. A kernel that refuses process_vm_readv (Yama's
    ptrace_scope above 0, a seccomp profile) leaves the figure out (`measured` false), and an
    asserted figure that vanished would be a check skipped and counted as passed."""
    asserted = any(results.variable(key) == figure or
                   (isinstance(refs, dict) and figure in refs)
                   for key, refs in reference.items())
    if not asserted or measured:
        return None
    return (f'{figure} has a reference here but was not measured: the kernel copy '
            f'(process_vm_readv) did not run (rfm_job.err says why; where the kernel has Yama, '
            f'kernel.yama.ptrace_scope must be 0), or report it only: '
            f'-S {test}.report_only={figure}')


def shm_floor_8B_us(p2p_rows):
    """The 8-byte shared-memory floor (median half round trip, us) among p2p's P2P records,
    None if the run did not measure it. It tells where the two ranks' CPUs sat on the host
    (docs/measurement.md): the summary shows it, PeerCompare gates its rounds on it."""
    return next((float(r['median_us']) for r in p2p_rows
                 if r.get('transport') == 'shm' and r['size_bytes'] == 8), None)


#: engines whose ranks srun starts inside the image, one by one (hybrid model): apptainer on a
#: real cluster, charliecloud (ch-run) on the emulated one (site/cluster/node_images.py)
PER_RANK_ENGINES = ('apptainer', 'charliecloud')


def container_engine(partition):
    """podman (make images, this machine: the whole launch inside one container), apptainer
    (a cluster) or charliecloud (the emulated cluster): srun starts each rank inside the
    image, hybrid model."""
    return partition.extras.get('container_engine', 'podman')


def image_of(test, stack, images):
    """The image of `stack` on the test's partition (extras container_images); where its pull
    failed (extras image_failures, make cluster-pull), why."""
    try:
        return images[stack.name]
    except KeyError:
        why = test.current_partition.extras.get('image_failures', {}).get(stack.name)
        if why:
            raise ReframeError(f'{test.current_partition.fullname}: no image of {stack.name} on '
                               f'every node: {why}') from None
        raise ReframeError(f'{test.current_partition.fullname}: extras.container_images has no '
                           f'image for {stack.name} (make images, or the site\'s pull)') from None


def compiler_of(test, stack):
    """The stack's compiler wrapper; on an Apptainer partition run inside the image, since
    the cluster's host need not have the stack at all."""
    if test.current_environ.extras.get('provided_by') in ('spack', 'modules'):
        return test.current_environ.cc    # the site's wrapper (site/examples/slurm_cluster.py)
    images = test.current_partition.extras.get('container_images')
    if images and container_engine(test.current_partition) == 'apptainer':
        return f'apptainer exec {image_of(test, stack, images)} {stack.compiler}'
    return stack.compiler


class BuildInRunSlot(rfm.RegressionTestPlugin):
    """A build on a partition whose jobs run on this machine (the local scheduler) takes the
    partition's job slot. ReFrame's default policy (async) runs builds beside jobs: builds
    count against max_local_jobs (8), jobs against the partition's max_jobs (1), so a build
    could compile on the cores a timed run owns, and once halved an HPL efficiency
    (docs/verification.md, "2026-11-27: a build beside a timed run halved an HPL figure").
    In the partition's slot a build waits for the run
    and a run for the build, as with --exec-policy=serial; the job itself is local either way.
    Elsewhere (a cluster's partition) builds stay local and run beside the nodes' jobs; the
    emulated cluster's nodes share this machine, but a build cannot go through its Slurm (jobs
    run there as the job account), so it is run with --exec-policy=serial (ci/cluster.sh)."""

    @run_after('setup')
    def take_the_run_slot(self):
        # ReFrame picks the slot from build_locally when the build starts, after setup
        if self.current_partition.scheduler.registered_name == 'local':
            self.build_locally = False


class AppBuild(BuildInRunSlot, rfm.CompileOnlyRegressionTest):
    """Build one program of apps/ once per stack (use as fixture(..., scope='environment'))."""
    app = variable(str)
    valid_systems = ['*']
    valid_prog_environs = ['+mpi']
    sourcesdir = str(APPS)
    build_system = 'Make'
    build_locally = True

    @run_before('compile')
    def configure_build(self):
        reg, stack = stack_of(self)
        reason = install_failure(reg, stack)
        if reason:
            raise BuildError(reason)
        self.sourcepath = self.app          # make -C <app> inside the staged apps/
        self.build_system.flags_from_environ = False
        # -B: a binary left in a checkout's apps/ (a build by hand, another stack's) is
        # staged along and would count as current (seen: an MPICH knobs under Open MPI)
        self.build_system.options = ['-B'] + self.make_options(stack)
        self.build_system.max_concurrency = 2

    def make_options(self, stack):
        """make's arguments: the stack's compiler and the sources it needs linked in."""
        extra = ' '.join(f'../{src}' for src in stack.extra_sources)
        return [f'CC={shlex.quote(compiler_of(self, stack))}', f'EXTRA_SRCS={shlex.quote(extra)}']

    @run_before('sanity')
    def check_binary(self):
        self.sanity_patterns = rfm.utility.sanity.assert_true(
            os.path.exists(self.executable_path),
            msg=f'{os.path.basename(self.executable_path)}: no binary after make')

    @property
    def executable_path(self):
        return os.path.join(self.stagedir, self.app, self.app)


class ReferenceLookup(rfm.RegressionTestPlugin):
    """Read this test's performance references from reframe/references/<reference_file>.

    Ratios to a baseline measured in the same job (portable variables) are looked up under the
    machine type and travel; absolute figures under this machine's id (testbed/machine.py).
    With TESTBED_REQUIRE_REFERENCES=1 (the README's test command) a missing portable reference
    fails the test; a missing absolute one never does: the figure is reported, not asserted
    (ci/suite.sh says so once per run)."""

    reference_file = variable(str)
    #: the row of the reference file this test case reads ('case' column)
    reference_case = variable(str, value='')
    #: when true a missing portable reference fails the test
    require_references = variable(typ.Bool, value=False)
    #: portable variables whose rows exist for some machine types only: asserted where the
    #: type has a row, reported where it has none, even when references are required
    optional_portable = variable(typ.List[str], value=[])
    #: variables reported but not asserted in this run, e.g. -S HplRun.report_only=NAME (the
    #: README's quick pass, for a figure asserted only in `make run`, against this machine's
    #: own row where it has one, else its type's)
    report_only = variable(typ.List[str], value=[])
    #: false for runs whose figures are reported but never asserted (more ranks than cores)
    assert_performance = variable(typ.Bool, value=True)
    #: the machine record's keys, kept in the run report beside every figure
    machine_type = variable(str, value='')
    machine_id = variable(str, value='')
    machine_record = variable(str, value='')
    #: the variables whose references travel (keyed by machine type), kept in the run report
    #: so that `make references` keys each row as the test looks it up
    portable_variables = variable(typ.List[str], value=[])
    #: the variables the test looks up (asserted where a row exists): `make references` writes
    #: rows for these only, not for figures that are only ever reported
    looked_up_variables = variable(typ.List[str], value=[])
    #: every sample behind the figures, kept in the run report so that a compare between runs
    #: (testbed/compare.py) tests on the samples: 'FIGURE_UNIT@CASE' -> values in the order
    #: measured, all times (lower is better), e.g. 'half_round_trip_us@1024'
    figure_samples = variable(typ.Dict[str, typ.List[float]], value={})
    #: the project's commit the run was made from ('' outside a git checkout)
    testbed_commit = variable(str, value='')
    #: figures whose same-job baseline did not hold: figure -> why; reported, not judged
    not_held = variable(typ.Dict[str, str], value={})

    def band_of(self, figure):
        """Half-width in log space of `figure`'s row here (the wider side), None without one."""
        sides = [w for w in self.sides_of(figure) or () if w is not None]
        return max(sides) if sides else None

    def sides_of(self, figure):
        """(below, above): half-widths in log space of each side of `figure`'s row here (None
        for a side left unbounded, drop_side), None without a row."""
        for key, ref in self.reference.items():
            if results.variable(key) == figure and len(ref) >= 3:
                return (None if ref[1] is None else -math.log1p(ref[1]),
                        None if ref[2] is None else math.log1p(ref[2]))
        return None

    def drop_side(self, figure, side, why):
        """Judge `figure` on one side of its row only: the other ('lower' or 'upper') is left
        unbounded (ReFrame's None) and the summary lists why with the measurements that did not
        hold (references update and transfer leave the figure out, as they do those)."""
        self.not_held = {**self.not_held, figure: why}
        for key in [k for k in self.reference if results.variable(k) == figure]:
            ref = list(self.reference[key])
            ref[1 if side == 'lower' else 2] = None
            self.reference[key] = tuple(ref)

    def drop_judgement(self, figure, why):
        """Report `figure` without judging it against its row: its same-job baseline did not
        hold (moved during the run, or the figure beat a physical bound), so a verdict on it
        would be a verdict on the machine's state. The summary lists it with `why`."""
        self.not_held = {**self.not_held, figure: why}
        for key in [k for k in self.reference if results.variable(k) == figure]:
            del self.reference[key]     # a ScopedDict: keys 'system:partition:variable'

    @run_after('setup')
    def load_references(self):
        self.testbed_commit = project_commit()
        rec = machine.record()
        self.machine_type, self.machine_id = rec['machine_type'], rec['machine_id']
        self.machine_record = json.dumps(rec, sort_keys=True)
        try:
            paths = references.files_of(self.reference_file)
        except references.ReferenceError as err:
            raise ReframeError(str(err)) from None
        path = paths[-1]
        every = self.perf_variable_names()
        # what this test looks up: `references update` writes rows for these only
        self.looked_up_variables = list(every)
        # every portable figure, asserted or only reported: the report says which ones travel,
        # so that `references update` and `transfer` can make or widen rows from any run
        self.portable_variables = [n for n in every if self.portable_variable(n)]
        names = [n for n in every if n not in self.report_only]
        try:        # read (and so validate) the file even when nothing will be asserted
            table, missing, _ = references.for_test(
                paths, self.current_system.name, self.current_partition.name, rec,
                stack_of(self)[1].name, type(self).__name__, self.reference_case, names,
                [n for n in self.portable_variables if n in names])
        except references.ReferenceError as err:
            raise ReframeError(str(err)) from None
        # Oversubscribed runs are never asserted; TESTBED_MEASURE_ONLY=1 (making references,
        # or the end-to-end checks of other things) measures without asserting.
        if not self.assert_performance or os.environ.get('TESTBED_MEASURE_ONLY') == '1':
            self.reference = {}
            return
        missing = [m for m in missing if m not in self.optional_portable]
        # A machine with no row of its type nor of its own is new, not short of rows: its
        # figures are reported, and the run asserts what holds everywhere (references.notice).
        if missing and (self.require_references or
                        os.environ.get('TESTBED_REQUIRE_REFERENCES') == '1') and \
                self.machine_has_rows(rec):
            raise ReframeError(
                f'{path}: no reference for {self.current_partition.fullname} machine type '
                f'{rec["machine_type"]} {stack_of(self)[1].name} {type(self).__name__} '
                f'{self.reference_case} variable {missing[0]} (generate one: make references)')
        self.reference = table

    def perf_variable_names(self):
        return list(self.perf_variables) or ['latency', 'bandwidth']

    @staticmethod
    def machine_has_rows(rec):
        try:
            return references.has_rows(rec)
        except references.ReferenceError as err:
            raise ReframeError(str(err)) from None

    @staticmethod
    def portable_variable(name):
        """Ratios to a same-job baseline: p2p time over the shared-memory floor or memcpy,
        HPL over the DGEMM capacity of its cores, su3 over its single-rank run (alone, or
        with every core busy), su3's exchanges timed alone over memcpy or over the kernel copy
        of the same bytes, HPL's panels over memcpy and their sizes replayed over the kernel
        copy (taken as HPL takes them, and into posted receives), the p2p program's time in
        its image over its time bare, launch by launch (tax_ratio@SIZE). (su3's
        gather_over_memcpy and exchange_over_shm, HPL's panels over copies between the ranks'
        cores are reported only: reframe/tests/su3_rmd.py, hpl.py.)"""
        return name.startswith(('time_over_', 'efficiency_', 'tax_ratio@')) or name in (
            'speedup', 'speedup_busy', 'exchange_over_memcpy', 'exchange_over_cma',
            'panel_over_memcpy', 'panel_replay_over_cma', 'panel_posted_over_cma')
