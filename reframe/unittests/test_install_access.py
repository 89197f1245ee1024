"""The set-up opens a clone in a closed folder (root's home is 0700) to the job account, by an
ACL entry that lets that account alone pass through, and names a clone it cannot read."""
import os
import shutil
import subprocess

import pytest

from testbed import install, registry

ACCOUNT = registry.load().run_as


def as_account(*argv):
    return subprocess.run(['setpriv', f'--reuid={ACCOUNT}', f'--regid={ACCOUNT}',
                           '--init-groups', *argv], capture_output=True, text=True)


@pytest.fixture
def closed(tmp_path):
    if os.geteuid() != 0 or not shutil.which('setfacl'):
        pytest.skip('needs root and setfacl (the set-up installs acl)')
    home = tmp_path / 'home'                  # like /root: closed to others
    clone = home / 'mpi-testbed'
    (clone / 'site').mkdir(parents=True)
    (clone / 'site' / 'stacks.toml').write_text('# registry\n')
    for folder in (tmp_path, clone, clone / 'site'):
        folder.chmod(0o755)
    home.chmod(0o700)
    return home, clone


def test_a_closed_folder_above_the_clone_lets_the_account_through(closed, tmp_path, capsys):
    home, clone = closed
    assert as_account('test', '-r', str(clone / 'site' / 'stacks.toml')).returncode != 0
    ok, why = install.ensure_account_reaches(clone, ACCOUNT, tmp_path / 'log')
    assert ok, why
    assert f'{home}: the job account {ACCOUNT} may now pass through' in capsys.readouterr().out
    # the next set-up finds the clone open: it changes and says nothing
    assert install.ensure_account_reaches(clone, ACCOUNT, tmp_path / 'log') == (True, '')
    assert capsys.readouterr().out == ''
    assert as_account('test', '-r', str(clone / 'site' / 'stacks.toml')).returncode == 0
    assert as_account('ls', str(home)).returncode != 0          # pass through, not list
    assert f'user:{ACCOUNT}:--x' in subprocess.run(['getfacl', '-p', str(home)],
                                                   capture_output=True, text=True).stdout


def test_a_clone_the_account_cannot_read_is_named(closed, tmp_path):
    home, clone = closed
    (clone / 'site' / 'stacks.toml').chmod(0o600)
    ok, why = install.ensure_account_reaches(clone, ACCOUNT, tmp_path / 'log')
    assert not ok and str(clone) in why and ACCOUNT in why
