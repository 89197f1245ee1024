"""testbed.hpl_prebuild: HPL built ahead with HplBuild's own command, for HplRun's stacks."""
import os
import subprocess

from testbed import hpl_prebuild, registry


def test_the_stacks_built_ahead_are_those_hplrun_runs():
    # HplRun's valid_prog_environs is '+mpi -no-hpl': no PVM, no stack that opts out
    reg = registry.load()
    ahead = {s.name for s in reg.stacks.values() if hpl_prebuild.runs_hpl(s)}
    assert {'mpich-4.0', 'openmpi-4.1', 'lam-7.1'} <= ahead
    assert not {'pvm-3.4', 'mpich-4.0-ch3sock', 'lam-7.1-src'} & ahead


def test_the_build_carries_the_stacks_extra_sources_and_environment():
    reg = registry.load()
    lam = hpl_prebuild.build_argv(reg, reg.stacks['lam-7.1'], '/tmp/out')
    assert lam[lam.index('--extra-src') + 1].endswith('apps/common/lam_iovec_fix.c')
    assert lam[lam.index('--out') + 1] == '/tmp/out'
    # Intel MPI's wrapper finds its headers through I_MPI_ROOT, which the programming
    # environment exports: without it every HPL file failed on mpi.h
    script = hpl_prebuild.build_script(reg, reg.stacks['intel-mpi-2021'], '/tmp/out')
    assert script.splitlines()[0].startswith('export I_MPI_ROOT=')


def test_a_bad_registry_is_one_line_and_status_2(tmp_path):
    bad = tmp_path / 'stacks.toml'
    bad.write_text('[stacks\n')
    proc = subprocess.run(['python3', '-m', 'testbed.hpl_prebuild'], capture_output=True,
                          text=True, cwd=registry.REPO / 'reframe', timeout=60,
                          env={**os.environ, 'TESTBED_REGISTRY': str(bad)})
    assert proc.returncode == 2
    assert proc.stderr.count('\n') == 1 and 'not valid TOML' in proc.stderr
