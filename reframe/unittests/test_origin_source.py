"""Origin source: a build from an orig tarball with the registry's flags, cached by its inputs,
and a failed build that marks only its own stack failed, naming the log. A fake tarball stands
in for Debian's (its configure records the flags); fetching is stubbed out."""
import json
import tarfile
from pathlib import Path

import pytest

from testbed import install, origins, registry

CONFIGURE = '''#!/bin/sh
prefix=${1#--prefix=}; shift
[ "$1" = --fail ] && { echo "configure: error: asked to fail" >&2; exit 1; }
echo "$@" > flags
printf 'all:\\n\\ttrue\\ninstall:\\n\\tmkdir -p %s && cp flags %s/flags\\n' \\
    "$prefix" "$prefix" > Makefile
'''


def registry_with(tmp_path, flags):
    path = tmp_path / 'stacks.toml'
    path.write_text(f'''[defaults]
prefix_root = "{tmp_path}/stacks"
[stacks."fake-1"]
family = "mpich"
version = "1.0"
origin = "source"
source = "fake"
configure = {json.dumps(flags)}
cc = "{{prefix}}/bin/mpicc"
launcher = ["{{prefix}}/bin/mpiexec", "-n", "{{ntasks}}"]
features = ["mpi"]
''')
    return registry.load(path)


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.delenv('TESTBED_PREFIX', raising=False)
    stub = tmp_path / 'fetch.sh'
    stub.write_text('exit 0\n')          # the tarball is already "verified" in src/fake
    monkeypatch.setattr(origins, 'FETCH', stub)
    top = tmp_path / 'fake-1.0'
    top.mkdir()
    (top / 'configure').write_text(CONFIGURE)
    (top / 'configure').chmod(0o755)
    (tmp_path / 'src' / 'fake').mkdir(parents=True)
    with tarfile.open(tmp_path / 'src' / 'fake' / 'fake_1.0.orig.tar.gz', 'w:gz') as tar:
        tar.add(top, arcname='fake-1.0')
    return tmp_path


def test_build_uses_the_flags_and_a_second_run_builds_nothing(home):
    stack = registry_with(home, ['--with-device=ch3:sock', '--with-rsh=ssh -x']).stacks['fake-1']
    log = home / 'build.log'
    assert origins.build_source(stack, home, log) == (True, '', False)
    prefix = Path(stack.prefix)
    assert (prefix / 'flags').read_text() == '--with-device=ch3:sock --with-rsh=ssh -x\n'
    stamp = json.loads((prefix / origins.STAMP).read_text())
    assert stamp['configure'] == list(stack.configure)
    assert stamp['tarball'] == 'fake_1.0.orig.tar.gz'
    assert origins.build_source(stack, home, log) == (True, '', True)      # cached
    # another flag is another build
    other = registry_with(home, ['--with-device=ch4:ucx']).stacks['fake-1']
    assert origins.build_source(other, home, log) == (True, '', False)
    assert (prefix / 'flags').read_text() == '--with-device=ch4:ucx\n'


def test_a_failed_build_marks_its_stack_failed_with_the_log(home):
    reg = registry_with(home, ['--fail'])
    ok, why, _ = install.install_stack(reg.stacks['fake-1'], reg, home, [True])
    assert not ok and 'configure: error: asked to fail' in why and 'exited 1' in why
    status = json.loads((home / 'status' / 'fake-1.json').read_text())
    assert status['ok'] is False and status['log'] == str(home / 'logs' / 'fake-1.log')
    assert (home / 'build' / 'fake-1').is_dir()          # the tree is kept for a look


def test_a_tarball_of_another_version_is_refused(home):
    reg = registry_with(home, [])
    stack = reg.stacks['fake-1']
    stack = type(stack)(**{**stack.__dict__, 'version': '2.0'})
    ok, why, _ = origins.build_source(stack, home, home / 'log')
    assert not ok and 'is not version 2.0' in why
