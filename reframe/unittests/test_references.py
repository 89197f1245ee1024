"""Reference files: bad files are refused with file, line and field; derivation follows the rule;
no shipped reference accepts a 2x change; lookups take ratios by machine type, absolute figures
by machine id."""
import json
import math
import subprocess
from pathlib import Path

import pytest

from testbed import references

HEADER = 'system,partition,machine,stack,test,case,variable,value,lower,upper,unit,runs\n'
ROW = ('testbed-local,default,m-1,mpich-4.0,P2PMatrix,Send-Recv/complete/small/warm,latency,'
       '{v},-0.2,{u},us,s1\n')
RATIO = ('testbed-local,default,x86_64-2cpu-vm,mpich-4.0,P2PMatrix,'
         'Send-Recv/complete/small/warm,time_over_shm,4.2,-0.1,0.11,ratio,s1\n')
MACHINE = {'machine_type': 'x86_64-2cpu-vm', 'machine_id': 'm-1'}
SHIPPED = Path(references.__file__).resolve().parents[1] / 'references'


def write(tmp_path, text):
    path = tmp_path / 'p2p.csv'
    path.write_text(text)
    return path


def test_lookup_takes_ratios_by_type_and_absolute_figures_by_machine(tmp_path):
    path = write(tmp_path, '# comment\n' + HEADER + ROW.format(v='1.5', u='0.25') + RATIO)
    case = ('testbed-local', 'default')
    ref, missing_p, missing_a = references.for_test(
        path, *case, MACHINE, 'mpich-4.0', 'P2PMatrix', 'Send-Recv/complete/small/warm',
        ['latency', 'bandwidth', 'time_over_shm', 'time_over_memcpy'],
        ['time_over_shm', 'time_over_memcpy'])
    assert ref == {'testbed-local:default': {'latency': (1.5, -0.2, 0.25, 'us'),
                                             'time_over_shm': (4.2, -0.1, 0.11, 'ratio')}}
    assert missing_p == ['time_over_memcpy'] and missing_a == ['bandwidth']
    # Another machine of the same type: the ratio travels, the absolute figure does not.
    other = dict(MACHINE, machine_id='m-2')
    ref, _, missing_a = references.for_test(
        path, *case, other, 'mpich-4.0', 'P2PMatrix', 'Send-Recv/complete/small/warm',
        ['latency', 'time_over_shm'], ['time_over_shm'])
    assert list(ref['testbed-local:default']) == ['time_over_shm'] and missing_a == ['latency']


def test_a_machines_own_row_of_a_ratio_comes_before_its_types(tmp_path):
    # make references on m-1 wrote an own row of the ratio beside the type's: m-1 asserts its
    # own (its band from its own spread), any other machine of the type the one that travels
    own = RATIO.replace('x86_64-2cpu-vm', 'm-1').replace('4.2,-0.1,0.11', '4.5,-0.05,0.05')
    path = write(tmp_path, HEADER + RATIO + own)
    look = ('testbed-local', 'default')
    args = ('mpich-4.0', 'P2PMatrix', 'Send-Recv/complete/small/warm')
    ref, missing_p, _ = references.for_test(path, *look, MACHINE, *args, ['time_over_shm'],
                                            ['time_over_shm'])
    assert ref['testbed-local:default'] == {'time_over_shm': (4.5, -0.05, 0.05, 'ratio')}
    assert not missing_p
    ref, _, _ = references.for_test(path, *look, dict(MACHINE, machine_id='m-2'), *args,
                                    ['time_over_shm'], ['time_over_shm'])
    assert ref['testbed-local:default'] == {'time_over_shm': (4.2, -0.1, 0.11, 'ratio')}


