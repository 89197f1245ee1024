"""apps/p2p's modes over MPI one-sided (tr_rma.c's Put with passive-target flush): the flood, the
overlap ladder and the streams run with every payload checked, a corrupted payload is caught,
a sync the modes do not run is said in a record, and two-sided MPI's bidirectional window (whose
sends moved to slots of their own for it) still checks every message. Open MPI 4.1 (Debian's,
MPI-3 RMA) on two ranks, and MPICH 4.0 for the modes themselves (where flush hung while the
notification counters were in static data: docs/one-sided.md); the set-up must have run. Tiny
sizes: a few seconds a launch."""
import json
import subprocess

import pytest
from apps_copy import apps_copy

from testbed import registry
from testbed.launch import drop_privileges
from testbed.loggp import loggp_figures, loggp_sizes, rma_cannot_run

STACK = 'openmpi-4.1'
QUICK = ['--sizes', '8,4096', '--queue-depths', '1,4', '--window', '4', '--samples', '3',
         '--min-time-ms', '0.2', '--stack', STACK]
RMA = ['--transport', 'rma', '--rma-op', 'put', '--rma-sync', 'flush', '--baselines', 'none']


def p2p_of(stack):
    cc = registry.load().stacks[stack].compiler
    return apps_copy('rma-modes', [('p2p', f'CC={cc}')], writable=True)


@pytest.fixture(scope='module')
def p2p():
    with p2p_of(STACK) as path:
        yield path


@pytest.fixture(scope='module')
def p2p_mpich():
    with p2p_of('mpich-4.0') as path:
        yield path


def launch(p2p, *words, stack=STACK):
    reg = registry.load()
    cmd = drop_privileges(reg) + reg.stacks[stack].launch_command(2) + [
        str(p2p / 'apps' / 'p2p' / 'p2p'), *words]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180, cwd=p2p)


def recs(text, tag):
    return [json.loads(line.split(' ', 1)[1]) for line in text.splitlines()
            if line.startswith(tag + ' {')]


@pytest.mark.parametrize('stack', [STACK, 'mpich-4.0'])
def test_every_mode_runs_over_one_sided_with_every_payload_checked(stack, p2p, p2p_mpich,
                                                                   tmp_path):
    # the short LogGP variant's sizes: six from 1 KiB, as many as the fit of G needs
    sizes = ','.join(map(str, loggp_sizes(True)))
    proc = launch(p2p if stack == STACK else p2p_mpich, *RMA, '--mode', 'loggp,streams',
                  *QUICK, '--sizes', sizes, stack=stack)
    assert proc.returncode == 0, proc.stderr[-800:]
    assert not recs(proc.stdout, 'P2P-UNSUPPORTED') and not recs(proc.stdout, 'P2P-UNAVAILABLE')
    flood, over = recs(proc.stdout, 'P2P-FLOOD'), recs(proc.stdout, 'P2P-OVERLAP')
    streams = recs(proc.stdout, 'P2P-STREAM')
    assert len(flood) == 2 * 7 and len(over) == 22
    assert sorted({r['style'] for r in streams}) == ['bidir', 'stream', 'unidir']
    for r in flood + over + streams:
        assert (r['transport'], r['pair'], r['variant']) == ('rma', 'Put', 'flush')
        assert r['checked_messages'] >= r['samples'], r
    out = tmp_path / 'rma.out'
    out.write_text(proc.stdout)
    fig, _, _ = loggp_figures(str(out), 'rma', 4)
    assert fig['eel'][1] > 0 and fig['g_q1'][1] > 0


def test_a_corrupted_payload_over_one_sided_is_caught(p2p):
    proc = launch(p2p, *RMA, '--mode', 'flood', *QUICK, '--corrupt-at', '4096')
    assert proc.returncode != 0
    assert 'payload check failed' in proc.stderr and 'transport rma' in proc.stderr, \
        proc.stderr[-800:]


def test_a_sync_the_modes_do_not_run_is_said_not_measured(p2p):
    proc = launch(p2p, '--transport', 'rma', '--rma-op', 'put', '--rma-sync', 'fence',
                  '--baselines', 'none', '--mode', 'flood', *QUICK)
    assert proc.returncode == 0, proc.stderr[-800:]
    why = recs(proc.stdout, 'P2P-UNSUPPORTED')
    assert why and 'passive-target flush only' in why[0]['reason']
    assert not recs(proc.stdout, 'P2P-FLOOD')


def test_two_sided_bidirectional_window_still_checks_every_message(p2p):
    proc = launch(p2p, '--pair', 'Isend-Irecv', '--mode', 'bidir', *QUICK)
    assert proc.returncode == 0, proc.stderr[-800:]
    bidir = recs(proc.stdout, 'P2P-STREAM')
    assert [r['style'] for r in bidir] == ['bidir', 'bidir']
    for r in bidir:
        assert r['transport'] == 'mpi' and r['checked_messages'] >= r['samples'], r
        # both ranks receive: each checks its 4 slots in every sample (calibration's too)
        assert r['checked_messages'] >= 2 * 4 * r['samples'], r



def test_a_library_without_one_sided_is_one_line_not_an_abort(p2p, tmp_path):
    """Open MPI 4.1 between nodes over TCP has no one-sided component and fails MPI_Win_create;
    here Open MPI's own selection leaves none on one host. p2p says so in one line, which
    LogGP and LogGPNodes read as not run (rma_cannot_run), and exits 2."""
    reg = registry.load()
    cmd = drop_privileges(reg) + ['env', 'OMPI_MCA_osc=^sm,pt2pt,rdma,ucx'] + \
        reg.stacks[STACK].launch_command(2) + [str(p2p / 'apps' / 'p2p' / 'p2p'), *RMA,
                                               '--mode', 'loggp', *QUICK]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180, cwd=p2p)
    assert proc.returncode == 2, proc.stderr[-800:]
    assert 'MPI_ERRORS_ARE_FATAL' not in proc.stderr
    log = tmp_path / 'p2p-rma.log'
    log.write_text(proc.stdout + proc.stderr)
    why = rma_cannot_run(str(tmp_path / 'absent.err'), str(log))
    assert why and why.startswith('MPI_Win_create over') and 'failed' in why
