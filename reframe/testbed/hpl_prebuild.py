"""HPL built ahead for every installed stack that runs it, into apps/hpl/build.sh's cache.

`make test` (ci/test.sh) runs this under SCHED_IDLE beside pytest and the source stacks'
builds: it takes a core only when nothing else wants it (a build's serial configure, a make
with little to do in parallel), and HplBuild in the quick pass then copies each program from
the cache (the key is the build's inputs, not where it goes) instead of compiling it in the
timed pass, where the other core would be idle. The command is HplBuild's own
(build_argv), so a prebuilt program is the program the test would have built.

    python3 -m testbed.hpl_prebuild        # one line per stack: built, cached, skipped or failed

A stack whose build fails here is only reported: HplBuild builds it again in the quick pass
and fails there with build.sh's reason. Exit 0 unless the registry cannot be read."""
import os
import shlex
import subprocess
import sys
import tempfile
import time

from testbed import registry

APPS = registry.REPO / 'apps'


def runs_hpl(stack):
    """HplRun's valid_prog_environs ('+mpi -no-hpl'), read from the registry's features."""
    return 'mpi' in stack.features and 'no-hpl' not in stack.features


def build_argv(reg, stack, out):
    """apps/hpl/build.sh for `stack`, its programs into `out` (run in the stack's environment:
    build_script)."""
    home = os.path.dirname(reg.prefix_root)
    extra = [a for src in stack.extra_sources for a in ('--extra-src', str(APPS / src))]
    return ['bash', str(APPS / 'hpl' / 'build.sh'), '--cc', stack.compiler, '--out', out,
            '--src-dir', os.path.join(home, 'src', 'hpcc'), *extra]


def build_script(reg, stack, out):
    """The build as ReFrame's build script runs it: the stack's environment exported as the
    programming environment writes it (site/local.py), then build_argv."""
    exports = [f'export {k}={registry.shell_word(v)}' for k, v in stack.environment.items()]
    return '\n'.join([*exports, shlex.join(build_argv(reg, stack, out))])


def main():
    from testbed.checks import install_failure     # imports ReFrame: only when run
    try:
        reg = registry.load()
    except registry.RegistryError as err:
        print(f'error: {err}', file=sys.stderr)
        return 2
    for stack in reg.stacks.values():
        if not runs_hpl(stack):
            continue
        reason = install_failure(reg, stack) or install_failure(reg, stack, 'hpl-source')
        if reason:
            print(f'[hpl] {stack.name}: skipped ({reason})', flush=True)
            continue
        t0 = time.monotonic()
        with tempfile.TemporaryDirectory(prefix='hpl-prebuild-') as out:
            proc = subprocess.run(['bash', '-c', build_script(reg, stack, out)],
                                  capture_output=True, text=True)
        took = time.monotonic() - t0
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ['no message'])[-1]
            print(f'[hpl] {stack.name}: failed in {took:.0f} s ({last}); HplBuild tries again',
                  flush=True)
        elif '"cached":true' in proc.stdout:
            print(f'[hpl] {stack.name}: already in the cache', flush=True)
        else:
            print(f'[hpl] {stack.name}: built in {took:.0f} s', flush=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
