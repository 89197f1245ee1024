"""PVM and one-sided in the report and in the compare: their samples kept per member
(testbed/samples.py), PVM's send and receive calls judged as one family, and their figures drawn
in the report (read back in headless Chromium)."""
import json
import random

import pytest

from testbed import compare, samples
from testbed.report import browser, build
from test_report import case, pv, rendered, synthetic

SIZES = (8, 1024, 65536, 1048576)
PAIRS = [f'{s}-{r}' for s in ('send', 'psend') for r in ('recv', 'nrecv', 'trecv')]


def record(transport, pair, variant, size, values):
    return {'transport': transport, 'pair': pair, 'variant': variant, 'size_bytes': size,
            'samples_us': values}


def test_pvm_and_rma_samples_are_named_by_member():
    recs = [record('pvm', 'send-recv', 'direct-raw', 8, [1, 2, 3]),
            record('tcp', 'send-recv', 'direct-raw', 8, [9])]
    assert samples.pvm(recs, 'direct') == {'send-recv/raw/half_round_trip_us@8': [1.0, 2.0, 3.0]}
    recs = [record('rma', 'Put', 'fence', 8, [1]), record('mpi', 'Send-Recv', 'x', 8, [2])]
    assert samples.rma(recs) == {'put/half_round_trip_us@8': [1.0]}
    with pytest.raises(ValueError, match='rma Get 8 bytes: no samples_us'):
        samples.rma([{'transport': 'rma', 'pair': 'Get', 'size_bytes': 8}])


def pvm_report(seed, factor=1.0, slow_pair=None):
    rng = random.Random(seed)
    fs = {}
    for i, pair in enumerate(PAIRS + ['send-recv2', 'psend-recv2']):
        for enc in ('default',):
            for size in SIZES:
                level = (30 + size / 100) * (1 + i / 20)
                f = 3.0 if pair == slow_pair else factor
                fs[f'{pair}/{enc}/half_round_trip_us@{size}'] = [
                    level * f * rng.lognormvariate(0, 0.03) for _ in range(15)]
    tc = {'name': 'PvmMatrix %route=direct %size_range=quick %pack=byte', 'result': 'pass',
          'stack_name': 'pvm-3.4', 'environ': 'pvm-3_4', 'figure_samples': fs}
    return {'session_info': {'uuid': f's{seed}'}, 'runs': [{'testcases': [tc]}]}


def test_pvm_calls_are_judged_as_one_family():
    rows = compare.compare(pvm_report(1), pvm_report(2, factor=1.15))
    fams, singles = compare.families(rows, 0.05, 0.95)
    assert len(fams) == len(SIZES) and not singles
    assert all(f['members'] == 8 and f['verdict'] == 'slower' for f in fams)
    assert compare.decide(fams, singles) == 1
    # one call slow (a burst, or that call alone): listed, the family stays 'same'
    rows = compare.compare(pvm_report(1), pvm_report(2, slow_pair='send-trecv'))
    fams, singles = compare.families(rows, 0.05, 0.95)
    assert {f['verdict'] for f in fams} == {'same'} and compare.decide(fams, singles) == 0
    assert any(r['verdict'] == 'slower' and ': send-trecv/' in r['figure']
               for r in rows)


def test_one_sided_is_judged_alone_with_its_stack_kept(tmp_path):
    def rma(seed, factor):
        rng = random.Random(seed)
        tc = {'name': 'OneSided %sync=fence', 'result': 'pass', 'stack_name': 'mpich-4.0',
              'figure_samples': {f'{op}/half_round_trip_us@8': [
                  2.0 * factor * rng.lognormvariate(0, 0.02) for _ in range(15)]
                  for op in ('put', 'get')}}
        return {'runs': [{'testcases': [tc]}]}
    rows = compare.compare(rma(1, 1.0), rma(2, 1.2))
    fams, singles = compare.families(rows, 0.05, 0.95)
    assert not fams and len(singles) == 2 and compare.decide(fams, singles) == 1
    assert compare.family_figure('mpich-4.0: put/half_round_trip_us@8') == \
        'mpich-4.0: half_round_trip_us@8'


def with_pvm_and_rma(tmp_path):
    path = synthetic(tmp_path)
    report = json.loads(path.read_text())
    cases = report['runs'][0]['testcases']
    for route in ('daemon', 'direct'):
        cases.append(case(f'PvmMatrix %route={route} %size_range=quick %pack=byte', 'pvm-3.4',
                          route=route, size_range='quick', pack='byte', perfvalues={
                              f'l:d:{what}_{pair}_default': pv(v * (2 if route == 'daemon'
                                                                    else 1), unit)
                              for pair in PAIRS for what, v, unit in
                              (('latency', 40.0, 'us'), ('bandwidth', 90.0, 'MB/s'))}))
    for sync in ('fence', 'pscw'):
        cases.append(case(f'OneSided %sync={sync}', 'mpich-4.1.3', sync=sync, perfvalues={
            f'l:d:{op}_{what}': pv(v, unit) for op in ('put', 'get') for what, v, unit in
            (('latency_8B', 1.8, 'us'), ('bandwidth_1MiB', 7000.0, 'MB/s'),
             ('over_sendrecv_latency_8B', 4.3, 'ratio'),
             ('over_sendrecv_bandwidth_1MiB', 0.9, 'ratio'))}))
    path.write_text(json.dumps(report))
    return path


def test_report_draws_pvm_and_one_sided(tmp_path):
    try:
        browser.executable()
    except browser.BrowserMissing as err:
        pytest.fail(str(err))
    out = tmp_path / 'report'
    build([with_pvm_and_rma(tmp_path)], out)
    text, figs = rendered(out / 'index.html')
    for fid in ('r0-pvm-lat-pvm-3-4-quick', 'r0-pvm-bw-pvm-3-4-quick', 'r0-rma-lat', 'r0-rma-bw',
                'r0-rma-ratio-lat', 'r0-rma-ratio-bw'):
        assert figs.get(fid), f'figure {fid} missing or empty in the rendered page'
    assert 'direct byte' in text and 'send-trecv default' in text and 'put fence' in text


def test_a_report_without_them_says_so(tmp_path):
    out = tmp_path / 'report'
    build([synthetic(tmp_path)], out)
    text = (out / 'index.html').read_text()
    assert 'No PvmMatrix case in this report' in text and 'No OneSided case' in text
