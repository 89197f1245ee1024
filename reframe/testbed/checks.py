"""ReFrame building blocks shared by every test: the per-stack build fixture, the launch mixin
that starts jobs the way the registry says, and the reference lookup."""
import json
import math
import os
import pwd
import re
import shlex
import subprocess
from pathlib import Path

import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.backends import getlauncher
from reframe.core.builtins import run_after, run_before, variable
from reframe.core.exceptions import BuildError, ReframeError

from testbed import machine, references, registry, results
from testbed.hangs import HangGuard

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


def records(path, tag):
    """The JSON records behind `tag` in a program's output ('TAG {...}' lines)."""
    out = []
    with open(path) as fh:
        for line in fh:
            if line.startswith(tag + ' {'):
                out.append(json.loads(line[len(tag) + 1:]))
    return out


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


def job_env(env):
    """`env` for a test's env_vars. ReFrame writes them into the job script verbatim
    ('export K=V'): quoted here ({job}'s $$ stays live)."""
    return {k: registry.shell_word(v) for k, v in env.items()}


def drop_privileges(reg):
    """Command prefix that runs an MPI job as the unprivileged account when we are root.

    LAM refuses to run as root and Open MPI wants --allow-run-as-root: root only installs."""
    if os.geteuid() != 0:
        return []
    try:
        home = pwd.getpwnam(reg.run_as).pw_dir
    except KeyError:
        raise ReframeError(f'{reg.path}: defaults.run_as: account {reg.run_as!r} does not exist '
                           f'(the set-up creates it: make setup)') from None
    return ['setpriv', f'--reuid={reg.run_as}', f'--regid={reg.run_as}', '--init-groups',
            'env', f'HOME={home}']


def container_engine(partition):
    """podman (make images, this machine: the whole launch inside one container) or
    apptainer (a cluster: srun starts each rank inside the image, hybrid model)."""
    return partition.extras.get('container_engine', 'podman')


def image_of(test, stack, images):
    """The image of `stack` on the test's partition (extras container_images)."""
    try:
        return images[stack.name]
    except KeyError:
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


def job_exit_code(test):
    """The launch's exit code: the scheduler's, or where it cannot tell (squeue keeps no
    accounting) what the job script printed after the launch; None if neither knows."""
    if test.job.exitcode is not None:
        return test.job.exitcode
    path = os.path.join(test.stagedir, test.stderr.evaluate())
    try:
        with open(path, errors='replace') as fh:
            found = re.findall(r'^TESTBED-EXIT (\d+)$', fh.read(), re.M)
    except OSError:
        return None
    return int(found[-1]) if found else None


def fallback_launch(test, reg, stack, ntasks):
    """The fallback where srun cannot start a stack (LAM, whose ranks need lamd), for a test
    on a Slurm partition: the stack's own launcher argv for `ntasks` ranks, which reaches the
    job's other nodes through the partition's rsh-style agent (extras fallback_agent: site/
    cluster/agent on the emulated cluster, ssh on a site) from a host file of the job's nodes
    that the registry's fallback_env names; lamboot boots over the same file. Sets the job's
    variables and the host file's line; the launcher options that bind to this machine's
    cores are left out (each node's processes are held to its own cores, as under srun)."""
    part = test.current_partition
    if not stack.fallback_env:
        raise ReframeError(f'{reg.path}: stacks.{stack.name}: neither srun_mpi nor '
                           f'fallback_env is set, so nothing starts this stack on '
                           f'{part.fullname} (measure: site/cluster/launcher_table.py)')
    agent = part.extras.get('fallback_agent', 'ssh')
    hostfile = os.path.join(test.stagedir, 'fallback-hosts')
    test.env_vars.update(job_env(stack.fallback_settings(agent, hostfile)))
    line = stack.fallback_hostfile_command('fallback-hosts')
    if line not in test.prerun_cmds:     # a baseline launch of the same job calls this again
        test.prerun_cmds.insert(0, line)
    return stack.launch_command(ntasks, test.knobs, options=False)


