"""Origins the installer handles beyond apt and pip: `source` (a build from Debian's orig tarball
with the registry's configure flags) and `prefix` (a site's installation, only checked). Both
end with the same proof that the stack works: a two-rank hello, run as the job account.

A source build is cached by its inputs: the tarball's SHA256, the configure flags, the project's
patches and the build script (_build below). The key is written into the prefix after a good
install; a second run with the same key builds nothing.
"""
import hashlib
import inspect
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from testbed import registry

FETCH = registry.REPO / 'apps' / 'hpl' / 'fetch-source.sh'
STAMP = '.testbed-build.json'     # in the prefix: what was built, from what, with which key
HELLO = r'''#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    printf("hello %d of %d\n", rank, size);
    MPI_Finalize();
    return 0;
}
'''


def _run(cmd, logfile, cwd=None, env=None, timeout=None):
    """Run `cmd` with its output appended to `logfile`; '' when it succeeded, else why not."""
    with open(logfile, 'a') as fh:
        fh.write(f'$ {" ".join(map(str, cmd))}\n')
        fh.flush()
        try:
            proc = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, cwd=cwd, env=env,
                                  stdin=subprocess.DEVNULL, timeout=timeout)
        except subprocess.TimeoutExpired:
            return f'`{" ".join(map(str, cmd))}` did not end within {timeout} s'
    if proc.returncode == 0:
        return ''
    tail = Path(logfile).read_text(errors='replace').strip().splitlines()[-2:]
    return f'`{" ".join(map(str, cmd))}` exited {proc.returncode}: ' + ' / '.join(tail)


def _sha256(path):
    digest = hashlib.sha256()
    with open(path, 'rb') as fh:
        for block in iter(lambda: fh.read(1 << 20), b''):
            digest.update(block)
    return digest.hexdigest()


def _build(stack, tree, prefix, logfile):
    """The build script: patch, configure, make, install. Its own text is part of the cache
    key, so a change here rebuilds every source stack; nothing else in this file does."""
    why = ''
    for patch in stack.patches:
        why = why or _run(['patch', '-p1', '-i', str(registry.REPO / patch)], logfile, cwd=tree)
    why = why or _run(['./configure', f'--prefix={prefix}', *stack.configure], logfile,
                      cwd=tree)
    why = why or _run(['make', f'-j{os.cpu_count() or 1}'], logfile, cwd=tree)
    if not why:
        shutil.rmtree(prefix, ignore_errors=True)     # no file of an older build stays
        why = _run(['make', 'install'], logfile, cwd=tree)
    return why


def build_key(stack, tarball_sha):
    """The cache key of a source build: what goes in decides what comes out."""
    parts = [tarball_sha, json.dumps(list(stack.configure)), inspect.getsource(_build),
             *[_sha256(registry.REPO / p) for p in stack.patches]]
    return hashlib.sha256('\n'.join(parts).encode()).hexdigest()[:20]


def build_source(stack, home, logfile):
    """Build and install `stack` (origin source) into its prefix unless the same inputs
    already did. Returns (ok, why, cached)."""
    why, tarball = fetch_source(stack, home, logfile)
    if why:
        return False, why, False
    return build_fetched(stack, home, tarball, logfile)


def fetch_source(stack, home, logfile):
    """The verified orig tarball of `stack`: ('', path), or (why not, None). It may run apt
    (a deb-src entry, apt-get update), so the installer calls it for one stack at a time."""
    src = Path(home) / 'src' / stack.source
    why = _run(['bash', str(FETCH), str(src), '--setup-apt', '--package', stack.source],
               logfile)
    if why:
        return f'source {stack.source}: {why}', None
    tarballs = sorted(src.glob(f'{stack.source}_*.orig.tar.*'))
    if len(tarballs) != 1:
        return f'expected one orig tarball in {src}, found {len(tarballs)}', None
    if stack.version and not tarballs[0].name.startswith(f'{stack.source}_{stack.version}.'):
        return (f'{tarballs[0].name} is not version {stack.version} (the registry\'s '
                f'stacks.{stack.name}.version): Debian\'s {stack.source} moved on'), None
    return '', tarballs[0]