@pytest.mark.parametrize('text, where', [
    (HEADER + ROW.format(v='fast', u='0.3'), "line 2: field value: 'fast' is not a number"),
    (HEADER + ROW.format(v='1.5', u='-0.3'), 'line 2: field upper: -0.3 is negative'),
    (HEADER + ROW.format(v='-1', u='0.3'), 'line 2: field value: -1.0 is not positive'),
    (HEADER + ROW.format(v='1.5', u='0.3').replace(',s1', ''), 'line 2: 11 fields, expected 12'),
    (HEADER.replace('value', 'val') + ROW.format(v='1', u='0.1'), 'line 1: header is'),
    (HEADER + ROW.format(v='1', u='0.1') * 2, 'line 3: duplicate row'),
    (HEADER + ROW.format(v='nan', u='0.1'), "field value: 'nan' is not finite"),
    (HEADER + ROW.format(v='1', u='1.0'), 'field upper: 1.0 accepts a 2x rise'),
    (HEADER + ROW.format(v='1', u='0.1').replace('-0.2', '-0.5'), 'field lower: -0.5 accepts a 2x drop'),
    ('', 'no header line'),
])
def test_malformed_file_names_file_line_and_field(tmp_path, text, where):
    path = write(tmp_path, text)
    with pytest.raises(references.ReferenceError) as err:
        references.load(path)
    assert str(err.value).startswith(f'{path}: ') and where in str(err.value)


@pytest.mark.parametrize('path', sorted(SHIPPED.glob('*.csv')), ids=lambda p: p.name)
def test_no_shipped_reference_accepts_a_2x_change(path, tmp_path):
    # load() refuses such a row; this says it for every file the repository ships.
    for key, ref in references.load(path).items():
        assert 1 + ref.upper < 2 and 1 + ref.lower > 0.5, key
    # The committed rows are the portable ones: ratios to same-job baselines, keyed by a
    # machine type. A machine's own rows (make references) may sit in a working copy, never in
    # a commit: read the file as the checkout's commit has it.
    rel = path.relative_to(SHIPPED.parents[1])
    shown = subprocess.run(['git', '-C', str(SHIPPED), 'show', f'HEAD:{rel}'],
                           capture_output=True, text=True)
    if shown.returncode != 0:
        pytest.skip(f'{rel}: not in a git commit here ({shown.stderr.strip()})')
    committed = tmp_path / path.name
    committed.write_text(shown.stdout)
    for key, ref in references.load(committed).items():
        assert ref.unit == 'ratio' and references.MACHINE_TYPE.fullmatch(key[2]), \
            f'{path.name}: {key}: a row of one machine is committed (make references rows ' \
            f'stay on their machine)'


def fake_report(tmp_path, name, uuid, values, result='pass', phase=None):
    tcs = [{'name': f'Su3Run %case={case}', 'environ': 'mpich-4_0',
            'stack_name': 'mpich-4.0', 'reference_case': case, 'reference_file': 'p2p.csv',
            'machine_type': 'x86_64-2cpu-vm', 'machine_id': 'm-1', 'result': result,
            'fail_phase': phase,
            'perfvalues': {'testbed-local:default:time_over_shm':
                           [v, 0, None, None, 'ratio', 'pass'],
                           'testbed-local:default:latency': [v, 0, None, None, 'us', 'pass']}}
           for case, v in values.items()]
    path = tmp_path / name
    path.write_text(json.dumps({'session_info': {'uuid': uuid}, 'runs': [{'testcases': tcs}]}))
    return path


