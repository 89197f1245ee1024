"""The launch plan: how a test's ranks start on its partition, the one place that knows launchers.

Locally the stack's own launcher (with its knobs and binding) run as the job account; on a
Slurm partition srun with the stack's PMI, or the fallback launcher (the stack's own, reaching
the job's nodes through the partition's agent) for stacks srun cannot start; inside the stack's
image where the partition names one; the daemons a stack needs booted and halted around the
launch; the lines a job runs before and after its launch (baselines, the run again); and the
slowdown shim that proves references bite. StackLaunch applies it to a test; StackLauncher is
the launcher ReFrame runs it with (registered as 'testbed-stack')."""
import os
import pwd
import re
import shlex
import shutil
from pathlib import Path

import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.backends import register_launcher
from reframe.core.builtins import run_before, variable
from reframe.core.exceptions import ReframeError
from reframe.core.launchers import JobLauncher

from testbed import registry
from testbed.checks import (APPS, PER_RANK_ENGINES, container_engine, image_of,
                            slowdown_shim, stack_of)
from testbed.hangs import HangGuard


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
            'env', f'HOME={home}', f'USER={reg.run_as}']     # ch-run refuses without USER


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


#: the fallback's host file, in the job's stage directory: written first, read by the boot
FALLBACK_HOSTS = 'fallback-hosts'


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
    env, line, argv = fallback_plan(stack, part.extras.get('fallback_agent', 'ssh'),
                                    os.path.join(test.stagedir, FALLBACK_HOSTS), ntasks,
                                    test.knobs)
    test.env_vars.update(job_env(env))
    if line not in test.prerun_cmds:     # a baseline launch of the same job calls this again
        test.prerun_cmds.insert(0, line)
    return argv


def fallback_plan(stack, agent, hostfile, ntasks, knobs=None):
    """The fallback launch of `ntasks` ranks, for a job whose working directory holds
    `hostfile`: the variables that point the stack's launcher (and its daemons' boot) at the
    agent and the host file, the line that writes the host file from the job's nodes, and the
    stack's launcher argv without the options that bind to this machine's cores. Also what
    site/cluster/launcher_table.py measures, outside ReFrame."""
    return (stack.fallback_settings(agent, hostfile),
            stack.fallback_hostfile_command(os.path.basename(hostfile)),
            stack.launch_command(ntasks, knobs, options=False))


def in_job_as_account(test, reg):
    """Command prefix for a job-script line that must run as the job account: on a Slurm
    partition the job already does (sbatch --uid), locally drop_privileges."""
    if test.current_partition.launcher_type.registered_name == 'srun':
        return []
    return drop_privileges(reg)


def extra_launch(test, ntasks, over_the_nodes=False, env=None):
    """The argv that starts `ntasks` more ranks of the test's stack from its job script, the
    way its main launch goes on the test's partition (a baseline run in the same job, e.g.
    su3_rmd's 1-rank run; a peer benchmark's launch): locally the stack's own launcher as the
    job account; on a Slurm partition srun with the stack's PMI on the job's first node (over
    the job's nodes as the main launch places its ranks, with `over_the_nodes`), or the
    fallback (over the nodes). `env`: variables for this launch alone (a peer's library path),
    set for the launcher, which passes them to its ranks."""
    reg, stack = stack_of(test)
    own = ['env', *(f'{k}={v}' for k, v in env.items())] if env else []
    if test.current_partition.launcher_type.registered_name != 'srun':
        return drop_privileges(reg) + own + stack.launch_command(ntasks, test.knobs)
    if stack.srun_mpi:
        return own + srun_argv(stack, ntasks, nodes=None if over_the_nodes else 1)
    return own + fallback_launch(test, reg, stack, ntasks)


