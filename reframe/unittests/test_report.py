"""The HTML report (testbed/report, docs/report.md), built from a small synthetic ReFrame report
and read back in headless Chromium: every expected figure is in the rendered DOM and draws
data, the console stays silent, and the screenshots show something."""
import json
import math
import sys
import time
import types
from html.parser import HTMLParser

import pytest

from testbed.report import browser, build
from testbed.report.data import ReportError

STACKS = {'mpich-4.1.3': 1.0, 'mpich-4.2.0': 1.3, 'openmpi-5.0.8': 0.9}   # stack: slowness
MODES = ['Send-Recv/complete', 'Ssend-Recv/complete']
RANGES = {'small': range(300, 4801, 300), 'large': range(200000, 2000001, 100000)}
MACHINE = {'arch': 'x86_64', 'cpu_model': 'Test CPU', 'cpus': 2, 'memory_bytes': 8 * 10 ** 9,
           'kernel': '6.1', 'virtualised': 'no', 'machine_type': 'x86_64-2cpu-bare',
           'machine_id': 'm-000000000001'}
GONE = ('openmpi-5.0.8', 'Ssend-Recv/complete', 'large')        # its output folder is gone


def pv(value, unit):
    return [value, 0, None, None, unit, 'pass']


def case(name, stack, **extra):
    return {'name': name, 'environ': stack.replace('.', '_'), 'stack_name': stack,
            'result': 'pass', 'system': 'testbed-local', 'partition': 'default',
            'fixture': False, 'library_version': f'Library {stack.split("-")[-1]}',
            'machine_record': json.dumps(MACHINE), **extra}


def p2p_case(tmp_path, stack, slow, mode, rng):
    factor = slow * (1.4 if mode.startswith('Ssend') else 1.0)
    rows = [(s, (0.25 + s / 8000) * factor) for s in RANGES[rng]]
    out = tmp_path / 'output' / f'{stack}-{mode.replace("/", "-")}-{rng}'
    if (stack, mode, rng) != GONE:
        out.mkdir(parents=True)
        lines = ['# {"stack": "%s"}' % stack, 'transport,size_bytes,samples,reps_per_sample,'
                 'min_us,median_us,mean_us,p95_us,cv,bandwidth_MBps,time_over_shm,'
                 'time_over_memcpy,checked_messages']
        for s, t in rows:
            for transport, tt in (('mpi', t), ('shm', t / 2), ('memcpy', t / 8)):
                lines.append(f'{transport},{s},15,100,{tt:.6g},{tt:.6g},{tt:.6g},{tt:.6g},0.01,'
                             f'{s / tt:.6g},2,8,30')
        (out / 'p2p_sizes.csv').write_text('\n'.join(lines) + '\n')
    lat = math.exp(sum(math.log(float(f'{t:.6g}')) for _, t in rows) / len(rows))
    return case(f'P2PMatrix %mode={mode} %size_range={rng}', stack, mode=mode, size_range=rng,
                outputdir=str(out), perfvalues={
                    'l:d:latency': pv(lat, 'us'), 'l:d:bandwidth': pv(2000 / lat, 'MB/s'),
                    'l:d:time_over_shm': pv(2.0 * slow, 'ratio'),
                    'l:d:time_over_memcpy': pv(8.0 * slow, 'ratio')},
                figure_samples={f'half_round_trip_us@{rng}': [lat * (1 + i / 100)
                                                              for i in range(10)]})


def synthetic(tmp_path):
    cases = []
    for stack, slow in STACKS.items():
        cases += [p2p_case(tmp_path, stack, slow, m, r) for m in MODES for r in RANGES]
        cases.append(case('PeerCompare', stack, perfvalues={
            f'l:d:{peer}_{size}B_{kind}': pv(v if kind == 'ratio' else
                                             v * slow * (size / 1000 + 1), 'us')
            for peer in ('imb', 'netpipe') for size in (8, 1048576)
            for kind, v in (('ours', 1.0), ('peer', 0.95), ('ratio', 1.05))}))
        for grid in ('1x1', '1x2'):
            cases.append(case(f'HplRun %grid={grid}', stack, grid=grid, num_tasks=int(grid[-1]),
                              perfvalues={f'l:d:gflops_N{n}': pv(n / 100 * int(grid[-1]) / slow,
                                                                 'Gflop/s')
                                          for n in (1800, 3600)} |
                              {f'l:d:efficiency_N{n}': pv(0.9 / slow, 'ratio')
                               for n in (1800, 3600)}))
        for ranks in (2, 4):
            cases.append(case(f'Su3Run %ranks={ranks} %comm=ssend', stack, preset=1,
                              num_tasks=ranks, comm='ssend', perfvalues={
                                  'l:d:s_per_traj': pv(0.02 * slow * ranks / 2, 's'),
                                  'l:d:comm_share': pv(0.05 * ranks, 'fraction')}))
        cases.append(case('StartupTime', stack, perfvalues={
            f'l:d:{w}_np{n}': pv(0.01 * n * slow + (w == 'exit') * 0.01, 's')
            for n in (2, 4, 8) for w in ('init', 'exit')}))
    report = {'session_info': {'uuid': 'feedface-0000-4000-8000-000000000001',
                               'time_start': '20261123T100000+0000'},
              'runs': [{'testcases': cases}]}
    path = tmp_path / 'sweep-mpich.json'
    path.write_text(json.dumps(report))
    return path


EXPECTED = ['r0-p2p-bw-Send-Recv-complete', 'r0-p2p-lat-Send-Recv-complete',
            'r0-p2p-bw-Ssend-Recv-complete', 'r0-p2p-lat-Ssend-Recv-complete',
            'r0-pairs-mpich-4-1-3', 'r0-pairs-openmpi-5-0-8', 'r0-raw-time_over_shm-small',
            'r0-raw-time_over_memcpy-large', 'r0-peers-8', 'r0-peers-1048576',
            'r0-hpl-gflops', 'r0-hpl-efficiency', 'r0-su3-s_per_traj', 'r0-su3-comm_share',
            'r0-startup-init', 'r0-startup-exit']
