"""xhpl's HPL-PANELS record, the figures behind HplRun.panel_over_memcpy, panel_over_xcopy,
panel_over_pipe, panel_over_cma, panel_replay_over_cma and panel_posted_over_cma: on two ranks
one timed MPI_Recv per panel of the factorisation (the other rank receives each one), three
copies of each between the cores (xcopy and pipe through a shared buffer that leaves no name
behind, cma out of the partner's own buffer) and each size sent again through MPI after the
run, taken as HPL takes it and into a posted receive; none on one rank.
Asserts no speed. Builds xhpl with MPICH's wrapper through build.sh (its cache keeps the build)
from the hpcc source the set-up fetched (/opt/mpi-testbed/src/hpcc).
Run: python3 -m pytest -q apps/hpl/test_panel_time.py."""
import json
import os
import shutil
import subprocess

import pytest

from testbed import hpl_input

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = '/opt/mpi-testbed/src/hpcc'
CC = shutil.which('mpicc.mpich')

N, NB = 600, 50


@pytest.fixture(scope='module')
def xhpl(tmp_path_factory):
    if not CC or not os.path.isdir(SRC):
        pytest.skip(f'needs mpicc.mpich and the hpcc source in {SRC} (the set-up gives both)')
    out = tmp_path_factory.mktemp('xhpl')
    done = subprocess.run(['bash', os.path.join(HERE, 'build.sh'), '--cc', CC, '--out', str(out),
                           '--src-dir', SRC], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return out / 'xhpl'


def panels(xhpl, tmp_path, p, q):
    hpl_input.write_hpl_dat(str(tmp_path / 'HPL.dat'), [N], [NB], p, q)
    out = subprocess.run(['mpiexec.mpich', '-n', str(p * q), str(xhpl)], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, OPENBLAS_NUM_THREADS='1'))
    assert out.returncode == 0, out.stderr
    assert hpl_input.parse_hpl_output(out.stdout).ok, out.stdout
    recs = [json.loads(ln.split(' ', 1)[1]) for ln in out.stdout.splitlines()
            if ln.startswith('HPL-PANELS {')]
    assert len(recs) == 1, out.stdout
    return recs[0]


def test_two_ranks_time_one_receive_per_panel(xhpl, tmp_path):
    rec = panels(xhpl, tmp_path, 1, 2)
    # N / NB panels, each broadcast from its owner to the one other rank of the row
    assert rec['messages'] == N // NB and rec['kept_all'] is True
    # the largest panel: all N rows of NB columns (8-byte doubles) and its pivot data
    assert N * NB * 8 <= rec['bytes_max'] < 2 * N * NB * 8
    assert 0 < rec['bytes_min'] <= rec['bytes_max']
    assert 0 < rec['recv_over_memcpy_lq'] <= rec['recv_over_memcpy_median']
    # both ranks share this host: every panel has its copy between the two cores
    assert rec['xcopy_messages'] == rec['paired_messages'] == rec['messages']
    assert 0 < rec['recv_over_xcopy_lq'] <= rec['recv_over_xcopy_median']
    assert rec['xcopy_mb_s_median'] > 0
    assert 0 < rec['recv_over_pipe_lq'] <= rec['recv_over_pipe_median']
    assert rec['pipe_mb_s_median'] > 0
    # and the kernel copy out of the partner's own buffer (this kernel allows process_vm_readv)
    assert 0 < rec['recv_over_cma_lq'] <= rec['recv_over_cma_median']
    assert rec['cma_mb_s_median'] > 0
    # and each panel's size sent again through MPI after the run, over that kernel copy
    assert 0 < rec['replay_over_cma_lq'] <= rec['replay_over_cma_median']
    assert rec['replay_mb_s_median'] > 0
    # and into a receive posted before the message comes, as IMB and NetPIPE take theirs
    assert 0 < rec['posted_over_cma_lq'] <= rec['posted_over_cma_median']
    assert rec['posted_mb_s_median'] > 0


def test_xcopy_leaves_no_shared_buffer(xhpl, tmp_path):
    before = set(os.listdir('/dev/shm'))
    panels(xhpl, tmp_path, 1, 2)
    assert not [n for n in set(os.listdir('/dev/shm')) - before if n.startswith('tb-panels-')]


def test_an_odd_count_leaves_the_last_rank_unpaired(xhpl, tmp_path):
    # 1x3: ranks 0 and 1 are a pair, rank 2 has no partner; each rank receives the panels
    # that the other two own, and only the pair's are copied between cores
    rec = panels(xhpl, tmp_path, 1, 3)
    assert rec['kept_all'] is True and rec['messages'] == 2 * (N // NB)
    assert 0 < rec['paired_messages'] < rec['messages']
    assert rec['xcopy_messages'] == rec['paired_messages']
    assert 0 < rec['recv_over_cma_lq']          # the pair's panels, as xcopy's
    assert 0 < rec['replay_over_cma_lq'] and 0 < rec['posted_over_cma_lq']


def test_one_rank_has_no_panel_to_receive(xhpl, tmp_path):
    rec = panels(xhpl, tmp_path, 1, 1)
    assert rec == {'messages': 0, 'kept_all': True}