def test_derive_median_and_log_space_tolerance_per_variable(tmp_path):
    reports = [fake_report(tmp_path, f'r{i}.json', f's{i}', {'quiet': v, 'noisy': n})
               for i, (v, n) in enumerate([(1.0, 1.0), (1.02, 1.5), (0.99, 1.0)])]
    rows, left_out = references.derive(reports, k=3)
    by = {(r['machine'], r['case'], r['variable']): r for r in rows}
    quiet = by[('x86_64-2cpu-vm', 'quiet', 'time_over_shm')]   # a ratio travels: by type
    assert ('x86_64-2cpu-vm', 'quiet', 'latency') not in by   # absolute: this machine only
    # every figure gets this machine's own row; a travelling ratio's own row has the same
    # value and band (the noise the floor covers is the machine's own), and so has an
    # absolute figure of one case (only P2PStack's median over the modes gets W_MIN: below)
    own = by[('m-1', 'quiet', 'time_over_shm')]
    assert (own['value'], own['upper']) == (quiet['value'], quiet['upper'])
    latency = by[('m-1', 'quiet', 'latency')]
    assert latency['unit'] == 'us'
    assert float(quiet['value']) == pytest.approx(1.0)
    logs = [math.log(v) for v in (1.0, 1.02, 0.99)]
    sd = (sum((x - sum(logs) / 3) ** 2 for x in logs) / 2) ** 0.5
    w = max(3 * sd, 1.5 * math.log(1.02), references.W_MIN_PORTABLE)   # it travels
    assert float(quiet['upper']) == pytest.approx(math.exp(w) - 1, abs=1e-4)
    assert float(quiet['lower']) == pytest.approx(math.exp(-w) - 1, abs=1e-4)
    assert float(latency['upper']) == pytest.approx(math.exp(w) - 1, abs=1e-4)
    # Not pooled: the noisy case's spread does not widen the quiet one, and its own band
    # (it moved 1.5x) would accept 2x, so it is left out and said, not written wide.
    assert not any(k[1:] == ('noisy', 'time_over_shm') for k in by)
    assert any(k[5] == 'noisy' and 'spread too wide' in why for k, why in left_out)
    out = tmp_path / 'refs.csv'
    references.write(out, rows)
    assert len(references.load(out)) == len(rows)


def test_derive_writes_no_row_for_a_figure_its_test_never_looks_up(tmp_path):
    # su3's `speedup` is reported, never looked up: a row for it would never be asserted
    reports = []
    for i in range(3):
        path = fake_report(tmp_path, f'r{i}.json', f's{i}', {'c': 1.0})
        report = json.loads(path.read_text())
        for tc in report['runs'][0]['testcases']:
            tc['looked_up_variables'] = ['latency']
        path.write_text(json.dumps(report))
        reports.append(path)
    rows, _ = references.derive(reports)
    assert {r['variable'] for r in rows} == {'latency'}


def test_update_only_absolute_writes_this_machines_own_rows_of_every_figure(tmp_path):
    # make references (KIND=absolute): rows keyed by this machine's id only, ratios included
    refs = tmp_path / 'refs'
    refs.mkdir()
    reports = [fake_report(tmp_path, f'r{i}.json', f's{i}', {'c': v})
               for i, v in enumerate([1.0, 1.01, 0.99])]
    assert references.main(['update', '--only', 'absolute', '--dir', str(refs),
                            *map(str, reports)]) == 0
    table = references.load(refs / 'p2p.csv')
    assert {(k[2], k[6]) for k in table} == {('m-1', 'latency'), ('m-1', 'time_over_shm')}
    assert all(ref.upper == pytest.approx(math.exp(references.W_MIN_PORTABLE) - 1, abs=1e-4)
               for ref in table.values())


def test_derive_ignores_broken_runs_and_needs_three(tmp_path):
    reports = [fake_report(tmp_path, f'r{i}.json', f's{i}', {'c': 1.0}) for i in range(2)]
    with pytest.raises(references.ReferenceError, match='at least 3 run reports'):
        references.derive(reports)
    reports.append(fake_report(tmp_path, 'f.json', 'sf', {'c': 1.0}, result='fail',
                               phase='sanity'))
    rows, left_out = references.derive(reports)
    assert not rows and all('fewer than 3' in why for _, why in left_out)


def made_rows(tmp_path, cases):
    """A folder of references made by `update` from three runs of the same figures: (folder,
    its p2p.csv as loaded, the run reports)."""
    refs = tmp_path / 'refs'
    refs.mkdir()
    old = [fake_report(tmp_path, f'o{i}.json', f'o{i}', cases) for i in range(3)]
    assert references.main(['update', '--dir', str(refs), *map(str, old)]) == 0
    return refs, references.load(refs / 'p2p.csv'), old


