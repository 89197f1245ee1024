"""testbed.compare on synthetic run reports: it must call a uniform slowdown 'slower' (exit 1),
two draws of one machine 'same' (exit 0), keep one mode's burst from setting the exit status,
and name the file and field of bad input (exit 2). Seeded: nothing here is timed."""
import json
import math
import random

import pytest

from testbed import compare, rankstats

MODES = [f'{s}-{r}/complete' for s in ('Send', 'Isend', 'Ssend', 'Issend')
         for r in ('Recv', 'Irecv')] + ['Isend-Irecv/preposted', 'Send-Irecv/preposted',
                                        'Ssend-Irecv/preposted', 'Issend-Irecv/preposted']
SIZES = (8, 1024, 65536, 1048576)


def report(seed, factor=1.0, burst=None, n=15, stack='mpich-4.0'):
    """A run report of P2PMatrix cases: samples around a per-mode level with 2 % noise,
    every sample times `factor`; `burst` = (mode, size) tripled, as the VM's state does."""
    rng = random.Random(seed)
    cases = []
    for i, mode in enumerate(MODES):
        samples = {}
        for size in SIZES:
            level = (0.2 + size / 1e4) * (1 + 0.1 * i)
            scale = factor * (3 if burst == (mode, size) else 1)
            samples[f'half_round_trip_us@{size}'] = [
                level * scale * rng.lognormvariate(0, 0.02) for _ in range(n)]
        cases.append({'name': f'P2PMatrix %mode={mode} %size_range=quick', 'result': 'pass',
                      'stack_name': stack, 'environ': stack.replace('.', '_'),
                      'figure_samples': samples})
    return {'session_info': {'uuid': f'seed-{seed}'}, 'runs': [{'testcases': cases}]}


def run_main(tmp_path, a, b, *opts):
    pa, pb = tmp_path / 'a.json', tmp_path / 'b.json'
    pa.write_text(json.dumps(a))
    pb.write_text(json.dumps(b))
    return compare.main([str(pa), str(pb), *opts])


def test_two_draws_of_one_machine_are_the_same(tmp_path, capsys):
    assert run_main(tmp_path, report(1), report(2)) == 0
    assert '0 slower' in capsys.readouterr().out


def test_a_uniform_10_percent_slowdown_is_slower(tmp_path, capsys):
    assert run_main(tmp_path, report(1), report(2, factor=1.10)) == 1
    rows = compare.compare(report(1), report(2, factor=1.10))
    fams, _ = compare.families(rows, 0.05, 0.95)
    assert len(fams) == len(SIZES) and all(f['verdict'] == 'slower' for f in fams)
    assert all(1.08 < f['ratio'] < 1.12 for f in fams)
    # ... and below the threshold it is not a regression
    assert run_main(tmp_path, report(1), report(2, factor=1.03)) == 0


def test_faster_is_not_a_failure(tmp_path):
    assert run_main(tmp_path, report(1), report(2, factor=0.8)) == 0
    fams, _ = compare.families(compare.compare(report(1), report(2, factor=0.8)), 0.05, 0.95)
    assert all(f['verdict'] == 'faster' for f in fams)


def test_one_mode_burst_does_not_set_the_exit_status(tmp_path, capsys):
    b = report(2, burst=('Ssend-Recv/complete', 8))
    assert run_main(tmp_path, report(1), b) == 0
    out = capsys.readouterr().out
    assert 'Ssend-Recv/complete' in out and 'slower' in out      # listed, not decisive


def test_two_stacks_of_one_session(tmp_path):
    a = report(1)
    a['runs'][0]['testcases'] += report(2, factor=1.2, stack='mpich-5.0')['runs'][0]['testcases']
    rows = compare.compare(a, a, 'mpich-4.0', 'mpich-5.0')
    assert len(rows) == len(MODES) * len(SIZES)
    assert run_main(tmp_path, a, a, '--stack-a', 'mpich-4.0', '--stack-b', 'mpich-5.0') == 1


def hpl(seed, factor):
    """One HPL session: one factorisation time per N, as HplRun records it."""
    rng = random.Random(seed)
    return {'runs': [{'testcases': [{
        'name': 'HplRun %grid=1x2', 'result': 'pass', 'stack_name': 'mpich-4.0',
        'figure_samples': {'time_s@N7200': [9.0 * factor * rng.lognormvariate(0, 0.01)]}}]}]}


def test_sessions_pooled_give_hpl_its_samples(tmp_path, capsys):
    paths = []
    for i, factor in enumerate([1.0] * 4 + [1.2] * 4 + [1.0] * 4):
        path = tmp_path / f's{i}.json'
        path.write_text(json.dumps(hpl(i, factor)))
        paths.append(str(path))
    # one session a side: one sample, not judged; nothing decides, said with exit 0
    assert compare.main([paths[0], paths[4]]) == 0
    assert '1 too few samples' in capsys.readouterr().out
    # three a side cannot reach 95 % (2 / C(6, 3) = 10 %): said, with what it needs
    assert compare.main([','.join(paths[:3]), ','.join(paths[4:7])]) == 0
    assert 'too few samples (3, needs 4)' in capsys.readouterr().out
    # four a side: 20 % slower caught; four clean against four clean: not
    assert compare.main([','.join(paths[:4]), ','.join(paths[4:8])]) == 1
    capsys.readouterr()
    assert compare.main([','.join(paths[:4]), ','.join(paths[8:])]) == 0
    assert '1 same' in capsys.readouterr().out