def in_job_as_account(test, reg):
    """Command prefix for a job-script line that must run as the job account: on a Slurm
    partition the job already does (sbatch --uid), locally drop_privileges."""
    if test.current_partition.launcher_type.registered_name == 'srun':
        return []
    return drop_privileges(reg)


def extra_launch(test, ntasks, over_the_nodes=False):
    """The argv that starts `ntasks` more ranks of the test's stack from its job script, the
    way its main launch goes on the test's partition (a baseline run in the same job, e.g.
    su3_rmd's 1-rank run): locally the stack's own launcher as the job account; on a Slurm
    partition srun with the stack's PMI on the job's first node (over the job's nodes as the
    main launch places its ranks, with `over_the_nodes`), or the fallback (over the nodes)."""
    reg, stack = stack_of(test)
    if test.current_partition.launcher_type.registered_name != 'srun':
        return drop_privileges(reg) + stack.launch_command(ntasks, test.knobs)
    if stack.srun_mpi:
        return ['srun', f'--mpi={stack.srun_mpi}'] + ([] if over_the_nodes else ['-N', '1']) \
            + ['-n', str(ntasks)]
    return fallback_launch(test, reg, stack, ntasks)


def partition_knobs(test, stack):
    """The knob values the test's partition sets (transport=tcp between the nodes of a
    cluster) that the stack has; a stack without such a knob (PVM: TCP is its only path) runs
    as it is, as site/local.py's has_values admits it."""
    return {k: v for k, v in test.current_partition.extras.get('knobs', {}).items()
            if k in stack.knobs}


def slowdown_pause_file(test):
    """With TESTBED_INJECT_SCOPE=run, the file whose presence pauses the slowdown shim
    (TESTBED_SLOWDOWN_PAUSE) while a baseline of the job runs; '' otherwise."""
    if os.environ.get('TESTBED_INJECT_SLOWDOWN') and \
            os.environ.get('TESTBED_INJECT_SCOPE', 'job') == 'run':
        return os.path.join(test.stagedir, 'slowdown.pause')
    return ''


def baseline_line(test, line):
    """`line`, a job-script line that measures a baseline in the test's job, before or after
    its run. Under an injected slowdown of scope 'run' (an application's run slowed, its
    baselines at full speed: inject_slowdown) the shim is paused while it runs."""
    pause = slowdown_pause_file(test)
    if not pause:
        return line
    pause = shlex.quote(pause)
    return f'touch {pause}; {line}; tb_rc=$?; rm -f {pause}; (exit $tb_rc)'


def after_launch(test, line):
    """Run job-script `line` right after the test's launch, before anything else the job does
    then, keeping the launch's exit code ($? of a subshell's exit) for what follows: the code
    ReFrame and TESTBED-EXIT report. For a baseline measured before and after the run."""
    test.postrun_cmds.insert(0, f'tb_launch_rc=$?; {line}; (exit $tb_launch_rc)')


def one_task_on_each_node(test):
    """On a partition of several nodes (extras 'nodes'), a job of one task on each: a driver
    on the first node starts the ranks over all of them itself; call after setup."""
    nodes = test.current_partition.extras.get('nodes', 1)
    if nodes >= 2:
        test.num_tasks, test.num_tasks_per_node = nodes, 1
    return nodes


def as_job_account(test, reg):
    """A Slurm partition's job runs as the job account (sbatch --uid, the partition's access
    options) and writes into the stage directory, so that account owns it; the script prints
    the launch's exit code (squeue keeps no accounting, job_exit_code reads it)."""
    test.postrun_cmds.insert(0, 'echo "TESTBED-EXIT $?" >&2')
    if drop_privileges(reg):
        account = pwd.getpwnam(reg.run_as)
        os.chown(test.stagedir, account.pw_uid, account.pw_gid)
        test.env_vars['HOME'] = account.pw_dir


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