def test_update_of_one_variable_writes_its_rows_and_keeps_the_others(tmp_path):
    # A new figure gets rows from its runs without remaking the rows beside it.
    refs, before, _ = made_rows(tmp_path, {'c': 1.0})
    new = [fake_report(tmp_path, f'n{i}.json', f'n{i}', {'c': v})
           for i, v in enumerate([1.1, 1.12, 1.11])]
    assert references.main(['update', '--dir', str(refs), '--variable', 'latency',
                            *map(str, new)]) == 0
    after = references.load(refs / 'p2p.csv')
    assert set(after) == set(before)
    for key, row in after.items():
        changed = key[-1] == 'latency'
        assert (row.value == pytest.approx(1.11)) == changed
        assert (row.value == pytest.approx(1.0)) != changed


def test_update_can_drop_the_rows_of_a_figure_new_runs_spread_too_wide(tmp_path):
    # Rows made in one steady hour; runs in another state of the machine move the figure so
    # far that no band under 2x holds both: with --drop-too-wide its rows go, the rest stay.
    refs, before, old = made_rows(tmp_path, {'c': 1.0, 'd': 1.0})
    new = [fake_report(tmp_path, f'n{i}.json', f'n{i}', {'c': v, 'd': 1.0})
           for i, v in enumerate([1.9, 2.0])]
    args = ['update', '--dir', str(refs), '--variable', 'time_over_shm', *map(str, old + new)]
    assert references.main(args) == 0                 # without the option: kept as it was
    assert set(references.load(refs / 'p2p.csv')) == set(before)
    # --only absolute drops this machine's own row and leaves the type's, which travels
    assert references.main(args[:1] + ['--drop-too-wide', '--only', 'absolute'] + args[1:]) == 0
    mid = references.load(refs / 'p2p.csv')
    assert set(before) - set(mid) == {('testbed-local', 'default', 'm-1', 'mpich-4.0', 'Su3Run',
                                       'c', 'time_over_shm')}
    assert references.main(args[:1] + ['--drop-too-wide'] + args[1:]) == 0
    after = references.load(refs / 'p2p.csv')
    gone = set(before) - set(after)
    assert {k[2] for k in gone} == {'m-1', 'x86_64-2cpu-vm'}
    assert all(k[5] == 'c' and k[6] == 'time_over_shm' for k in gone)
    assert set(after) == set(before) - gone


def test_retire_removes_one_figure_of_one_test_and_nothing_else(tmp_path):
    # A figure its test stops asserting (it stays reported) loses its rows through the tool,
    # so the files stay written by it; a name with no row is an error, not a silent success.
    refs, before, _ = made_rows(tmp_path, {'c': 1.0, 'd': 1.0})
    assert references.main(['retire', '--dir', str(refs), '--test', 'Su3Run',
                            '--variable', 'time_over_shm']) == 0
    after = references.load(refs / 'p2p.csv')
    assert set(after) == {k for k in before if k[6] != 'time_over_shm'} and after
    assert references.main(['retire', '--dir', str(refs), '--test', 'Su3Run',
                            '--variable', 'time_over_shm']) == 2
    assert references.main(['retire', '--dir', str(refs), '--test', 'HplRun',
                            '--variable', 'latency']) == 2
    assert set(references.load(refs / 'p2p.csv')) == set(after)


def test_a_figure_that_missed_its_reference_still_counts(tmp_path):
    # A clean run whose figure missed is how the band learns the machine's real spread.
    reports = [fake_report(tmp_path, f'r{i}.json', f's{i}', {'c': v})
               for i, v in enumerate([1.0, 1.01])]
    reports.append(fake_report(tmp_path, 'm.json', 'sm', {'c': 1.2}, result='fail',
                               phase='performance'))
    rows, _ = references.derive(reports)
    assert all(r['runs'] == 's0 s1 sm' for r in rows)
    assert float(rows[0]['upper']) > 0.2


def test_a_figure_that_did_not_hold_makes_no_row(tmp_path):
    """A figure whose same-job baseline moved (the test's not_held) was not judged, and
    neither derive nor transfer takes it: HPL's efficiency in a job whose DGEMM baselines
    read 72.2, 58.8 and 63.6 Gflop/s is no reading of the machine."""
    reports = [fake_report(tmp_path, f'r{i}.json', f's{i}', {'c': v})
               for i, v in enumerate([1.0, 1.01, 0.99])]
    moved = json.loads(reports[2].read_text())
    moved['runs'][0]['testcases'][0]['not_held'] = {'time_over_shm': 'baselines moved'}
    moved['runs'][0]['testcases'][0]['perfvalues']['testbed-local:default:time_over_shm'][0] = 3.0
    reports[2].write_text(json.dumps(moved))
    rows, _ = references.derive(reports, min_runs=2)
    ratio = [r for r in rows if r['variable'] == 'time_over_shm']
    assert ratio and all(r['runs'] == 's0 s1' for r in ratio)
    assert all(r['runs'] == 's0 s1 s2' for r in rows if r['variable'] == 'latency')


