"""Reading LogGP off apps/p2p's records (testbed.loggp): the overheads off the CPU-overlap
ladder, the two-segment fit of the per-byte gap with the change found in the data, the g/G
crossover, the "within noise" rule and IMB's Uniband/Biband table. Pure Python, no MPI."""
import json

import numpy as np
import pytest

from testbed.loggp import (LogGPError, above_within_noise, crossover, loggp_figures, overhead,
                           parse_imb_band, two_segments)


def ladder(t0, o, steps=(0, 0.25, 0.5, 0.75, 1, 1.25, 1.5, 2, 3), noise=0.0, n=7, seed=1):
    """P2P-OVERLAP records of a side whose time per message is max(t0, w + o)."""
    rng = np.random.default_rng(seed)
    out = []
    for k in steps:
        w = k * t0
        t = max(t0, w + o)
        samples = list(t * (1 + noise * rng.standard_normal(n)))
        out.append({'work_iters': int(w * 700), 'work_us_measured': w, 'median_us': t,
                    'samples_us': samples})
    return out


def test_overhead_is_the_offset_of_the_linear_part():
    got = overhead(ladder(t0=1.0, o=0.3))
    assert got['o_us'] == pytest.approx(0.3)
    assert got['hidden_us'] == pytest.approx(0.7)       # Bell et al.'s w*: T0 - o
    assert got['points'] == [1.0, 1.25, 1.5, 2.0, 3.0]


def test_overhead_equal_to_the_gap_leaves_nothing_hidden():
    got = overhead(ladder(t0=0.15, o=0.15))
    assert got['o_us'] == pytest.approx(0.15)
    assert got['hidden_us'] == pytest.approx(0.0, abs=1e-12)


def test_overhead_per_sample_follows_the_samples():
    got = overhead(ladder(t0=1.0, o=0.3, noise=0.02, n=9))
    assert len(got['samples_us']) == 9
    assert np.median(got['samples_us']) == pytest.approx(0.3, abs=0.05)


def test_overhead_needs_two_points_past_t0():
    with pytest.raises(LogGPError, match='need 2'):
        overhead(ladder(t0=1.0, o=0.3, steps=(0, 0.5, 1.0)))
    with pytest.raises(LogGPError, match='w = 0'):
        overhead(ladder(t0=1.0, o=0.3, steps=(1, 2, 3)))


def sweep(change=65536, ge=0.5e-3, gr=0.1e-3, a=0.2, jump=3.0):
    """Time per message (us) over NetPIPE-like sizes: eager slope ge, then a rendezvous
    line of slope gr starting `jump` us higher at the change."""
    sizes = sorted({s for k in range(10, 21) for s in (2 ** k, 3 * 2 ** (k - 1)) if s <= 2 ** 20})
    times = [a + ge * s if s <= change else a + ge * change + jump + gr * (s - change)
             for s in sizes]
    return sizes, times


def test_two_segments_finds_the_change_and_both_slopes():
    fit = two_segments(*sweep())
    assert fit['eager_last_bytes'] == 65536
    assert fit['rndv_first_bytes'] == 98304
    assert fit['G_eager'] == pytest.approx(0.5, rel=1e-6)        # ns per byte
    assert fit['G_rndv'] == pytest.approx(0.1, rel=1e-6)
    assert fit['change_detected']


def test_two_segments_without_a_change_detects_none():
    rng = np.random.default_rng(3)
    sizes, times = sweep(change=2 ** 30)                          # one line
    noisy = [t * (1 + 0.01 * rng.standard_normal()) for t in times]
    fit = two_segments(sizes, noisy)
    assert not fit['change_detected']
    assert fit['G_one'] == pytest.approx(0.5, rel=0.05)


def test_two_segments_ignores_sizes_below_the_fit_and_needs_enough():
    sizes, times = sweep()
    fit = two_segments([8, 64] + sizes, [50.0, 90.0] + times)    # flat small sizes: left out
    assert fit['G_eager'] == pytest.approx(0.5, rel=1e-6)
    with pytest.raises(LogGPError, match='needs 6'):
        two_segments(sizes[:5], times[:5])


def test_crossover_takes_g_over_the_g_of_its_range():
    fit = {'G_eager': 0.5, 'G_rndv': 0.1, 'eager_last_bytes': 65536}
    assert crossover(0.2, fit) == pytest.approx(400)              # 0.2 us / 0.5 ns/B
    assert crossover(100.0, fit) == pytest.approx(1e6)            # past the change: rndv's G
    with pytest.raises(LogGPError):
        crossover(0.2, dict(fit, G_rndv=0.0))