def test_too_few_samples_are_not_judged(tmp_path):
    rows = compare.compare(report(1, n=2), report(2, n=2))
    assert {r['verdict'] for r in rows} == {compare.TOO_FEW}


@pytest.mark.parametrize('figures, needs', [(1, 4), (6, 5), (48, 7), (500, 9)])
def test_samples_needed_follow_the_corrected_level(figures, needs):
    """The fewest samples whose narrowest interval excludes 0 by chance rarely enough: exact,
    2 / C(2n, n) against 5 % over the figures."""
    assert compare.samples_needed(0.05 / figures) == needs
    n = needs
    assert 2 / math.comb(2 * n, n) <= 0.05 / figures < 2 / math.comb(2 * n - 2, n - 1)


def test_identical_distributions_raise_few_false_alarms_at_the_fewest_samples():
    """Simulated: both sides drawn from one distribution with as few samples as allowed; the
    share of figures called slower or faster stays under the stated 5 %."""
    rng = random.Random(7)
    n = compare.samples_needed(0.05)
    wrong = 0
    for _ in range(2000):
        a = [rng.lognormvariate(0, 0.15) for _ in range(n)]
        b = [rng.lognormvariate(0, 0.15) for _ in range(n)]
        _, lo, hi = compare.shift_interval(a, b, 0.95)
        wrong += lo > 0 or hi < 0
    assert wrong / 2000 <= 0.05


def test_the_exact_interval_agrees_with_the_count_of_arrangements():
    import itertools
    n, m = 4, 3
    counts = [0] * (n * m + 1)
    for pos in itertools.combinations(range(n + m), n):
        counts[sum(1 for x in pos for y in range(n + m) if y not in pos and y < x)] += 1
    cdf = list(itertools.accumulate(c / math.comb(n + m, n) for c in counts))
    assert rankstats.u_cdf(n, m) == pytest.approx(cdf)


def test_a_figure_in_no_family_is_judged_alone(tmp_path):
    def su3(seed, factor):
        rng = random.Random(seed)
        return {'runs': [{'testcases': [{
            'name': 'Su3Run %ranks=2 %comm=isend', 'result': 'pass', 'stack_name': 'lam-7.1',
            'figure_samples': {'s_per_traj': [0.5 * factor * rng.lognormvariate(0, 0.01)
                                              for _ in range(10)]}}]}]}
    assert run_main(tmp_path, su3(1, 1.0), su3(2, 1.0)) == 0
    assert run_main(tmp_path, su3(1, 1.0), su3(2, 1.15)) == 1


def test_failed_cases_carry_no_figures_unless_only_a_reference_was_missed(tmp_path):
    b = report(2, factor=2.0)
    for case in b['runs'][0]['testcases']:
        case['result'], case['fail_phase'] = 'fail', 'sanity'
    assert run_main(tmp_path, report(1), b) == 2          # nothing in common: said, exit 2
    for case in b['runs'][0]['testcases']:
        case['fail_phase'] = 'performance'
    assert run_main(tmp_path, report(1), b) == 1


@pytest.mark.parametrize('mangle, message', [
    (lambda r: r.pop('runs'), 'no runs[-1].testcases'),
    (lambda r: r['runs'][0]['testcases'][3]['figure_samples'].update(
        {'half_round_trip_us@8': [1.0, 'x', 2.0]}),
     "testcases[3] (P2PMatrix %mode=Isend-Irecv/complete %size_range=quick): "
     "figure_samples.half_round_trip_us@8: expected a list of positive numbers"),
])
def test_bad_input_names_file_and_field(tmp_path, capsys, mangle, message):
    b = report(2)
    mangle(b)
    assert run_main(tmp_path, report(1), b) == 2
    err = capsys.readouterr().err
    assert str(tmp_path / 'b.json') in err and message in err


def test_unreadable_file_and_unknown_session(tmp_path, capsys):
    bad = tmp_path / 'bad.json'
    bad.write_text('{not json')
    assert compare.main([str(bad), str(bad)]) == 2
    assert f'{bad}: not a readable run report' in capsys.readouterr().err
    assert compare.main(['no-such-file.json', str(bad)]) == 2
    assert 'no-such-file.json: no such report file' in capsys.readouterr().err


def test_references_from_an_unknown_session_stop_naming_it(tmp_path):
    # make references SESSIONS=... fetches each session from the results storage first
    import os
    import subprocess
    from testbed import registry
    proc = subprocess.run(['bash', str(registry.REPO / 'ci' / 'references.sh'), '--sessions',
                           'deadbeef-0000'], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, TESTBED_RESULTS_DB=str(tmp_path / 'r.db')))
    assert proc.returncode == 2
    assert 'session deadbeef-0000: not in the results storage' in proc.stderr


def test_a_retried_session_counts_every_case_as_its_final_attempt(tmp_path):
    """ReFrame's runs after the first hold only the retried cases: B compared on all of its
    cases (testbed.results' rule), a retried case with its retry's samples."""
    b = report(2, factor=1.10)
    failed = dict(b['runs'][0]['testcases'][0], result='fail', fail_phase='sanity')
    retried = b['runs'][0]['testcases'][0]
    b['runs'][0]['testcases'][0] = failed
    b['runs'].append({'testcases': [retried]})
    rows = compare.compare(report(1), b)
    assert len(rows) == len(MODES) * len(SIZES)          # not the one retried case alone
    assert run_main(tmp_path, report(1), b) == 1
