"""ReFrame building blocks shared by every test: the per-stack build fixture, the launch mixin
that starts jobs the way the registry says, and the reference lookup."""
import json
import os
import pwd
import shlex
from pathlib import Path

import reframe as rfm
import reframe.utility.typecheck as typ
from reframe.core.builtins import run_after, run_before, variable
from reframe.core.exceptions import BuildError, ReframeError

from testbed import references, registry

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


class AppBuild(rfm.CompileOnlyRegressionTest):
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
        extra = ' '.join(f'../{src}' for src in stack.extra_sources)
        self.build_system.options = [f'CC={shlex.quote(stack.compiler)}',
                                     f'EXTRA_SRCS={shlex.quote(extra)}']
        self.build_system.max_concurrency = 2

    @run_before('sanity')
    def check_binary(self):
        self.sanity_patterns = rfm.utility.sanity.assert_true(
            os.path.exists(self.executable_path),
            msg=f'{self.app}: no binary after make')

    @property
    def executable_path(self):
        return os.path.join(self.stagedir, self.app, self.app)


class StackLaunch(rfm.RegressionMixin):
    """Launch the job with the stack's own launcher, knobs and daemons, as the registry says."""

    #: knob settings for this test, e.g. {'transport': 'tcp'}; unset knobs take their default
    knobs = variable(typ.Dict[str, str], value={})
    #: what the library said it is, read from the program's output (never typed by hand)
    library_version = variable(str, value='unknown')
    #: the registry's name of the stack (environment names cannot hold dots)
    stack_name = variable(str, value='')

    @run_before('run')
    def launch_with_stack(self):
        reg, stack = stack_of(self)
        self.stack_name = stack.name
        drop = drop_privileges(reg)
        try:
            env = stack.knob_settings(self.knobs)[0]   # the stack env is in the environment
            argv = stack.launch_command(self.num_tasks, self.knobs)
        except KeyError as err:
            raise ReframeError(f'{reg.path}: stacks.{stack.name}.knobs: {err.args[0]}') from None
        self.env_vars.update(env)
        if self.current_partition.launcher_type.registered_name == 'local':
            full = drop + argv
            self.job.launcher.modifier = full[0]
            self.job.launcher.modifier_options = full[1:]
        if stack.boot:
            run = ' '.join(shlex.quote(a) for a in drop)
            boot, halt = shlex.join(stack.boot), shlex.join(stack.halt)
            wipe = f' || {run} {shlex.join(stack.wipe)} >> daemon-halt.log 2>&1' \
                if stack.wipe else ''
            # Daemon output goes to files: a daemon holding a pipe open hangs its reader.
            self.prerun_cmds += [
                f'trap "{run} {halt} > daemon-halt.log 2>&1{wipe}" EXIT',
                f'{run} {boot} > daemon-boot.log 2>&1 || '
                f'{{ echo "{stack.boot[0]} failed; see daemon-boot.log" >&2; exit 1; }}',
            ]


class ReferenceLookup(rfm.RegressionMixin):
    """Read this test's performance references from reframe/references/<reference_file>."""

    reference_file = variable(str)
    #: the row of the reference file this test case reads ('case' column)
    reference_case = variable(str, value='')
    #: when true (the README's test command) a missing reference fails the test
    require_references = variable(typ.Bool, value=False)

    @run_after('setup')
    def load_references(self):
        path = REFERENCES / self.reference_file
        try:
            table, missing = references.for_test(
                path, self.current_system.name, self.current_partition.name,
                stack_of(self)[1].name, type(self).__name__,
                self.reference_case, self.perf_variable_names())
        except references.ReferenceError as err:
            raise ReframeError(str(err)) from None
        if missing and (self.require_references or
                        os.environ.get('TESTBED_REQUIRE_REFERENCES') == '1'):
            raise ReframeError(
                f'{path}: no reference for {self.current_partition.fullname} '
                f'{stack_of(self)[1].name} {type(self).__name__} {self.reference_case} '
                f'variable {missing[0]} (generate one: make references)')
        self.reference = table

    def perf_variable_names(self):
        return list(self.perf_variables) or ['latency', 'bandwidth']