def rank_in_image(test):
    """The words before a rank's program that run it inside its stack's image, on a partition
    whose ranks srun starts one by one in the image (hybrid model): `apptainer exec IMAGE` on a
    real cluster, `ch-run -b /var/tmp:/var/tmp IMAGE --` on the emulated one or this host (the
    node's own unpacked copy; /var/tmp, which the emulated nodes share and where the programs
    are built on the host, bound at its own path: ch-run binds only onto a folder the image
    has). [] elsewhere."""
    images = test.current_partition.extras.get('container_images')
    engine = container_engine(test.current_partition)
    if images is None or engine not in PER_RANK_ENGINES:
        return []
    _, stack = stack_of(test)       # images may be empty: image_of says why it has none
    image = image_of(test, stack, images)
    if engine == 'apptainer':
        words = ['apptainer', 'exec', image]
    elif not test.stagedir.startswith('/var/tmp/'):
        raise ReframeError(f'{test.current_partition.fullname}: the stage {test.stagedir} is '
                           f'not under /var/tmp, which ch-run binds into the image: unset '
                           f'TESTBED_STAGEDIR')
    else:
        words = ['ch-run', *join_words(test, stack), '-b', '/var/tmp:/var/tmp', image, '--']
    if stack.family == 'lam':
        # LAM's mpirun takes a program's arguments only after a '--' of its own
        words.insert(1, '--')
    return words


def join_words(test, stack):
    """ch-run's options that put the ranks of one launch on one host into one container: each
    ch-run makes a user namespace of its own, and a rank may not read a rank of another
    namespace (CMA's process_vm_readv, UCX's /proc/PID/fd: 'Permission denied'), so shared
    memory between them fails. Under srun ch-run counts its peers from Slurm's variables
    (--join); started by the stack's own launcher here, it is told the count and a tag that
    the job's shell makes new for every launch. The fallback launcher's ranks on a cluster
    (one a node in the testbed's jobs) are started alone."""
    if stack.family == 'pvm':
        # PVM's tasks meet over sockets, never in each other's memory; and rank 1, spawned by
        # the pvmd, could not share a tag the job's shell draws for rank 0 (a second image
        # launch in a job then joined the first's vanished group: "join: no PID")
        return []
    launcher = test.current_partition.launcher_type.registered_name
    if launcher != 'srun':
        return [f'--join-ct={test.num_tasks}', '--join-tag=tb$$-$RANDOM$RANDOM']
    return ['--join'] if stack.srun_mpi else []


def srun_argv(stack, ntasks, nodes=None, overcommit=False):
    """srun starting `ntasks` ranks of the stack with its PMI, inside a job: on `nodes` of the
    job's nodes (all of them when None); `overcommit` lets more ranks than cores start."""
    return ['srun', f'--mpi={stack.srun_mpi}'] + (['--overcommit'] if overcommit else []) + \
        (['-N', str(nodes)] if nodes else []) + ['-n', str(ntasks)]


def partition_knobs(test, stack):
    """The knob values the test's partition sets (transport=tcp between the nodes of a
    cluster) that the stack has; a stack without such a knob (PVM: TCP is its only path) runs
    as it is, as site/local.py's has_values admits it."""
    return {k: v for k, v in test.current_partition.extras.get('knobs', {}).items()
            if k in stack.knobs}


def apply_knobs(test, reg, stack):
    """The test's knob values over the partition's (transport=tcp between the nodes of a
    cluster) over the stack's defaults: recorded in test.knobs (the report says what ran),
    their variables written into the job script, inherited by every launch of the job.
    Returns (those variables, the launcher options of knobs that have none: none shipped)."""
    test.knobs = {**partition_knobs(test, stack), **test.knobs}
    try:
        env, knob_opts = stack.knob_settings(test.knobs)
    except KeyError as err:
        raise ReframeError(f'{reg.path}: stacks.{stack.name}.knobs: {err.args[0]}') from None
    test.env_vars.update(job_env(env))
    return env, knob_opts


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
        test.env_vars['USER'] = reg.run_as      # sbatch --uid sets neither; ch-run needs it


@register_launcher('testbed-stack', local=True)
class StackLauncher(JobLauncher):
    """The launcher of the launch plan: the whole line before the program (the stack's own
    launcher with its options, the drop to the job account, the fallback launcher), or
    nothing where the job's program launches by itself (StartupTime's driver). Registered with
    ReFrame, so that no test patches another launcher's modifier."""
    #: the line's words, each already quoted for the job script's shell
    words = variable(typ.List[str], value=[])

    def command(self, job):
        self.options = []       # as ReFrame's local launcher: the line is the plan's alone
        return list(self.words)