def test_p2p_modes_are_asserted_through_their_median(tmp_path):
    """Reports of P2PMatrix only (no P2PStack yet): the twelve modes of a stack and range make
    one P2PStack figure, their median; P2PMatrix itself gets no row."""
    def report(name, uuid, shift):
        tcs = []
        for i in range(references.P2P_MODES):
            v = 2.0 + 0.1 * i + (5.0 if i == 0 else 0.0) * shift  # one mode jumps in one run
            tcs.append({'name': f'P2PMatrix %mode=m{i} %size_range=small', 'environ': 'e',
                        'stack_name': 's', 'size_range': 'small', 'cache': 'warm',
                        'reference_case': f'm{i}/small/warm', 'reference_file': 'p2p.csv',
                        'machine_type': 't', 'machine_id': 'm-1', 'result': 'pass',
                        'perfvalues': {'x:y:time_over_shm': [v, 0, None, None, 'ratio', 'pass']}})
        path = tmp_path / name
        path.write_text(json.dumps({'session_info': {'uuid': uuid}, 'runs': [{'testcases': tcs}]}))
        return path
    rows, _ = references.derive([report('a', 'a', 0), report('b', 'b', 1), report('c', 'c', 0)])
    assert [(r['test'], r['case']) for r in rows] == [('P2PStack', 'small/warm')]
    assert rows[0]['machine'] == 'm-1'      # P2PStack's ratios do not travel: this machine's
    # The median of 2.0, 2.1, ..., 3.1 is 2.55; the run where one mode jumps 3.5x moves it by
    # one rank only (2.65), so the band stays under 10 % instead of covering the jump.
    assert float(rows[0]['value']) == pytest.approx(2.55)
    assert 0 < float(rows[0]['upper']) < 0.10     # P2PStack's own rows: the W_MIN floor


def test_between_nodes_over_a_shaped_link_p2p_matrix_asserts_its_ratios_to_raw_tcp(tmp_path):
    """On the cluster P2PMatrix declares its ratio to busy-poll raw TCP (portable: keyed by
    machine type and partition, the link profile in its name; the ratio to blocking TCP is
    reported only), and makes no P2PStack figure; on the
    native profile, where the VM's state sets the ratio, it declares none (nor did reports
    made before it declared any)."""
    def report(name, v):
        tcs = [{'name': 'P2PMatrix %mode=Send-Recv/complete %size_range=quick', 'environ': 'e',
                'stack_name': 's', 'size_range': 'quick', 'cache': 'warm',
                'system': 'testbed-cluster', 'partition': part,
                'reference_case': 'Send-Recv/complete/quick/warm',
                'reference_file': 'p2p.csv', 'machine_type': 't', 'machine_id': 'm-1',
                'result': 'pass', 'portable_variables': declared,
                'perfvalues': {f'testbed-cluster:{part}:{var}': [v, 0, None, None, unit, 'pass']
                               for var, unit in (('time_over_tcp_poll', 'ratio'),
                                                 ('time_over_tcp', 'ratio'), ('latency', 'us'))}}
               for part, declared in (('mtu1500_gige', ['time_over_tcp_poll']),
                                      ('mtu1500_10gige', []),   # an older report
                                      ('mtu1500_native', []))]
        path = tmp_path / name
        path.write_text(json.dumps({'session_info': {'uuid': name}, 'runs': [{'testcases': tcs}]}))
        return path
    rows, _ = references.derive([report('a', 0.80), report('b', 0.81), report('c', 0.79)])
    got = sorted((r['partition'], r['test'], r['machine'], r['variable']) for r in rows)
    # each also gets this machine's own row (m-1), asserted there before the type's
    assert got == [('mtu1500_10gige', 'P2PMatrix', machine, 'time_over_tcp_poll')
                   for machine in ('m-1', 't')] + \
        [('mtu1500_gige', 'P2PMatrix', machine, 'time_over_tcp_poll') for machine in ('m-1', 't')]
    assert all(float(r['value']) == pytest.approx(0.80) for r in rows)


