"""Origin prefix: an MPI a site installed under a path joins the testbed by one registry entry.

The site's installation is faked by a symlink tree over Debian's MPICH (bin/mpicc and
bin/mpiexec), in a registry file of the test's own (TESTBED_REGISTRY), never in the shipped one.
The installer checks it (wrapper and launcher exist, a 2-rank hello runs) and records ok or the
reason; ReFrame then runs a test on it with nothing else added."""
import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from testbed import install, registry
from test_suite_runs import QUICK, reframe

MPICC, MPIEXEC = shutil.which('mpicc.mpich'), shutil.which('mpiexec.mpich')
pytestmark = pytest.mark.skipif(not (MPICC and MPIEXEC),
                                reason="Debian's MPICH is not installed (make setup)")

ENTRY = '''
[defaults]
prefix_root = "{home}/stacks"

[stacks."site-mpich"]
family = "mpich"
origin = "prefix"
prefix = "{site}"
cc = "{{prefix}}/bin/mpicc"
launcher = ["{{prefix}}/bin/mpiexec", "-n", "{{ntasks}}"]
launcher_options = ["-bind-to", "core"]
features = ["mpi", "no-hpl"]
'''


@pytest.fixture
def site(monkeypatch):
    """A world-readable home (status, logs) and a fake site prefix; the registry naming it."""
    monkeypatch.delenv('TESTBED_PREFIX', raising=False)
    # Under /var/tmp: the job account runs the hello and must reach the prefix.
    root = Path(tempfile.mkdtemp(prefix='testbed-prefix-', dir='/var/tmp'))
    os.chmod(root, 0o755)
    prefix = root / 'opt' / 'site-mpich'
    (prefix / 'bin').mkdir(parents=True)
    (prefix / 'bin' / 'mpicc').symlink_to(MPICC)
    (prefix / 'bin' / 'mpiexec').symlink_to(MPIEXEC)
    # Hydra's mpiexec starts the proxy found beside itself, as in a real prefix's bin/
    (prefix / 'bin' / 'hydra_pmi_proxy').symlink_to(shutil.which('hydra_pmi_proxy'))
    path = root / 'stacks.toml'
    path.write_text(ENTRY.format(home=root, site=prefix))
    yield root, prefix, path
    shutil.rmtree(root, ignore_errors=True)


def install_it(path):
    reg = registry.load(path)
    stack = reg.stacks['site-mpich']
    home = Path(reg.prefix_root).parent
    ok, why, _ = install.install_stack(stack, reg, home, [True])
    status = json.loads((home / 'status' / 'site-mpich.json').read_text())
    assert status['ok'] == ok and status['reason'] == why
    assert Path(status['log']).is_file()
    return ok, why


def test_a_good_prefix_is_checked_and_runs_p2p(site):
    root, prefix, path = site
    ok, why = install_it(path)
    assert ok, why
    assert 'hello 1 of 2' in (root / 'logs' / 'site-mpich.log').read_text()
    # the entry alone puts the stack into ReFrame: P2PMatrix runs, HplRun is opted out
    proc, cases = reframe(root, '-lC', env={'TESTBED_REGISTRY': str(path)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    listed = [ln for ln in proc.stdout.splitlines()
              if ln.endswith('@testbed-local:default+site-mpich')]
    assert any('P2PMatrix' in ln for ln in listed)
    assert not any('HplRun' in ln for ln in listed)
    proc, cases = reframe(root, '-r', *QUICK, env={'TESTBED_REGISTRY': str(path)})
    tc = cases[('P2PMatrix', 'site-mpich')]
    assert tc['result'] == 'pass', proc.stdout[-2000:]
    assert tc['stack_origin'] == 'prefix'


def test_a_missing_prefix_fails_with_the_reason(site):
    root, prefix, path = site
    shutil.rmtree(prefix)
    ok, why = install_it(path)
    assert not ok
    assert why == f'prefix {prefix} does not exist (origin prefix: a site installs it there)'


def test_a_prefix_without_launcher_fails_naming_it(site):
    root, prefix, path = site
    (prefix / 'bin' / 'mpiexec').unlink()
    ok, why = install_it(path)
    assert not ok and why == f'launcher {prefix}/bin/mpiexec not found (prefix {prefix})'


def test_a_prefix_whose_launcher_fails_is_marked_failed(site):
    root, prefix, path = site
    launcher = prefix / 'bin' / 'mpiexec'
    launcher.unlink()
    launcher.write_text('#!/bin/sh\necho "no MPI here" >&2\nexit 3\n')
    launcher.chmod(0o755)
    ok, why = install_it(path)
    assert not ok and why.startswith('2-rank hello failed: ') and 'exited 3' in why