def test_above_within_noise_needs_the_quartiles_apart():
    low, high = [1.0, 1.1, 0.9, 1.0, 1.05], [2.0, 2.1, 1.9, 2.0, 2.05]
    assert above_within_noise(high, low)
    assert not above_within_noise(low, high)
    # a burst in a few samples moves neither quartile
    assert not above_within_noise([1.0, 1.0, 1.02, 9.0, 1.01], [1.0, 1.03, 0.99, 1.0, 1.02])
    assert not above_within_noise(high, low, factor=2.0)


IMB = """
#---------------------------------------------------
# Benchmarking Uniband 
# #processes = 2 
#---------------------------------------------------
       #bytes #repetitions   Mbytes/sec      Msg/sec
            8         1000        51.47      6433145
      1048576           40      9041.46         8623

#---------------------------------------------------
# Benchmarking Biband 
# #processes = 2 
#---------------------------------------------------
       #bytes #repetitions   Mbytes/sec      Msg/sec
            8         1000        44.71      5588834
      1048576           40     16041.72        15299


# All processes entering MPI_Finalize
"""


def test_parse_imb_band_reads_each_table():
    uni = parse_imb_band(IMB, 'Uniband')
    bi = parse_imb_band(IMB, 'Biband')
    assert [r['size_bytes'] for r in uni] == [8, 1048576]
    assert uni[0]['msg_per_s'] == 6433145 and uni[1]['MBps'] == pytest.approx(9041.46)
    assert bi[1]['MBps'] == pytest.approx(16041.72) and bi[0]['repetitions'] == 1000
    assert parse_imb_band(IMB, 'PingPong') == []


def launch_output(path, transport, eel, t0, o, scale=1.0):
    """A launch's records of `transport` (its ping-pong at 8 B, its flood at q = 1 and 8 over
    sweep()'s sizes, both overlap ladders), with MPI records of other figures beside them."""
    lines = []
    for tr, k in ((transport, scale), ('mpi', 100.0)):
        lines.append('P2P ' + json.dumps({'transport': tr, 'size_bytes': 8, 'median_us': k * eel}))
        sizes, times = sweep()
        for q in (1, 8):
            lines += ['P2P-FLOOD ' + json.dumps({'transport': tr, 'q': q, 'size_bytes': sz,
                                                 'median_us': k * t})
                      for sz, t in [(8, t0)] + list(zip(sizes, times))]
        for side in ('send', 'recv'):
            lines += ['P2P-OVERLAP ' + json.dumps(dict(r, transport=tr, side=side))
                      for r in ladder(t0=k * t0, o=k * o)]
    path.write_text('\n'.join(lines) + '\n')
    return str(path)


def test_loggp_figures_read_one_transport_of_a_launch(tmp_path):
    """LogGPNodes reads its raw-TCP launch as LogGP reads MPI's: only that transport's records
    (the MPI records beside them, 100x slower, change nothing)."""
    fig, fit, g = loggp_figures(launch_output(tmp_path / 'tcp.out', 'tcp_poll', 8.0, 1.0, 0.3),
                                'tcp_poll', fit_q=8)
    assert fig['eel'] == ('us', 8.0)
    assert fig['o_s'][1] == pytest.approx(0.3) and fig['o_r'][1] == pytest.approx(0.3)
    assert fig['g_q1'] == ('us', 1.0) and sorted(g) == [1, 8]
    assert fit['eager_last_bytes'] == 65536 and fit['G_eager'] > fit['G_rndv'] > 0
    with pytest.raises(LogGPError, match='no 8-byte tcp ping-pong'):
        loggp_figures(str(tmp_path / 'tcp.out'), 'tcp', fit_q=8)


def test_rma_cannot_run_reads_the_reason_and_nothing_else(tmp_path):
    from testbed.loggp import rma_cannot_run
    said = tmp_path / 'rma.err'
    said.write_text('noise\np2p: transport rma cannot run: MPI_Win_create over 8 bytes '
                    'failed: MPI_ERR_WIN: invalid window\n')
    quiet = tmp_path / 'rma.out'
    quiet.write_text('P2P-RUN {}\np2p: transport mpi cannot run: other\n')
    assert rma_cannot_run(str(quiet), str(said)) == \
        'MPI_Win_create over 8 bytes failed: MPI_ERR_WIN: invalid window'
    assert rma_cannot_run(str(quiet), str(tmp_path / 'absent')) is None
