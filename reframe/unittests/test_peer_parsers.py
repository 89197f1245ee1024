"""The peers' output parsers (testbed.peer_table) on outputs observed on this machine, trimmed."""
import pytest

from testbed.peer_table import (imb_version, netpipe_repetitions, parse_imb, parse_netpipe,
                                render)

# IMB-MPI1 2021.11 PingPong -msglen FILE -multi 0 -iter 1000,400 on intel-mpi-2021
IMB_MULTI0 = """\
#----------------------------------------------------------------
#    Intel(R) MPI Benchmarks 2021.11, MPI-1 part
#----------------------------------------------------------------
# MPI Version           : 4.1

#-----------------------------------------------------------------------------
# Benchmarking PingPong 
# #processes = 2 
#-----------------------------------------------------------------------------
       #bytes #repetitions  t_min[usec]  t_max[usec]  t_avg[usec]   Mbytes/sec
            8         1000         0.43         0.43         0.43        18.49
         1024         1000         0.74         0.74         0.74      1375.46
        65536         1000         7.08         7.08         7.08      9257.43
      1048576          400       111.61       111.62       111.61      9394.36


# All processes entering MPI_Finalize
"""

# The same without -multi 0 (default -iter: 40 repetitions at 1 MiB): one t column
IMB_DEFAULT = """\
#---------------------------------------------------
# Benchmarking PingPong 
# #processes = 2 
#---------------------------------------------------
       #bytes #repetitions      t[usec]   Mbytes/sec
            8         1000         0.23        34.37
      1048576           40       109.83      9546.98
#---------------------------------------------------
# Benchmarking PingPing 
# #processes = 2 
#---------------------------------------------------
       #bytes #repetitions      t[usec]   Mbytes/sec
            8         1000         0.50        16.00
"""

# NPmpich2 -l 8 -u 8 -p 0 -o FILE on mpich-4.0: the file, then rank 0's progress on stderr
NETPIPE_OUT = "       8 95.907259   0.00000064\n"
NETPIPE_LOG = """\
Using no perturbations

Sending output to np8.out
0: vm
1: vm
Now starting the main loop
  0:       8 bytes  87967 times -->     95.91 Mbps in       0.64 usec
"""


def test_imb_multi0_reads_t_avg_and_range():
    rows = parse_imb(IMB_MULTI0)
    assert [r['size_bytes'] for r in rows] == [8, 1024, 65536, 1048576]
    big = rows[-1]
    assert big['repetitions'] == 400
    assert (big['t_min_us'], big['t_max_us'], big['t_avg_us']) == (111.61, 111.62, 111.61)
    # Mbytes/sec is 10^6 bytes/s from the largest rank time: size / t
    assert big['MBps'] == pytest.approx(1048576 / big['t_max_us'], rel=1e-3)
    assert imb_version(IMB_MULTI0) == '2021.11'


def test_imb_single_t_column_and_only_pingpong():
    rows = parse_imb(IMB_DEFAULT)
    assert [(r['size_bytes'], r['repetitions'], r['t_avg_us']) for r in rows] == \
        [(8, 1000, 0.23), (1048576, 40, 109.83)]
    assert 't_min_us' not in rows[0]


def test_imb_without_table_is_empty():
    assert parse_imb('# Benchmarking PingPong\n# #processes = 2\n') == []
    assert imb_version('') == 'unknown'


def test_netpipe_time_from_mbps_in_2_to_20_bits():
    (row,) = parse_netpipe(NETPIPE_OUT)
    assert row['size_bytes'] == 8
    # 64 bits / (95.907259 * 2^20 bits/s) = 0.6364 us, one way
    assert row['time_us'] == pytest.approx(64 / (95.907259 * 2 ** 20) * 1e6)
    assert row['time_us'] == pytest.approx(0.64, abs=0.006)
    assert row['MBps'] == pytest.approx(8 / row['time_us'])


def test_netpipe_inconsistent_columns_are_refused():
    # Mbps read as 10^6 bits/s would give this time column: the parser must not accept it
    with pytest.raises(ValueError, match='Mbps gives'):
        parse_netpipe('1048576 8000.000000   0.00104858\n')


def test_netpipe_repetitions_from_progress_lines():
    assert netpipe_repetitions(NETPIPE_LOG) == {8: 87967}
    assert parse_netpipe(NETPIPE_LOG) == []


def test_render_peer_table_from_perfvalues_and_failed_figures():
    def pv(value):
        return [value, 0, None, None, 'us', 'pass']
    passed = {'name': 'PeerCompare', 'environ': 'mpich-4_0', 'stack_name': 'mpich-4.0',
              'result': 'pass', 'perfvalues': {
                  'testbed-local:default:imb_8B_ours': pv(0.45),
                  'testbed-local:default:imb_8B_peer': pv(0.44),
                  'testbed-local:default:imb_8B_ratio': pv(1.023),
                  'testbed-local:default:netpipe_8B_ours': pv(0.62),
                  'testbed-local:default:netpipe_8B_peer': pv(0.64),
                  'testbed-local:default:netpipe_8B_ratio': pv(0.969)}}
    failed = {'name': 'PeerCompare', 'environ': 'lam-7_1', 'stack_name': 'lam-7.1',
              'result': 'fail', 'fail_reason': 'sanity error: ratio 1.5',
              'peer_figures': {'netpipe_1048576B_ours': 150.0, 'netpipe_1048576B_peer': 100.0,
                               'netpipe_1048576B_ratio': 1.5}}
    lines = render({'runs': [{'testcases': [passed, failed]}]})
    assert '| mpich-4.0 | 8 | 0.45 | 0.44 | 1.023 | 0.62 | 0.64 | 0.969 | pass |' in lines
    assert '| lam-7.1 | 1,048,576 | - | - | - | 150 | 100 | 1.5 | FAIL |' in lines
    assert render({'runs': [{'testcases': []}]}) == []
