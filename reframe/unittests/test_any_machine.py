"""The test command on a machine the rows do not know (issue 44): a machine type with no rows
and no rows of its own reports its figures and passes, saying so in one line; a type with rows
fails a figure whose row is missing (a site's own rows: test_references.py). The type is
overridden with TESTBED_TEST_MACHINE_TYPE, which only tests use."""
import os
import subprocess
import sys

from testbed import failures, registry
from test_suite_runs import reframe, workdir  # noqa: F401 (a fixture)

REPO = registry.REPO
#: HPL's 1x2 grid at an N whose efficiency has no row for any type: a row missed on purpose
HPL = ['-n', 'HplRun.*%grid=1x2', '-p', '^mpich-4_0$', '-S', 'HplRun.n_list=1800']
NEW_TYPE = 'x86_64-intel-2cpu-bare'     # as if this VM were bare metal: no shipped row
KNOWN_TYPE = 'x86_64-amd-2cpu-vm'       # a type whose HPL rows are shipped


def quick_pass_env(machine_type, **extra):
    """ci/suite.sh quick's rule: a missing row of a type that has rows fails the test."""
    return {'TESTBED_TEST_MACHINE_TYPE': machine_type, 'TESTBED_REQUIRE_REFERENCES': '1',
            'TESTBED_MEASURE_ONLY': '0', **extra}


def status(machine_type):
    out = subprocess.run([sys.executable, '-m', 'testbed.references', 'status'],
                         cwd=REPO / 'reframe', capture_output=True, text=True, timeout=60,
                         env=dict(os.environ, TESTBED_TEST_MACHINE_TYPE=machine_type))
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


def test_a_type_without_rows_reports_every_figure_and_passes(workdir):
    assert status(NEW_TYPE)[-1].startswith(
        f'notice: no reference rows for machine type {NEW_TYPE}')
    proc, cases = reframe(workdir, '-r', *HPL, env=quick_pass_env(NEW_TYPE))
    tc = cases[('HplRun', 'mpich-4_0')]
    assert proc.returncode == 0 and tc['result'] == 'pass', proc.stdout[-3000:]
    assert tc['machine_type'] == NEW_TYPE
    counts = failures.reference_counts({'runs': [{'testcases': [tc]}]})
    assert counts['HplRun'][0] == 0 and counts['HplRun'][1] >= 3       # reported, none judged
    assert 'reported without one' in failures.unreferenced_line(counts)


def test_a_type_with_rows_fails_a_figure_whose_row_is_missing(workdir):
    assert status(KNOWN_TYPE)[-1].startswith('notice: ')
    proc, cases = reframe(workdir, '-r', *HPL, env=quick_pass_env(KNOWN_TYPE))
    tc = cases[('HplRun', 'mpich-4_0')]
    assert proc.returncode != 0 and tc['result'] == 'fail' and tc['fail_phase'] == 'setup'
    assert f'machine type {KNOWN_TYPE} mpich-4.0 HplRun 1x2 variable efficiency_N1800' in \
        tc['fail_reason'] and 'make references' in tc['fail_reason']
