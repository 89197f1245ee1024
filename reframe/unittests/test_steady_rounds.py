"""apps/peers/steady_rounds.py, the job's own question between PeerCompare's rounds: it must
count a round steady exactly where the verdict (testbed.peer_compare.compare) does, or the job
stops early and the verdict then finds too few steady rounds."""
import importlib.util
import json

from testbed import registry

spec = importlib.util.spec_from_file_location(
    'steady_rounds', registry.REPO / 'apps' / 'peers' / 'steady_rounds.py')
steady_rounds = importlib.util.module_from_spec(spec)
spec.loader.exec_module(steady_rounds)


def floor_log(path, us):
    rec = {'transport': 'shm', 'size_bytes': 8, 'median_us': us}
    path.write_text(f'P2P {json.dumps(rec)}\n')


def test_imb_alone_is_judged_on_the_next_rounds_launch(tmp_path):
    # --one-peer on an IMB stack: no launch in NetPIPE's layout; round 3's floor moved
    # (0.068 -> 0.264 us) across IMB, round 4 moved back; the job's own launch is p2p-r6
    floors = [0.068, 0.069, 0.068, 0.264, 0.064]
    for k, us in enumerate(floors, 1):
        floor_log(tmp_path / f'p2p-r{k}.log', us)
    own = tmp_path / 'rfm_job.out'
    floor_log(own, 0.065)
    got = steady_rounds.count(5, ['imb'], 2.0, str(own), folder=str(tmp_path))
    assert got == {'imb': 3}      # rounds 1, 2 and 5, as the verdict pairs them


def test_with_netpipe_imb_is_judged_on_the_launch_in_netpipes_layout(tmp_path):
    for k in (1, 2):
        floor_log(tmp_path / f'p2p-r{k}.log', 0.05)
        floor_log(tmp_path / f'p2p-shared-r{k}.log', 0.05 if k == 1 else 0.2)
    own = tmp_path / 'rfm_job.out'
    floor_log(own, 0.05)
    got = steady_rounds.count(2, ['imb', 'netpipe'], 2.0, str(own), folder=str(tmp_path))
    # imb: round 1 steady, round 2 moved (0.05 -> 0.2); netpipe: p2p-shared-r2 -> own moved
    assert got == {'imb': 1, 'netpipe': 1}
