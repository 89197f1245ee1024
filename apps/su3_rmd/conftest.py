"""One build of su3_rmd with MPICH's compiler wrapper, in a temporary copy of apps/, for the
tests of this folder; `launcher` is the matching mpiexec."""
import shutil
import subprocess
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
CC = shutil.which('mpicc.mpich') or shutil.which('mpicc')


@pytest.fixture(scope='session')
def su3(tmp_path_factory):
    if not CC:
        pytest.skip('no MPI compiler wrapper (mpicc.mpich or mpicc)')
    apps = tmp_path_factory.mktemp('apps')
    for d in ('su3_rmd', 'common'):       # a copy: the checkout gets no build products
        shutil.copytree(HERE.parent / d, apps / d)
    subprocess.run(['make', '-s', '-C', str(apps / 'su3_rmd'), f'CC={CC}'], check=True,
                   capture_output=True)
    return apps / 'su3_rmd' / 'su3_rmd'


@pytest.fixture(scope='session')
def launcher():
    exe = shutil.which('mpiexec.mpich' if CC and CC.endswith('.mpich') else 'mpiexec')
    if not exe:
        pytest.skip('no mpiexec that matches the compiler wrapper')
    return exe
