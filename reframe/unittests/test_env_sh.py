"""site/env.sh and the Makefile's recipes under dash (Debian's /bin/sh, make's shell) as under
bash: they once failed with 'Bad substitution' (bash-only ${BASH_SOURCE[0]})."""
import os
import re
import shutil
import subprocess

import pytest

from testbed import registry

REPO = registry.REPO
DASH = shutil.which('dash')
pytestmark = pytest.mark.skipif(not DASH, reason='dash is not installed')

SHOW = 'echo "$RFM_CONFIG_FILES"; command -v reframe'


def sourced(shell, script, cwd):
    env = {k: v for k, v in os.environ.items()
           if k not in ('PYTHONPATH', 'RFM_CONFIG_FILES', 'TESTBED_REPO')}
    return subprocess.run([shell, '-c', script], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=30)


@pytest.mark.parametrize('shell, script, cwd', [
    ('dash', f'. ./site/env.sh; {SHOW}', REPO),                           # by hand, at the root
    ('dash', f'TESTBED_REPO={REPO} . {REPO}/site/env.sh; {SHOW}', '/'),   # as the Makefile does
    ('bash', f'. {REPO}/site/env.sh; {SHOW}', '/'),                       # bash: BASH_SOURCE
])
def test_env_sh_finds_the_repository(shell, script, cwd):
    proc = sourced(shell, script, cwd)
    assert proc.returncode == 0 and 'Bad substitution' not in proc.stderr, proc.stderr
    first, *rest = proc.stdout.splitlines()
    assert first == f'{REPO}/site/local.py'
    assert 'serves the testbed package' not in proc.stderr, proc.stderr   # the set-up's clone
    assert rest and rest[0].endswith('/reframe/bin/reframe')


def test_env_sh_under_dash_elsewhere_says_what_to_do():
    proc = sourced('dash', f'. {REPO}/site/env.sh; {SHOW}', '/')
    assert 'set TESTBED_REPO' in proc.stderr
    assert proc.stdout.startswith('\n')     # nothing half-set


def test_env_sh_says_when_the_venv_serves_another_clone(tmp_path):
    """The venv is shared by the clones of a host: a clone whose package is not the one
    installed is told to run the set-up (else it would run another clone's code)."""
    fake = tmp_path / 'reframe' / 'bin' / 'python'
    fake.parent.mkdir(parents=True)
    fake.write_text('#!/bin/sh\necho /elsewhere/reframe/testbed/__init__.py\n')
    fake.chmod(0o755)
    proc = sourced('dash', f'TESTBED_HOME={tmp_path} TESTBED_REPO={REPO} . {REPO}/site/env.sh',
                   '/')
    assert 'serves the testbed package from /elsewhere/reframe/testbed/__init__.py, not this ' \
        'clone: run make setup here' in proc.stderr, proc.stderr


def test_make_list_under_dash():
    proc = subprocess.run(['make', '-C', str(REPO), 'list', f'SHELL={DASH}'],
                          capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-2000:]
    found = re.search(r'Found (\d+) check\(s\)', out)
    assert found and int(found.group(1)) > 0, out[-2000:]
    assert '- P2PStack' in out and '^P2PMatrix' in out and '- Su3Run' in out