def test_transfer_widens_a_travelling_row_to_another_machine_and_never_narrows(tmp_path):
    """`transfer`: runs on a second machine of the type keep each row's value and widen its
    band by the same rule as between runs (1.5 x the farthest new figure, in log space), on
    the side where the figures fall only; a row they fall inside is unchanged, one they would
    stretch to 2x is left as it was."""
    refs = tmp_path / 'p2p.csv'
    refs.write_text(references.HEADER_COMMENT + ','.join(references.FIELDS) + '\n' + ''.join(
        f'testbed-local,default,x86_64-2cpu-vm,mpich-4.0,Su3Run,{case},speedup,1.0,'
        f'-0.1393,0.1618,ratio,s0\n' for case in ('near', 'far', 'low', 'wild')))

    def report(name, values):
        tcs = [{'name': f'Su3Run %case={case}', 'environ': 'mpich-4_0', 'stack_name': 'mpich-4.0',
                'reference_case': case, 'reference_file': 'p2p.csv', 'result': 'pass',
                'machine_type': 'x86_64-2cpu-vm', 'machine_id': 'm-2',
                'portable_variables': ['speedup'],
                'perfvalues': {'testbed-local:default:speedup': [v, 0, None, None, 'ratio', 'pass']}}
               for case, v in values.items()]
        path = tmp_path / name
        path.write_text(json.dumps({'session_info': {'uuid': name}, 'runs': [{'testcases': tcs}]}))
        return path
    table = references.load(refs)
    changed, lines, refused = references.transfer(
        table, [report('m2a', {'near': 1.05, 'far': 1.155, 'low': 0.85, 'wild': 1.6}),
                report('m2b', {'near': 0.97, 'far': 1.10, 'low': 1.02, 'wild': 1.0})])
    by = {row['case']: row for row in changed}
    assert set(by) == {'far', 'low'} and [k[5] for k in refused] == ['wild']
    w = 1.5 * math.log(1.155)
    assert float(by['far']['value']) == pytest.approx(1.0)          # the value is kept
    assert float(by['far']['upper']) == pytest.approx(math.exp(w) - 1, abs=1e-4)
    assert float(by['far']['lower']) == pytest.approx(-0.1393)      # nothing fell below
    assert by['far']['runs'] == 's0 m2a m2b'
    w = 1.5 * math.log(1 / 0.85)
    assert float(by['low']['lower']) == pytest.approx(math.exp(-w) - 1, abs=1e-4)
    assert float(by['low']['upper']) == pytest.approx(0.1618)       # 1.02 is inside
    assert any('near' in line and 'unchanged' in line for line in lines)
    # --variable: a figure not named is left out, whatever its runs say
    assert references.transfer(table, [report('m2c', {'far': 1.155})], ['efficiency_N7200']) \
        == ([], [], [])
    references.write(refs, changed, table)
    again = references.load(refs)
    assert again[('testbed-local', 'default', 'x86_64-2cpu-vm', 'mpich-4.0', 'Su3Run', 'near',
                  'speedup')].upper == pytest.approx(0.1618)