SERIES = [f'series-mpich-{f}' for f in ('p2p-lat', 'p2p-bw', 'p2p-shm', 'hpl', 'su3', 'startup')]


class Figures(HTMLParser):
    """{svg id: number of elements of class "data" inside it} of a rendered DOM."""

    def __init__(self):
        super().__init__()
        self.found, self.open = {}, None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == 'svg':
            self.open = attrs.get('id')
            self.found[self.open] = 0
        elif self.open and attrs.get('class') == 'data':
            self.found[self.open] += 1

    def handle_endtag(self, tag):
        if tag == 'svg':
            self.open = None


def rendered(page):
    text, errors = browser.dom(page)
    assert not errors, f'console errors on {page}: {errors}'
    parser = Figures()
    parser.feed(text)
    return text, parser.found


def test_report_in_chromium(tmp_path):
    try:
        browser.executable()
    except browser.BrowserMissing as err:
        pytest.fail(str(err))
    started = time.monotonic()
    out = tmp_path / 'report'
    build([synthetic(tmp_path)], out)
    text, figs = rendered(out / 'index.html')
    for fid in EXPECTED:
        assert figs.get(fid), f'figure {fid} missing or empty in the rendered page'
    # the case whose output folder is gone is named, not drawn
    assert 'Ssend-Recv/complete large: output directory' in text and 'is gone' in text
    assert 'Library 4.2.0' in text and 'feedface-0000-4000-8000-000000000001' in text
    text, figs = rendered(out / 'series.html')
    for fid in SERIES:
        assert figs.get(fid), f'version series figure {fid} missing or empty'
    assert 'openmpi' not in [k.split('-')[1] for k in figs]      # one release: no series
    for page, png in (('index.html', 'first-screen.png'), ('series.html', 'series.png')):
        assert not browser.screenshot(out / page, out / png)
        assert not browser.png_is_blank(out / png), f'{png} is blank'
    assert time.monotonic() - started < 30


def test_console_errors_are_caught(tmp_path):
    try:
        browser.executable()
    except browser.BrowserMissing as err:
        pytest.fail(str(err))
    page = tmp_path / 'bad.html'
    page.write_text('<html><body><script>throw new Error("report broke")</script></body></html>')
    _, errors = browser.dom(page)
    assert any('report broke' in e for e in errors)


def fake_compare(monkeypatch, fn):
    module = types.ModuleType('testbed.compare')
    module.compare = fn
    monkeypatch.setitem(sys.modules, 'testbed.compare', module)


def test_series_marks_from_compare(tmp_path, monkeypatch):
    def compare(a, b, stack_a=None, stack_b=None):
        return [{'test': 'P2PMatrix %mode=Send-Recv/complete %size_range=small', 'figure':
                 'half_round_trip_us@small', 'stack_a': stack_a, 'stack_b': stack_b,
                 'ratio': 1.3, 'lo': 1.2, 'hi': 1.4, 'verdict': 'slower'}]
    fake_compare(monkeypatch, compare)
    page = (build([synthetic(tmp_path)], tmp_path / 'r').parent / 'series.html').read_text()
    assert '1 slower' in page and '4.1.3 to 4.2.0' in page


def test_series_says_when_compare_fails(tmp_path, monkeypatch):
    def compare(a, b, stack_a=None, stack_b=None):
        raise KeyError('figure_samples')
    fake_compare(monkeypatch, compare)
    page = (build([synthetic(tmp_path)], tmp_path / 'r').parent / 'series.html').read_text()
    assert 'No marks where testbed.compare raised' in page and 'slower</text>' not in page


def test_bad_input_names_file_and_field(tmp_path):
    bad = tmp_path / 'bad.json'
    bad.write_text('{"runs": [')
    with pytest.raises(ReportError, match='bad.json: cannot read run report'):
        build([bad], tmp_path / 'r')
    bad.write_text(json.dumps({'session_info': {}, 'runs': [{'testcases': [{'name': 'x'}]}]}))
    with pytest.raises(ReportError, match=r'bad.json: runs\[0\].testcases\[0\]: missing field '
                                          '"environ"'):
        build([bad], tmp_path / 'r')


def test_a_run_without_machine_record_names_reframes_host():
    from testbed.report import page
    from testbed.report.data import Run
    run = Run(path=None, report={'session_info': {'hostname': 'node7'}}, session='abcdef12',
              time_start='2026-11-29 12:00 UTC', machine={}, cases=[])
    assert 'host node7 (no machine record in the report)' in page.svg_stamp(run)
    assert page.machine_text(run) == 'host node7 (no machine record in the report)'
    bare = Run(path=None, report={}, session='x', time_start='', machine={}, cases=[])
    assert page.svg_stamp(bare).endswith('machine not recorded in the report')


def test_heat_map_colours_the_worse_side_red_for_rates_and_times():
    from testbed.report import svg
    values = {('a', 'x'): 2.0, ('b', 'x'): 0.5}
    times = svg.heat_map('t', 't', ['a', 'b'], ['x'], values, 's', 'x', 'y')
    rates = svg.heat_map('r', 'r', ['a', 'b'], ['x'], values, 's', 'x', 'y',
                         higher_is_better=True)
    red, blue = 'rgb(255,63,63)', 'rgb(63,63,255)'
    assert times.index(red) < times.index(blue)        # the slower time (2.0) red, first row
    assert rates.index(blue) < rates.index(red)        # the higher rate (2.0) blue