def set_launcher(test, argv):
    """The test's launcher becomes the plan's: `argv` before the program, quoted."""
    test.job.launcher = StackLauncher()
    test.job.launcher.words = [registry.shell_word(a) for a in argv]


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
        env, knob_opts = apply_knobs(self, reg, stack)
        argv = stack.launch_command(self.num_tasks, self.knobs)
        self.inject_slowdown()
        launcher = self.current_partition.launcher_type.registered_name
        images = self.current_partition.extras.get('container_images')
        if images and container_engine(self.current_partition) in PER_RANK_ENGINES:
            images = None     # each rank in the image: wrap_rank_in_image, after the test's hooks
        if launcher == 'local' and images:
            # the whole launch, daemons included, inside the stack's image
            set_launcher(self, self.in_container(reg, stack, images, argv, env))
            return
        if launcher == 'local':
            set_launcher(self, drop + argv)
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
            # Daemon output goes to files: a daemon holding a pipe open hangs its reader.
            lines = [f'trap "{run} {halt} > daemon-halt.log 2>&1{wipe}" EXIT',
                     f'{run} {boot} > daemon-boot.log 2>&1 || '
                     f'{{ echo "{stack.boot[0]} failed; see daemon-boot.log" >&2; exit 1; }}']
            if launcher == 'local':
                # First: the job's shell becomes the reaper of the daemons it boots, so that
                # their halt does not wait on PID 1 (testbed/subreaper.py says why).
                lines.insert(0, '[ -n "${TESTBED_SUBREAPER:-}" ] || exec python3 ' + shlex.quote(
                    str(Path(__file__).resolve().with_name('subreaper.py'))) + ' "$0"')
            # Before every line a test adds (its baselines launch ranks that need the daemons),
            # whichever hook ran first; after the fallback's host file, which the boot reads.
            hostfile = stack.fallback_hostfile_command(FALLBACK_HOSTS) \
                if stack.fallback_env else None
            at = self.prerun_cmds.index(hostfile) + 1 if hostfile in self.prerun_cmds else 0
            self.prerun_cmds[at:at] = lines

    @run_before('run', always_last=True)
    def wrap_rank_in_image(self):
        """Hybrid model (a cluster's partition): the host's launcher (srun) starts every rank
        inside the image (rank_in_image); last, once the test has set its executable."""
        words = rank_in_image(self)
        if words:
            self.executable_opts = [*words[1:], self.executable, *self.executable_opts]
            self.executable = words[0]
            if stack_of(self)[1].family == 'pvm':
                # rank 0 spawns rank 1 through the same words (apps/p2p/ctl_pvm.c); a pvmd
                # finds a task by its path
                self.env_vars['TESTBED_PVM_SPAWN_WRAPPER'] = registry.shell_word(
                    ' '.join([shutil.which(words[0]) or words[0], *words[1:]]))

    def in_container(self, reg, stack, images, argv, env):
        """The launch as a podman command (argv): the stack's launcher runs inside its
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
        return cmd + argv

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
        set_launcher(self, fallback_launch(self, reg, stack, self.num_tasks))
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
        lib = slowdown_shim('TESTBED_INJECT_SLOWDOWN')
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
            # Each rank says so at MPI_Init (a PVM task at its first pvm_send or pvm_recv; a
            # spawned one's line comes through rank 0, after "[tTID] "): fail the job if a
            # launcher did not pass it on.
            self.postrun_cmds += [
                f'[ "$(grep -cE "^(\\[t[0-9a-f]+\\] )?slowdown: active" {self.job.stderr})" '
                f'-ge {self.num_tasks} ] '
                f'|| {{ echo "slowdown shim not active in every rank" >&2; exit 1; }}']


def injection_choice(name, choices, expected):
    """The shim setting TESTBED_INJECT_<name> from ReFrame's environment: one of `choices`,
    the first when unset; anything else stops the run naming the variable."""
    value = os.environ.get(f'TESTBED_INJECT_{name}', '')
    if value and value not in choices:
        raise ReframeError(f'TESTBED_INJECT_{name}={value!r}: expected {expected}')
    return value or choices[0]
