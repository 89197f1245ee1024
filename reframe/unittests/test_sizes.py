"""Size schedules as the thesis and NetPIPE define them."""
from testbed.sizes import SCHEDULES, netpipe


def test_thesis_ranges():
    assert SCHEDULES['small'][0] == 300 and SCHEDULES['small'][-1] == 4800
    assert len(SCHEDULES['small']) == 16
    assert SCHEDULES['medium'][0] == 5000 and SCHEDULES['medium'][-1] == 100000
    assert len(SCHEDULES['medium']) == 20
    assert SCHEDULES['large'][0] == 200000 and SCHEDULES['large'][-1] == 2000000
    assert len(SCHEDULES['large']) == 19


def test_netpipe_schedule_perturbs_powers_and_three_halves():
    sizes = netpipe()
    assert sizes[0] == 1 and sizes[-1] == 4 * 1024 * 1024
    for s in (1021, 1024, 1027, 1533, 1536, 1539):
        assert s in sizes
    assert sizes == sorted(set(sizes))
