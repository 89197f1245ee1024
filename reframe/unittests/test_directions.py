"""The studies' directions (testbed/directions.py): each rule passes on figures in the studies'
order and fails when the faster of the two is slower by more than the tolerance."""
import json

from testbed import directions


def p2p(stack, mode, us_at_8, configure='', version='MPICH 4.0.2'):
    return {'name': f'P2PMatrix %mode={mode} %size_range=quick', 'environ': stack,
            'stack_name': stack, 'result': 'pass', 'system': 'testbed-local',
            'figure_samples': {'half_round_trip_us@8': [us_at_8, us_at_8 * 1.01]},
            'stack_configure': configure, 'library_version': version}


def modes(stack, sync_us, standard_us, **kw):
    names = ['Send-Recv/complete', 'Send-Irecv/complete', 'Isend-Recv/complete',
             'Ssend-Recv/complete', 'Ssend-Irecv/complete', 'Issend-Irecv/preposted']
    return [p2p(stack, m, sync_us if m.startswith(('Ssend', 'Issend')) else standard_us, **kw)
            for m in names]


def stack_latency(stack, us):
    return {'name': 'P2PStack %size_range=quick', 'environ': stack, 'stack_name': stack,
            'size_range': 'quick', 'result': 'pass',
            'perfvalues': {'testbed-local:default:latency': [us, 0, None, None, 'us', None]}}


def pvm(route, pack, **bandwidths):
    suffix = '-double' if pack == 'double' else ''
    return {'name': f'PvmMatrix %route={route} %pack={pack}', 'environ': 'pvm-3_4',
            'stack_name': 'pvm-3.4', 'size_range': 'quick', 'route': route, 'pack': pack,
            'result': 'pass',
            'perfvalues': {f's:p:bandwidth_send-recv_{enc}{suffix}': [bw, 0, None, None,
                                                                      'MB/s', None]
                           for enc, bw in bandwidths.items()}}


def report(cases):
    return {'runs': [{'testcases': cases}]}


def verdicts(cases, shared=('mpich-4.0',)):
    return {(r['rule'], r['subject'].split()[0]): r['ok']
            for r in directions.check([report(cases)], set(shared))}


def test_synchronous_sends_no_faster_at_8_bytes_in_shared_memory_only():
    assert verdicts(modes('mpich-4.0', 0.6, 0.4)) == {('sync-8B', 'mpich-4.0'): True}
    assert verdicts(modes('mpich-4.0', 0.3, 0.4)) == {('sync-8B', 'mpich-4.0'): False}
    # within the tolerance, and over loopback sockets (not a shared-memory stack): no verdict
    assert verdicts(modes('mpich-4.0', 0.38, 0.4)) == {('sync-8B', 'mpich-4.0'): True}
    assert verdicts(modes('sock', 30.0, 45.0)) == {}


def test_ch3_sock_is_slower_in_one_host_than_the_same_version_on_shared_memory():
    cases = modes('sock', 45, 45, configure='--with-device=ch3:sock') + \
        modes('mpich-4.0', 0.6, 0.4) + modes('mpich-5.0', 1, 1, version='MPICH 5.0.2')
    good = cases + [stack_latency('sock', 90.0), stack_latency('mpich-4.0', 4.4),
                    stack_latency('mpich-5.0', 200.0)]
    got = verdicts(good)
    assert got[('ch3sock-1host', 'sock')] is True and len(got) == 2     # 5.0 not compared
    bad = cases + [stack_latency('sock', 3.0), stack_latency('mpich-4.0', 4.4)]
    assert verdicts(bad)[('ch3sock-1host', 'sock')] is False


def test_pvm_inplace_direct_and_raw_doubles():
    good = [pvm('direct', 'double', default=190, raw=540, inplace=2100),
            pvm('daemon', 'double', default=120, raw=215, inplace=800)]
    rows = directions.check([report(good)], set())
    assert {r['rule'] for r in rows} == {'pvm-inplace', 'pvm-raw-doubles', 'pvm-direct'}
    assert all(r['ok'] for r in rows)
    bad = [pvm('direct', 'double', default=190, raw=540, inplace=300),
           pvm('daemon', 'double', default=120, raw=215, inplace=800)]
    failed = {r['rule'] for r in directions.check([report(bad)], set()) if not r['ok']}
    assert failed == {'pvm-inplace', 'pvm-direct'}


def test_the_command_fails_on_a_failed_direction(tmp_path, capsys):
    path = tmp_path / 'r.json'
    path.write_text(json.dumps(report(modes('mpich-4.0', 0.3, 0.4))))
    assert directions.main([str(path)]) == 1      # mpich-4.0: shared memory in the registry
    path.write_text('{')
    assert directions.main([str(path)]) == 2
    assert 'cannot read the run report' in capsys.readouterr().err
