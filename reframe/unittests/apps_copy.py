"""A copy of apps/ under /var/tmp with programs built in it, for the unit tests that launch them
as the job account: pytest's tmp_path is private to root, and the checkout gets no build
products. Each test file's module fixture holds one copy, removed when the module ends."""
import contextlib
import shutil
import subprocess
import tempfile
from pathlib import Path

from testbed import registry


@contextlib.contextmanager
def apps_copy(prefix, make=(), shims=None, writable=False):
    """Yield the copy's folder (apps/ inside it). make: (app, make's words...) per program,
    '{dir}' in a word standing for the folder; shims: {name: C source}, each compiled to
    <folder>/<name>.so for LD_PRELOAD. The folder is left readable by every account (and
    writable, for a job account that writes beside its program, with `writable`)."""
    path = Path(tempfile.mkdtemp(prefix=f'testbed-{prefix}-', dir='/var/tmp'))
    try:
        shutil.copytree(registry.REPO / 'apps', path / 'apps')
        for name, source in (shims or {}).items():
            (path / f'{name}.c').write_text(source)
            run(['cc', '-shared', '-fPIC', '-O2', '-o', str(path / f'{name}.so'),
                 str(path / f'{name}.c')])
        for app, *words in make:
            build(path, app, *(w.format(dir=path) for w in words))
        open_to_job(path, writable)
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def build(path, app, *words):
    """make -s in <path>/apps/<app> with `words` (CC=..., a target). A test that builds in a
    copy already handed out calls open_to_job after it, so the job account can run the program."""
    run(['make', '-s', '-C', str(path / 'apps' / app), *words])


def open_to_job(path, writable=False):
    run(['chmod', '-R', 'a+rwX' if writable else 'a+rX', str(path)])


def run(cmd):
    subprocess.run(cmd, check=True, capture_output=True)
