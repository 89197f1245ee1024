"""su3_rmd's speedup is the ratio of the lower quartiles of the trajectory times: another
tenant's load that lengthens half the trajectories leaves it, a slower library moves it."""
import pytest

from testbed.su3 import lower_quartile


def trajs(seconds):
    # trajectory 0 is the cold start: never timed
    return [{'traj': 0, 'seconds': 99.0}] + [{'traj': i + 1, 'seconds': s}
                                            for i, s in enumerate(seconds)]


def test_lower_quartile_interpolates_and_skips_the_cold_start():
    assert lower_quartile(trajs([4.0, 1.0, 3.0, 2.0, 5.0])) == pytest.approx(2.0)
    assert lower_quartile(trajs([1.0, 2.0])) == pytest.approx(1.25)
    with pytest.raises(ValueError, match='no timed trajectory'):
        lower_quartile(trajs([]))


def test_interleaved_load_on_half_the_trajectories_leaves_the_speedup():
    one = trajs([0.0208] * 50)
    quiet = trajs([0.0107] * 50)
    noisy = trajs([0.0107, 0.0155] * 25)        # as in the CI run of 2026-11-24
    assert lower_quartile(one) / lower_quartile(noisy) == \
        pytest.approx(lower_quartile(one) / lower_quartile(quiet))
    slower = trajs([0.0107 * 1.2] * 50)          # a library 20 % slower: every trajectory
    assert lower_quartile(one) / lower_quartile(slower) < 0.85 * 0.0208 / 0.0107


def test_over_memcpy_is_the_geometric_mean_over_sizes():
    from testbed.su3 import over_memcpy
    gathers = [{'bytes': 36864, 'lq_s': 8e-6, 'exchange_lq_s': 3e-6, 'memcpy_lq_s': 1e-6},
               {'bytes': 27648, 'lq_s': 2e-6, 'exchange_lq_s': 12e-6, 'memcpy_lq_s': 1e-6}]
    assert over_memcpy(gathers) == pytest.approx(4.0)
    assert over_memcpy(gathers, 'exchange_lq_s') == pytest.approx(6.0)
    # a library 20 % slower lengthens every gather, and the ratio by as much
    slower = [dict(g, lq_s=1.2 * g['lq_s']) for g in gathers]
    assert over_memcpy(slower) == pytest.approx(4.8)


def test_over_memcpy_names_what_is_missing():
    from testbed.su3 import over_memcpy
    with pytest.raises(ValueError, match='no SU3-GATHER record'):
        over_memcpy([])
    with pytest.raises(ValueError, match='36864 bytes has no lq_s'):
        over_memcpy([{'bytes': 36864, 'lq_s': 8e-6, 'memcpy_lq_s': None}])
    with pytest.raises(ValueError, match='36864 bytes has no exchange_lq_s'):
        over_memcpy([{'bytes': 36864, 'lq_s': 8e-6, 'memcpy_lq_s': 1e-6}], 'exchange_lq_s')


def test_exchange_problem_names_an_untimed_size_and_a_wrong_payload():
    from testbed.su3 import exchange_problem
    good = {'bytes': 36864, 'exchange_lq_s': 3e-6, 'exchange_samples': 51, 'exchange_bad': 0}
    assert exchange_problem([good]) is None
    assert 'exchange of 27648 bytes was not timed' in exchange_problem(
        [good, {'bytes': 27648, 'lq_s': 2e-6}])
    assert 'wrong payload in 1 of 51 samples' in exchange_problem([dict(good, exchange_bad=1)])
    assert 'through shared memory (the baseline) delivered a wrong payload in 2 of 51' in \
        exchange_problem([dict(good, shm_exchange_min_s=5e-6, shm_exchange_bad=2)])


def test_over_shm_is_the_geometric_mean_and_absent_without_the_baseline():
    from testbed.su3 import over_shm
    gathers = [{'bytes': 36864, 'exchange_min_s': 4e-6, 'shm_exchange_min_s': 2e-6},
               {'bytes': 27648, 'exchange_min_s': 4e-6, 'shm_exchange_min_s': 8e-6}]
    assert over_shm(gathers) == pytest.approx(1.0)
    # four ranks, or two hosts: no exchange through shared memory, so no figure
    assert over_shm([{'bytes': 36864, 'exchange_min_s': 4e-6}]) is None
    assert over_shm([]) is None


def test_over_cma_reads_the_kernel_times_and_names_a_wrong_payload():
    from testbed.su3 import exchange_problem, over_shm
    gathers = [{'bytes': 36864, 'exchange_min_s': 3e-6, 'cma_exchange_min_s': 2e-6},
               {'bytes': 27648, 'exchange_min_s': 3e-6, 'cma_exchange_min_s': 2e-6}]
    assert over_shm(gathers, 'cma') == pytest.approx(1.5)
    assert over_shm(gathers) is None            # no shared-memory times in these records
    bad = {'bytes': 36864, 'exchange_lq_s': 3e-6, 'exchange_samples': 51, 'exchange_bad': 0,
           'cma_exchange_min_s': 2e-6, 'cma_exchange_bad': 3}
    assert 'through the kernel (the baseline) delivered a wrong payload in 3 of 51' in \
        exchange_problem([bad])


def test_an_asserted_kernel_copy_that_did_not_run_fails_naming_the_figure():
    from reframe.utility import ScopedDict
    from testbed.su3 import kernel_copy_problem
    row = ScopedDict({'testbed-local:default': {'exchange_over_cma': (1.6, -0.14, 0.16, 'ratio')}})
    refused = [{'bytes': 36864, 'exchange_min_s': 3e-6}]     # the kernel refused: no cma time
    ran = [dict(refused[0], cma_exchange_min_s=2e-6)]
    assert 'exchange_over_cma has a reference here but was not measured' in \
        kernel_copy_problem(row, refused)
    assert kernel_copy_problem(row, ran) is None
    # no row for it (another machine type, reported only, measure-only): nothing to meet
    assert kernel_copy_problem(ScopedDict({}), refused) is None
    other = {'testbed-local:default': {'speedup_busy': (1.9, -0.1, 0.1, 'ratio')}}
    assert kernel_copy_problem(other, refused) is None


def test_hpl_panels_over_a_kernel_copy_that_did_not_run_fail_naming_the_figure():
    from reframe.utility import ScopedDict
    from testbed.checks import kernel_copy_problem
    row = ScopedDict({'testbed-local:default': {'panel_replay_over_cma': (0.95, -0.14, 0.16,
                                                                        'ratio')}})
    problem = kernel_copy_problem(row, 'panel_replay_over_cma', False, 'HplRun')
    assert 'panel_replay_over_cma has a reference here but was not measured' in problem
    assert '-S HplRun.report_only=panel_replay_over_cma' in problem
    assert kernel_copy_problem(row, 'panel_replay_over_cma', True, 'HplRun') is None
    # su3's row does not make HPL's figure required
    su3 = {'testbed-local:default': {'exchange_over_cma': (1.6, -0.14, 0.16, 'ratio')}}
    assert kernel_copy_problem(su3, 'panel_replay_over_cma', False, 'HplRun') is None