def build_fetched(stack, home, tarball, logfile):
    """Build `tarball` (from fetch_source) into the stack's prefix unless the same inputs
    already did; touches only the stack's own build tree, prefix and log, so that two stacks
    can build at once. Returns (ok, why, cached)."""
    sha = _sha256(tarball)      # read once: the key, and the record after the build
    key = build_key(stack, sha)
    prefix = Path(stack.prefix)
    try:
        if json.loads((prefix / STAMP).read_text()).get('key') == key:
            return True, '', True
    except (OSError, ValueError):
        pass
    work = Path(home) / 'build' / stack.name
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    t0 = time.monotonic()
    why = _run(['tar', '-xf', str(tarball), '-C', str(work)], logfile)
    tops = [d for d in work.iterdir() if d.is_dir()]
    if not why and len(tops) != 1:
        why = f'{tarball.name} unpacked into {len(tops)} folders, expected one'
    why = why or _build(stack, tops[0], prefix, logfile)
    if why:
        return False, f'build of {tarball.name} failed (tree kept in {work}): {why}', False
    seconds = time.monotonic() - t0
    (prefix / STAMP).write_text(json.dumps({
        'stack': stack.name, 'key': key, 'tarball': tarball.name,
        'sha256': sha, 'configure': list(stack.configure),
        'patches': list(stack.patches), 'build_seconds': round(seconds, 1)}, indent=1) + '\n')
    shutil.rmtree(work, ignore_errors=True)
    return True, '', False


def check_prefix(stack):
    """Why the site's installation under the stack's prefix cannot be used, or ''."""
    if not os.path.isdir(stack.prefix):
        return f'prefix {stack.prefix} does not exist (origin prefix: a site installs it there)'
    launcher = stack.launch_command(2)[0]
    for what, path in (('compiler wrapper', stack.compiler), ('launcher', launcher)):
        if not shutil.which(path):
            return f'{what} {path} not found (prefix {stack.prefix})'
    return ''


def as_account(run_as):
    """The prefix that runs a command as `run_as` (the job account) from root; [] for a user,
    who runs as themselves. The set-up's: it runs before ReFrame's venv exists, so it cannot use
    testbed.launch.drop_privileges."""
    return ['setpriv', f'--reuid={run_as}', f'--regid={run_as}', '--init-groups'] \
        if os.geteuid() == 0 else []


def hello(stack, run_as, logfile):
    """Compile a hello with the stack's wrapper and run it on 2 ranks as `run_as` (the job
    account: LAM refuses root), with the stack's daemons if it has any. '' when both ranks
    said hello, else why not."""
    # {job} (the job script's $$ in a test) is this process's id here
    # with the knobs' defaults, which travel in the environment as in every test's job
    env = dict(os.environ, **{k: v.replace(registry.JOB_PID, str(os.getpid()))
                              for k, v in stack.environment.items()},
               **stack.knob_settings()[0])
    drop = as_account(run_as)
    with tempfile.TemporaryDirectory(prefix='testbed-hello-') as tmp:
        os.chmod(tmp, 0o755)
        src, exe = os.path.join(tmp, 'hello.c'), os.path.join(tmp, 'hello')
        Path(src).write_text(HELLO)
        extra = [str(registry.REPO / 'apps' / s) for s in stack.extra_sources]
        why = _run([stack.compiler, '-o', exe, src, *extra], logfile, env=env, timeout=120)
        if why:
            return f'hello did not compile: {why}'
        out = os.path.join(tmp, 'hello.out')
        try:
            if stack.boot:
                why = _run([*drop, *stack.boot], logfile, cwd=tmp, env=env, timeout=60)
            if not why:
                with open(out, 'w') as fh:
                    os.chmod(out, 0o666)
                why = _run([*drop, 'sh', '-c', '"$@" > hello.out 2>&1', 'hello',
                            *stack.launch_command(2), exe], logfile, cwd=tmp, env=env,
                           timeout=120)
        finally:
            if stack.boot:
                _run([*drop, *stack.halt], logfile, cwd=tmp, env=env, timeout=60)
        said = Path(out).read_text(errors='replace') if os.path.exists(out) else ''
        with open(logfile, 'a') as fh:
            fh.write(said)
    if why:
        return f'2-rank hello failed: {why}; it said: {said.strip()[-300:]!r}'
    if not all(f'hello {r} of 2' in said for r in (0, 1)):
        return f'2-rank hello ran but not every rank said hello: {said.strip()[-200:]!r}'
    return ''