def test_status_names_the_ratios_only_other_machine_types_have(tmp_path):
    # A figure with rows for one machine type is reported on another, and the run says so.
    rows = [dict(zip(references.KEY, ('testbed-local', 'default', mtype, 'mpich-4.0', test,
                                      '1x2', var)),
                 value='2.0', lower='-0.1393', upper='0.1618', unit='ratio', runs='s1 s2 s3')
            for mtype, test, var in [('x86_64-intel-2cpu-vm', 'HplRun', 'panel_over_memcpy'),
                                     ('x86_64-intel-2cpu-vm', 'HplRun', 'efficiency_N7200'),
                                     ('x86_64-amd-2cpu-vm', 'HplRun', 'efficiency_N7200'),
                                     ('m-0123456789ab', 'HplRun', 'gflops_N7200')]]
    references.write(tmp_path / 'hpl.csv', rows)
    machine = {'cpu_model': 'EPYC', 'cpus': 2, 'memory_bytes': 2**34, 'kernel': '6.1',
               'virtualised': 'kvm', 'machine_id': 'm-ffffffffffff'}
    amd = references.status(dict(machine, machine_type='x86_64-amd-2cpu-vm'), tmp_path)
    assert 'asserted): 1' in amd
    assert 'other machine types only, so reported here, not asserted: HplRun ' \
           'panel_over_memcpy' in amd and 'gflops' not in amd.splitlines()[-1]
    intel = references.status(dict(machine, machine_type='x86_64-intel-2cpu-vm'), tmp_path)
    assert 'other machine types only' not in intel


def test_status_counts_this_machines_own_rows_and_the_ratios_among_them(tmp_path):
    rows = [dict(zip(references.KEY, ('testbed-local', 'default', mid, 'mpich-4.0', 'HplRun',
                                      '1x2', var)),
                 value='2.0', lower='-0.0488', upper='0.0513', unit=unit, runs='s1 s2 s3')
            for mid, var, unit in [('m-ffffffffffff', 'panel_over_memcpy', 'ratio'),
                                   ('m-ffffffffffff', 'gflops_N7200', 'Gflop/s'),
                                   ('x86_64-intel-2cpu-vm', 'panel_over_memcpy', 'ratio')]]
    references.write(tmp_path / 'hpl.csv', rows)
    machine = {'cpu_model': 'EPYC', 'cpus': 2, 'memory_bytes': 2**34, 'kernel': '6.1',
               'virtualised': 'kvm', 'machine_id': 'm-ffffffffffff',
               'machine_type': 'x86_64-amd-2cpu-vm'}
    text = references.status(machine, tmp_path)
    assert "this machine's own references" in text and ': 2, 1 of them ratios' in text
    # its own row of the panels is asserted here: not among the figures reported only
    assert 'other machine types only' not in text


def test_own_rows_get_the_narrow_floor_only_for_the_figures_measured_to_hold_it():
    assert references.narrow_floor('P2PStack')
    assert not references.narrow_floor('HplRun')     # efficiency_N7200, panel_over_memcpy
    assert not references.narrow_floor('Su3Run')     # exchange_over_memcpy


def test_hpl_efficiency_gets_its_own_floor_travelling_and_own(tmp_path):
    assert references.floor_of('HplRun', 'efficiency_N7200', True) == 0.104
    assert references.floor_of('HplRun', 'efficiency_N7200', False) == 0.104
    assert references.floor_of('HplRun', 'panel_replay_over_cma', True) == \
        references.W_MIN_PORTABLE                  # another figure of the test: the shared floor
    assert references.floor_of('Su3Run', 'efficiency_N7200', True) == references.W_MIN_PORTABLE
    assert references.floor_of('P2PStack', 'latency', False) == references.W_MIN
    # derive() uses it: three runs within 1 % make HPL rows of -9.9 % / +11.0 %, the rest 15 %
    reports = []
    for i, v in enumerate([1.0, 1.005, 0.995]):
        path = fake_report(tmp_path, f'r{i}.json', f's{i}', {'1x2': v})
        report = json.loads(path.read_text())
        tc = report['runs'][0]['testcases'][0]
        tc['name'] = 'HplRun %grid=1x2'
        tc['perfvalues'] = {'testbed-local:default:efficiency_N7200': [v, 0, None, None,
                                                                      'ratio', 'pass'],
                            'testbed-local:default:panel_replay_over_cma': [v, 0, None, None,
                                                                           'ratio', 'pass']}
        path.write_text(json.dumps(report))
        reports.append(path)
    rows, _ = references.derive(reports)
    bands = {(r['machine'], r['variable']): (float(r['lower']), float(r['upper'])) for r in rows}
    lower, upper = math.exp(-0.104) - 1, math.exp(0.104) - 1
    for machine in ('x86_64-2cpu-vm', 'm-1'):
        assert bands[(machine, 'efficiency_N7200')] == (pytest.approx(lower, abs=1e-4),
                                                        pytest.approx(upper, abs=1e-4))
        assert bands[(machine, 'panel_replay_over_cma')][1] == \
            pytest.approx(math.exp(references.W_MIN_PORTABLE) - 1, abs=1e-4)
    # a 1.2x slower computation at the shared floor's edge (0.87x) is caught by its own floor
    assert 0.87 < 1 + bands[('x86_64-2cpu-vm', 'efficiency_N7200')][0] < 0.905


