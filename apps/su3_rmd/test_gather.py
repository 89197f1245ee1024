"""su3_rmd's SU3-GATHER records, the figures behind gather_over_memcpy and
exchange_over_memcpy: one per message size the gathers sent, counts that match the MPI profile,
every exchange timed alone (and through shared memory) with its payload checked, and none where no message crossed ranks. Asserts no speed. Run: python3 -m pytest -q apps/su3_rmd/test_gather.py."""

from test_alone import ARGS, records, run


def test_two_ranks_report_each_gather_size(su3, launcher):
    out = run([launcher, '-n', '2', str(su3), *ARGS, '--comm', 'ssend'])
    assert out.returncode == 0, out.stderr
    head = records(out.stdout, 'SU3-RUN')[0]
    gathers = records(out.stdout, 'SU3-GATHER')
    # the t dimension is split: links (4 per site) and staples (3) of one face
    assert sorted(g['bytes'] for g in gathers) == sorted(
        [head['face_bytes'][3], head['staple_face_bytes'][3]])
    for g in gathers:
        assert g['gathers'] > 0 and 0 < g['lq_s'] <= g['median_s'] and g['memcpy_lq_s'] > 0
        # each size's exchange timed alone: samples of about 1 ms of exchanges (at the
        # calibration's median on the slower rank), every payload right
        assert 0 < g['exchange_min_s'] <= g['exchange_lq_s'] <= g['exchange_median_s']
        assert g['exchange_lq_s'] * g['exchange_reps'] >= 0.5e-3  # calibrated on the slowest
        # each exchange is followed by an untimed pause, the same on both ranks: at least
        # 10 us (the calibration's median exchange where that is longer)
        assert g['exchange_pause_s'] >= 10e-6
        assert g['exchange_samples'] == 51 and g['exchange_bad'] == 0
        # two ranks on one host: the same bytes through shared memory, beside each sample
        assert g['shm_exchange_min_s'] > 0 and g['shm_exchange_bad'] == 0
        # and through the kernel, where it lets a process read its partner's memory
        if 'cma_exchange_min_s' in g or 'process_vm_readv' not in out.stderr:
            assert g['cma_exchange_min_s'] > 0 and g['cma_exchange_bad'] == 0
    # every gather posts one Irecv on each of the 2 ranks (counts are rank 0's)
    irecv = next(c['count'] for c in records(out.stdout, 'SU3-MPI') if c['call'] == 'MPI_Irecv')
    assert 2 * sum(g['gathers'] for g in gathers) == irecv


def test_a_wrong_payload_in_the_exchanges_is_counted(su3, launcher):
    # rank 0 sends one wrong value in one sample of each size (test-only option): the
    # receiver's check must see it, so the test's sanity (exchange_problem) fails the run
    out = run([launcher, '-n', '2', str(su3), *ARGS, '--corrupt-exchange'])
    assert out.returncode == 0, out.stderr
    gathers = records(out.stdout, 'SU3-GATHER')
    assert [g['exchange_bad'] for g in gathers] == [1, 1]
    # the exchange through shared memory moves the same payload and checks it too
    assert [g['shm_exchange_bad'] for g in gathers] == [1, 1]
    if 'process_vm_readv' not in out.stderr:     # the kernel allowed it
        assert [g['cma_exchange_bad'] for g in gathers] == [1, 1]


def test_no_gather_record_without_messages(su3, launcher):
    one = run([str(su3), *ARGS])
    alone = run([launcher, '-n', '2', str(su3), *ARGS, '--alone'])
    assert one.returncode == alone.returncode == 0, alone.stderr
    assert records(one.stdout, 'SU3-GATHER') == records(alone.stdout, 'SU3-GATHER') == []