class StackLaunch(HangGuard):
    """Launch the job with the stack's own launcher, knobs and daemons, as the registry says;
    a stack that hung or crashed earlier in the run is not launched (testbed/hangs.py)."""

    #: knob settings for this test, e.g. {'transport': 'tcp'}; unset knobs take their default
    knobs = variable(typ.Dict[str, str], value={})
    #: what the library said it is, read from the program's output (never typed by hand)
    library_version = variable(str, value='unknown')
    #: the registry's name of the stack (environment names cannot hold dots)
    stack_name = variable(str, value='')
    #: how this system got the stack (the registry's origin) and the library's configure
    #: flags as the registry declares them, recorded beside every figure (summary, perflog)
    stack_origin = variable(str, value='')
    stack_configure = variable(str, value='')
    #: MPI_Finalize hung after every record was out (apps/common/tb_finalize.h): a library
    #: defect the summary lists apart from the figures, which stand
    finalize_hung = variable(bool, value=False)
    #: test-only slowdown factor preloaded into the job (TESTBED_INJECT_SLOWDOWN; 1 = none)
    injected_slowdown = variable(float, value=1.0)
    #: ... or the fixed wait after each slowed call, ns (TESTBED_INJECT_SLOWDOWN=+Nns; 0 = none)
    injected_delay_ns = variable(int, value=0)
    #: the calls it slows (TESTBED_INJECT_CALLS; empty = the shim's default list)
    injected_calls = variable(str, value='')
    #: what it slows (TESTBED_INJECT_SCOPE): 'job', every process of the job, baselines
    #: included; 'run', the test's own launch only, its baselines at full speed (baseline_line)
    injected_scope = variable(str, value='')
    #: where the sends are padded (TESTBED_INJECT_SENDS): 'after' the call (the shim's
    #: default) or 'before' it (the message leaves later; apps/slowdown/README.md)
    injected_sends = variable(str, value='')
    #: how the blocking point-to-point calls are slowed (TESTBED_INJECT_WAITS): 'block', a pad
    #: after the call (the shim's default), or 'poll', the call run as its nonblocking form and
    #: a loop of MPI_Test, each test padded (a slower progress engine; apps/slowdown/README.md)
    injected_waits = variable(str, value='')

    @run_before('run')
    def launch_with_stack(self):
        reg, stack = stack_of(self)
        self.stack_name = stack.name
        self.stack_origin = stack.origin
        self.stack_configure = shlex.join(stack.configure)
        drop = drop_privileges(reg)
        # The partition's knob values (e.g. transport=tcp between the nodes of a cluster)
        # under the test's own; recorded in self.knobs, so that the report says what ran.
        self.knobs = {**partition_knobs(self, stack), **self.knobs}
        try:
            env, knob_opts = stack.knob_settings(self.knobs)
            argv = stack.launch_command(self.num_tasks, self.knobs)
        except KeyError as err:
            raise ReframeError(f'{reg.path}: stacks.{stack.name}.knobs: {err.args[0]}') from None
        self.env_vars.update(job_env(env))
        self.inject_slowdown()
        launcher = self.current_partition.launcher_type.registered_name
        images = self.current_partition.extras.get('container_images')
        if images and container_engine(self.current_partition) == 'apptainer':
            images = None     # each rank in the image: wrap_rank_in_image, after the test's hooks
        if launcher == 'local' and images:
            # the whole launch, daemons included, inside the stack's image
            full = self.in_container(reg, stack, images, argv, env)
            self.job.launcher.modifier = full[0]
            self.job.launcher.modifier_options = full[1:]
            return
        if launcher == 'local':
            full = [registry.shell_word(a) for a in drop + argv]
            self.job.launcher.modifier = full[0]
            self.job.launcher.modifier_options = full[1:]
        elif launcher == 'srun' and stack.srun_mpi:
            self.launch_with_srun(reg, stack, knob_opts)
            drop = []         # the job already runs as the job account
        elif launcher == 'srun':
            self.launch_with_agent(reg, stack)
            drop = []
        else:
            raise ReframeError(f'{self.current_partition.fullname}: launcher {launcher!r}: the '
                               f'testbed launches with local (the stack\'s own) or srun')
        if stack.boot:
            run = ' '.join(shlex.quote(a) for a in drop)
            boot, halt = shlex.join(stack.boot), shlex.join(stack.halt)
            wipe = f' || {run} {shlex.join(stack.wipe)} >> daemon-halt.log 2>&1' \
                if stack.wipe else ''
            if launcher == 'local':
                # First: the job's shell becomes the reaper of the daemons it boots, so that
                # their halt does not wait on PID 1 (testbed/subreaper.py says why).
                self.prerun_cmds.insert(0, '[ -n "${TESTBED_SUBREAPER:-}" ] || exec python3 '
                                        + shlex.quote(str(Path(__file__).resolve().with_name(
                                            'subreaper.py'))) + ' "$0"')
            # Daemon output goes to files: a daemon holding a pipe open hangs its reader.
            self.prerun_cmds += [
                f'trap "{run} {halt} > daemon-halt.log 2>&1{wipe}" EXIT',
                f'{run} {boot} > daemon-boot.log 2>&1 || '
                f'{{ echo "{stack.boot[0]} failed; see daemon-boot.log" >&2; exit 1; }}',
            ]

    @run_before('run', always_last=True)
    def wrap_rank_in_image(self):
        """Hybrid model (engine apptainer, a cluster's partition): the host's launcher (srun)
        starts every rank as `apptainer exec IMAGE program`; last, once the test has set its
        executable."""
        images = self.current_partition.extras.get('container_images')
        if not images or container_engine(self.current_partition) != 'apptainer':
            return
        _, stack = stack_of(self)
        self.executable_opts = ['exec', image_of(self, stack, images), self.executable,
                                *self.executable_opts]
        self.executable = 'apptainer'

    def in_container(self, reg, stack, images, argv, env):
        """The launch as a podman command (quoted words): the stack's launcher runs inside its
        image as the job account, on the host's cores, with no network (loopback only), the
        stage tree mounted at the same path, and the job's variables passed by name. A stack
        with daemons (LAM) boots and halts them inside the same container, around the launch.
        runc and lowered ulimits: crun fails here on setrlimit, and the default limits exceed
        what the kernel grants an unprivileged container."""
        image = image_of(self, stack, images)
        stage_root = os.path.dirname(os.path.dirname(self.stagedir))
        names = sorted(set(env) | set(self.env_vars) | set(stack.environment))
        cmd = ['podman', '--runtime', 'runc', 'run', '--rm', '--network=none',
               '--ulimit', 'nofile=1024:4096', '--ulimit', 'nproc=4096:4096',
               '--shm-size=1g', '--user', reg.run_as, '-v', f'{stage_root}:{stage_root}',
               '-v', f'{APPS}:{APPS}:ro', '-w', self.stagedir,
               *[w for n in names for w in ('-e', n)], image]
        if stack.boot:
            halt = shlex.join(stack.halt) + (f' || {shlex.join(stack.wipe)}'
                                             if stack.wipe else '')
            # the stage is the host's (not the job account's to write): logs in the container;
            # the boot's log then goes to the job's stderr (boot_log: PVM's PVMD-BOOT record)
            script = (f'{shlex.join(stack.boot)} > /tmp/daemon-boot.log 2>&1 || '
                      f'{{ echo "{stack.boot[0]} failed:" >&2; cat /tmp/daemon-boot.log >&2; '
                      f'exit 1; }}; cat /tmp/daemon-boot.log >&2; "$@"; rc=$?; '
                      f'{halt} > /tmp/daemon-halt.log 2>&1; exit $rc')
            cmd += ['sh', '-c', script, 'sh']
        return [registry.shell_word(a) for a in cmd + argv]

    def boot_log(self):
        """Where the daemons' boot said what it did: daemon-boot.log in the stage, or, for a
        launch inside an image (which cannot write the stage), the job's stderr."""
        path = os.path.join(self.stagedir, 'daemon-boot.log')
        return path if os.path.exists(path) else \
            os.path.join(self.stagedir, self.stderr.evaluate())

    def spread_over_nodes(self):
        """On a partition of several nodes (extras 'nodes'), one rank per node, so that the
        messages (and the knobs) cross the network and the launcher; call after setup."""
        if self.current_partition.extras.get('nodes', 1) >= 2:
            self.num_tasks_per_node = 1

    def fit_to_nodes(self):
        """On a partition of several nodes (extras 'nodes'): the ranks spread over them, as
        many on each as it has CPUs; a job with more ranks than the partition's CPUs is skipped
        there, saying so (on one node such a run is oversubscribed and reported; across nodes
        Slurm would refuse it). Call after setup."""
        nodes = self.current_partition.extras.get('nodes', 1)
        if nodes < 2:
            return
        cpus = nodes * (self.current_partition.processor.num_cpus or 1)
        self.skip_if(self.num_tasks > cpus, f'{self.num_tasks} ranks: more than the {cpus} '
                     f'CPUs of {self.current_partition.fullname} ({nodes} nodes)')
        self.num_tasks_per_node = -(-self.num_tasks // nodes)

    @sn.deferrable
    def exit_status_after(self, tag):
        """exit_status, the run counted as ended when the program printed its `tag` record
        (P2P-END, HPL-END, SU3-END: the last before MPI_Finalize) on stdout."""
        with open(os.path.join(self.stagedir, self.stdout.evaluate()), errors='replace') as fh:
            return self.exit_status(any(line.startswith(tag + ' {') for line in fh))

    def exit_status(self, ended):
        """The launch's exit code, except that a program whose every record is out (`ended`)
        and whose ranks then said FINALIZE-HUNG (apps/common/tb_finalize.h) counts as 0 and
        sets finalize_hung, which the report and the summary show as a library defect."""
        code = self.exit_code()
        if code == 0 or not ended:
            return code
        try:
            with open(os.path.join(self.stagedir, self.stderr.evaluate()),
                      errors='replace') as fh:
                hung = re.search(r'^FINALIZE-HUNG:', fh.read(), re.M) is not None
        except OSError:
            hung = False
        if hung:
            self.finalize_hung = True
            return 0
        return code

    def exit_code(self):
        return job_exit_code(self)

    def launch_with_srun(self, reg, stack, knob_opts):
        """srun starts the ranks with the PMI the registry names for the stack, as the job
        account (sbatch --uid: the job is the account's); knobs travel in the environment."""
        if stack.boot:
            raise ReframeError(f'{reg.path}: stacks.{stack.name}: boots daemons ({stack.boot}) '
                               f'and names srun_mpi: its ranks need the daemons, so drop '
                               f'srun_mpi and use fallback_env')
        if knob_opts:
            raise ReframeError(f'{reg.path}: stacks.{stack.name}.knobs {self.knobs}: launcher '
                               f'options {knob_opts} exist for the stack\'s own launcher only; '
                               f'srun cannot pass them (use the library\'s environment '
                               f'variables)')
        self.job.launcher.options = [f'--mpi={stack.srun_mpi}'] + \
            list(self.job.launcher.options)
        as_job_account(self, reg)

    def launch_with_agent(self, reg, stack):
        """The fallback (fallback_launch) as the job's launcher: the stack's own, run in the
        job script on the first node. Knobs that are launcher options pass here."""
        argv = fallback_launch(self, reg, stack, self.num_tasks)
        self.job.launcher = getlauncher('local')()
        full = [registry.shell_word(a) for a in argv]
        self.job.launcher.modifier = full[0]
        self.job.launcher.modifier_options = full[1:]
        as_job_account(self, reg)

    def inject_slowdown(self):
        """Proof that references bite: with TESTBED_INJECT_SLOWDOWN=F in ReFrame's environment
        the job preloads apps/slowdown's shim (ci/slowdown.sh builds it), which slows chosen
        calls by F. In the job env, so lamboot's lamd and every launcher pass it to the ranks.
        TESTBED_INJECT_SCOPE=run leaves the job's baselines at full speed: with the calls
        'work,cblas_dgemm,dgemm_' an application's computation is slowed, not its baselines."""
        factor = os.environ.get('TESTBED_INJECT_SLOWDOWN', '')
        if not factor:
            return
        scope = os.environ.get('TESTBED_INJECT_SCOPE', 'job')
        if scope not in ('job', 'run'):
            raise ReframeError(f'TESTBED_INJECT_SCOPE={scope!r}: expected job (every process '
                               f'of the job) or run (the test\'s launch, not its baselines)')
        self.injected_scope = scope
        fixed = re.fullmatch(r'\+(\d+)ns', factor)
        try:
            self.injected_slowdown = 1.0 if fixed else float(factor)
            self.injected_delay_ns = int(fixed.group(1)) if fixed else 0
        except ValueError:
            self.injected_slowdown = 0.0
        if not 1.0 <= self.injected_slowdown <= 100.0 or \
                not 0 <= self.injected_delay_ns <= 1000000 or (fixed and not
                                                               self.injected_delay_ns):
            raise ReframeError(f'TESTBED_INJECT_SLOWDOWN={factor!r}: expected a factor from '
                               f'1 to 100, e.g. 1.2, or a fixed wait from +1ns to '
                               f'+1000000ns, e.g. +20ns')
        lib = os.environ.get('TESTBED_SLOWDOWN_LIB',
                             '/var/tmp/mpi-testbed-slowdown/libslowdown.so')
        if not os.path.exists(lib):
            raise ReframeError(f'TESTBED_INJECT_SLOWDOWN: no shim at {lib} '
                               f'(build it: make -C apps/slowdown)')
        self.injected_calls = os.environ.get('TESTBED_INJECT_CALLS', '')
        self.injected_sends = injection_choice(
            'SENDS', ('after', 'before'), 'after (the sends padded after the call, the '
            'default) or before')
        self.injected_waits = injection_choice(
            'WAITS', ('block', 'poll'), 'block (a pad after each blocking call, the default) '
            'or poll')
        self.env_vars['TESTBED_SLOWDOWN_SENDS'] = self.injected_sends
        self.env_vars['TESTBED_SLOWDOWN_WAITS'] = self.injected_waits
        self.env_vars.update({'LD_PRELOAD': shlex.quote(lib),
                              'TESTBED_SLOWDOWN': shlex.quote(factor)})
        if self.injected_calls:
            self.env_vars['TESTBED_SLOWDOWN_CALLS'] = shlex.quote(self.injected_calls)
        pause = slowdown_pause_file(self)
        if pause:
            self.env_vars['TESTBED_SLOWDOWN_PAUSE'] = shlex.quote(pause)
        if self.injected_slowdown > 1.0 or self.injected_delay_ns:
            # Each rank says so at MPI_Init: fail the job if a launcher did not pass it on.
            self.postrun_cmds += [
                f'[ "$(grep -c "^slowdown: active" {self.job.stderr})" -ge {self.num_tasks} ] '
                f'|| {{ echo "slowdown shim not active in every rank" >&2; exit 1; }}']


def injection_choice(name, choices, expected):
    """The shim setting TESTBED_INJECT_<name> from ReFrame's environment: one of `choices`,
    the first when unset; anything else stops the run naming the variable."""
    value = os.environ.get(f'TESTBED_INJECT_{name}', '')
    if value and value not in choices:
        raise ReframeError(f'TESTBED_INJECT_{name}={value!r}: expected {expected}')
    return value or choices[0]


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
        for key, ref in self.reference.items():
            if results.variable(key) == figure and len(ref) >= 3:
                return max(-math.log1p(ref[1]), math.log1p(ref[2]))
        return None

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
        copy (taken as HPL takes them, and into posted receives). (su3's gather_over_memcpy and
        exchange_over_shm, HPL's panels over copies between the ranks' cores are reported
        only: reframe/tests/su3_rmd.py, hpl.py.)"""
        return name.startswith(('time_over_', 'efficiency_')) or name in (
            'speedup', 'speedup_busy', 'exchange_over_memcpy', 'exchange_over_cma',
            'panel_over_memcpy', 'panel_replay_over_cma', 'panel_posted_over_cma')