def _row(machine, var='efficiency_N7200', value='0.8'):
    return dict(zip(references.KEY, ('testbed-local', 'default', machine, 'mpich-4.0',
                                     'HplRun', '1x2', var)),
                value=value, lower='-0.0988', upper='0.1096', unit='ratio', runs='s1 s2 s3')


def test_a_sites_own_folder_is_read_after_the_shipped_one(tmp_path, monkeypatch):
    """TESTBED_REFERENCES_DIR keeps a site's rows out of the checkout: read beside the shipped
    files, its row of a key replaces the shipped one; a file there is a folder's or an error."""
    shipped, own = tmp_path / 'shipped', tmp_path / 'site'
    shipped.mkdir()
    own.mkdir()
    references.write(shipped / 'hpl.csv', [_row('x86_64-intel-2cpu-vm'), _row('m-1', 'gflops')])
    references.write(own / 'hpl.csv', [_row('x86_64-intel-2cpu-vm', value='0.9')])
    monkeypatch.delenv('TESTBED_REFERENCES_DIR', raising=False)
    assert references.files_of('hpl.csv', shipped) == [shipped / 'hpl.csv']
    monkeypatch.setenv('TESTBED_REFERENCES_DIR', str(own))
    paths = references.files_of('hpl.csv', shipped)
    assert paths == [shipped / 'hpl.csv', own / 'hpl.csv']
    ref, _, _ = references.for_test(paths, 'testbed-local', 'default',
                                    {'machine_type': 'x86_64-intel-2cpu-vm', 'machine_id': 'm-1'},
                                    'mpich-4.0', 'HplRun', '1x2', ['efficiency_N7200', 'gflops'],
                                    ['efficiency_N7200'])
    assert ref['testbed-local:default']['efficiency_N7200'][0] == 0.9
    assert ref['testbed-local:default']['gflops'][0] == 0.8
    assert references.files_of('p2p.csv', shipped) == [shipped / 'p2p.csv']
    monkeypatch.setenv('TESTBED_REFERENCES_DIR', str(shipped / 'hpl.csv'))
    with pytest.raises(references.ReferenceError, match='TESTBED_REFERENCES_DIR=.*not a folder'):
        references.files_of('hpl.csv', shipped)


def test_a_machine_without_rows_is_told_so_in_one_line(tmp_path, monkeypatch):
    monkeypatch.delenv('TESTBED_REFERENCES_DIR', raising=False)
    references.write(tmp_path / 'hpl.csv', [_row('x86_64-intel-2cpu-vm'), _row('m-7')])
    machine = {'cpu_model': 'M1', 'cpus': 8, 'memory_bytes': 2**34, 'kernel': '6.1',
               'virtualised': 'no', 'machine_id': 'm-9', 'machine_type': 'aarch64-8cpu-bare'}
    assert not references.has_rows(machine, tmp_path)
    last = references.status(machine, tmp_path).splitlines()[-1]
    assert last.startswith('notice: no reference rows for machine type aarch64-8cpu-bare') and \
        '`make references`' in last
    assert references.has_rows(dict(machine, machine_id='m-7'), tmp_path)
    assert references.has_rows(dict(machine, machine_type='x86_64-intel-2cpu-vm'), tmp_path)
    typed = references.status(dict(machine, machine_type='x86_64-intel-2cpu-vm'), tmp_path)
    assert typed.splitlines()[-1].startswith('notice: 1 rows of machine type')
