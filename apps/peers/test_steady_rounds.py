"""steady_rounds.py, which a PeerCompare job asks between rounds whether it may stop: a round
counts when our launches around the peer's read the same 8-byte floor. No MPI needed."""
import json

import steady_rounds as sr  # beside this file: pytest puts its folder on the path


def write_log(path, floor_us):
    rec = {'transport': 'shm', 'size_bytes': 8, 'median_us': floor_us}
    path.write_text('P2P-RUN {}\n' + f'P2P {json.dumps(rec)}\n')


def test_rounds_count_where_the_floor_held(tmp_path):
    # round 1 steady for both peers, round 2: the floor moved 5x during NetPIPE's launches
    for tag, floor in (('p2p-r1', 0.16), ('p2p-shared-r1', 0.15), ('p2p-r2', 0.16),
                       ('p2p-shared-r2', 0.17)):
        write_log(tmp_path / f'{tag}.log', floor)
    write_log(tmp_path / 'rfm_job.out', 0.03)          # p2p-r3: the job's own launch
    got = sr.count(2, ['imb', 'netpipe'], 2.0, str(tmp_path / 'rfm_job.out'), str(tmp_path))
    assert got == {'imb': 2, 'netpipe': 1}
    assert sr.steady(0.16, 0.3, 2.0) and not sr.steady(0.16, 0.33, 2.0)
    assert not sr.steady(None, 0.16, 2.0)               # a launch with no floor never counts


def test_the_exit_status_says_whether_to_stop(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for tag in ('p2p-r1', 'p2p-shared-r1'):
        write_log(tmp_path / f'{tag}.log', 0.16)
    write_log(tmp_path / 'out', 0.16)
    args = ['--rounds', '1', '--steady', '2.0', '--peers', 'imb,netpipe', '--last-log', 'out']
    assert sr.main(args + ['--need', '1']) == 0
    assert sr.main(args + ['--need', '2']) == 1
    (tmp_path / 'p2p-shared-r1.log').write_text('no records: the launch failed\n')
    assert sr.main(args + ['--need', '1']) == 1


def test_imb_alone_pairs_its_rounds_as_the_verdict_does(tmp_path):
    # one peer a stack (the quick pass) on an IMB stack: no launch in NetPIPE's layout, so
    # IMB's round k lies between p2p-r<k> and p2p-r<k+1> (testbed.peer_compare.compare);
    # the floor moved across round 3 (0.068 -> 0.264 us) and back across round 4
    for k, floor in enumerate([0.068, 0.069, 0.068, 0.264, 0.064], 1):
        write_log(tmp_path / f'p2p-r{k}.log', floor)
    write_log(tmp_path / 'rfm_job.out', 0.065)         # p2p-r6: the job's own launch
    got = sr.count(5, ['imb'], 2.0, str(tmp_path / 'rfm_job.out'), str(tmp_path))
    assert got == {'imb': 3}        # rounds 1, 2 and 5 (paired with its own launch: 4)
