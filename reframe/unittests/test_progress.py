"""testbed.progress: ReFrame's counters read from its output, the time left from stored sessions
of the same cases, no estimate without one; ReFrame's lines pass through unchanged."""
import subprocess
import sys

from testbed import progress


def session(durations, start=1000.0, hashes='abcdef'):
    cases, when = [], start
    for i, d in enumerate(durations):
        when += d
        cases.append({'display_name': f'Case{i}', 'hashcode': f'{hashes[i % 6]}{i:07d}',
                      'system': 'sys', 'partition': 'p', 'environ': 'mpich-4_0',
                      'job_completion_time_unix': when})
    return {'session_info': {'time_start_unix': start}, 'runs': [{'testcases': cases}]}


def line(k, n, i, hashes='abcdef'):
    """As ReFrame 4.10 prints it: the counter padded to the total's width."""
    return f'[       OK ] ({k:{len(str(n))}d}/{n}) Case{i} /{hashes[i % 6]}{i:07d} ' \
        '@sys:p+mpich-4_0\n'


def test_durations_are_the_gaps_between_completions():
    got = progress.durations(session([10, 20, 30]))
    assert sorted(got.values()) == [10, 20, 30]


def test_time_left_from_the_stored_sessions_of_the_same_cases():
    stored = [session([60] * 10), session([120] * 10), session([90] * 10),
              session([5] * 4)]                   # another selection: not counted
    p = progress.Progress(stored)
    assert p.line() == 'progress: no case done yet'
    for k in range(1, 5):
        p.feed(line(k, 10, k - 1))
    # 6 cases left; medians over the three sessions of 6x60, 6x120, 6x90 s: 9 min
    assert p.line() == 'progress: 4 of 10 cases done, about 9 min left (from 3 stored sessions)'


def test_no_estimate_without_a_stored_run_of_these_cases():
    p = progress.Progress([session([60] * 10, hashes='zzzzzz')])
    p.feed('\x1b[32m' + line(1, 10, 0) + '\x1b[0m')
    assert p.line() == ('progress: 1 of 10 cases done, no estimate: no stored run of these '
                        'cases')
    p.feed(line(2, 10, 1).replace('OK', 'FAIL'))
    assert p.line().startswith('progress: 2 of 10 cases done')


def test_output_passes_through_and_lines_go_to_stderr(tmp_path):
    text = ''.join(line(k, 3, k - 1) for k in range(1, 4)) + 'done\n'
    script = ('import sys, time\nfor l in sys.stdin.read().splitlines(True):\n'
              '    sys.stdout.write(l); sys.stdout.flush(); time.sleep(0.2)\n')
    feeder = subprocess.Popen([sys.executable, '-c', script], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    proc = subprocess.Popen([sys.executable, '-m', 'testbed.progress', '--interval', '0.3'],
                            stdin=feeder.stdout, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={'TESTBED_RESULTS_DB': str(tmp_path / 'none.db'),
                                            'PATH': '/usr/bin:/bin',
                                            'PYTHONPATH': ':'.join(sys.path)})
    feeder.stdout.close()
    feeder.communicate(text)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and out == text
    assert 'progress: ' in err and 'cases done' in err
