"""Origin source: a build from an orig tarball with the registry's flags, cached by its inputs,
and a failed build that marks only its own stack failed, naming the log. A fake tarball stands
in for Debian's (its configure records the flags); fetching is stubbed out."""
import json
import shutil
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


# Each configure says it started, then waits (up to 4 s) for the other build's configure:
# one after the other, the first would time out and fail.
RENDEZVOUS = '''#!/bin/sh
prefix=${1#--prefix=}; shift
me=$1 other=$2 events=$3
echo "configure $me" >> "$events"
touch "$events.$me"
i=0
while [ ! -e "$events.$other" ]; do
    i=$((i + 1)); [ $i -gt 40 ] && { echo "configure: $other never started" >&2; exit 1; }
    sleep 0.1
done
printf 'all:\\n\\ttrue\\ninstall:\\n\\tmkdir -p %s/bin && touch %s/bin/mpicc && chmod +x %s/bin/mpicc\\n' \\
    "$prefix" "$prefix" "$prefix" > Makefile
'''


def test_two_source_builds_run_side_by_side_after_every_apt_step(tmp_path, monkeypatch):
    monkeypatch.delenv('TESTBED_PREFIX', raising=False)
    stub = tmp_path / 'fetch.sh'
    stub.write_text('exit 0\n')
    monkeypatch.setattr(origins, 'FETCH', stub)
    events = tmp_path / 'events'
    stacks = ''
    for name, other in (('one', 'two'), ('two', 'one')):
        top = tmp_path / f'{name}-1.0'
        top.mkdir()
        (top / 'configure').write_text(RENDEZVOUS)
        (top / 'configure').chmod(0o755)
        (tmp_path / 'src' / name).mkdir(parents=True)
        with tarfile.open(tmp_path / 'src' / name / f'{name}_1.0.orig.tar.gz', 'w:gz') as tar:
            tar.add(top, arcname=f'{name}-1.0')
        stacks += f'''[stacks."{name}-1"]
family = "mpich"
origin = "source"
source = "{name}"
packages = ["{name}-deps"]
configure = ["{name}", "{other}", "{events}"]
cc = "{{prefix}}/bin/mpicc"
launcher = ["{{prefix}}/bin/mpiexec", "-n", "{{ntasks}}"]
features = ["mpi"]
'''
    # a Debian stack after them in the registry: its apt step comes before either build
    stacks += '''[stacks."deb-1"]
family = "mpich"
origin = "debian"
packages = ["deb-pkg"]
cc = "cc"
launcher = ["mpiexec", "-n", "{ntasks}"]
features = ["mpi"]
'''
    (tmp_path / 'stacks.toml').write_text(f'[defaults]\nprefix_root = "{tmp_path}/stacks"\n'
                                          + stacks)
    reg = registry.load(tmp_path / 'stacks.toml')

    def apt(pkgs, logfile, updated):
        with open(events, 'a') as fh:
            fh.write(f'apt {" ".join(pkgs)}\n')
        return True, ''
    monkeypatch.setattr(install, 'apt_install', apt)
    monkeypatch.setattr(origins, 'hello', lambda stack, run_as, logfile: '')
    results = install.install_stacks(list(reg.stacks.values()), reg, tmp_path, [True])
    assert {n: r[:2] for n, r in results.items()} == \
        {'one-1': (True, ''), 'two-1': (True, ''), 'deb-1': (True, '')}, results
    lines = events.read_text().splitlines()
    assert lines[:3] == ['apt one-deps', 'apt two-deps', 'apt deb-pkg'], lines
    assert sorted(lines[3:]) == ['configure one', 'configure two'], lines
    # one at a time, the first configure waits for a second that never starts, and fails
    for f in tmp_path.glob('events.*'):
        f.unlink()
    shutil.rmtree(tmp_path / 'stacks')
    results = install.install_stacks(list(reg.stacks.values()), reg, tmp_path, [True],
                                     builds_at_once=1)
    assert not results['one-1'][0] and 'two never started' in results['one-1'][1]


def test_builds_later_fetches_now_and_builds_in_the_second_call(home, monkeypatch):
    """ci/test.sh: `--builds later` before pytest, `--builds only` beside it."""
    reg = registry_with(home, ['--with-device=ch3:sock'])
    stack = reg.stacks['fake-1']
    monkeypatch.setattr(install, 'apt_install', lambda pkgs, logfile, updated: (True, ''))
    monkeypatch.setattr(install.shutil, 'which', lambda name: name)   # the fake has no mpicc
    monkeypatch.setattr(origins, 'hello', lambda stack, run_as, logfile: '')
    assert install.install_stacks([stack], reg, home, [True], build=False) == {}
    assert not (Path(stack.prefix) / origins.STAMP).exists()
    assert {n: r[:2] for n, r in install.install_stacks([stack], reg, home, [True]).items()} \
        == {'fake-1': (True, '')}
    assert (Path(stack.prefix) / 'flags').read_text() == '--with-device=ch3:sock\n'
