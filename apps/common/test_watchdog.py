"""tb_watchdog.c, the hang watchdog of every program in apps/: a rank that stops beating is
ended with one TB-HUNG record (stdout and stderr) naming the MPI call on its stack and a
non-zero exit within the bound; a rank that goes on beating is left alone, however long it
runs; a bad bound is one line naming the variable. No MPI here: a small program and a stand-in
library whose MPI_Recv never returns (a library's own frame, as a real MPI_Recv would be).
Run: python3 -m pytest -q apps/common/test_watchdog.py."""
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
CC = shutil.which('cc') or shutil.which('gcc')

LIBRARY = r'''
#include <time.h>
#include <unistd.h>
int MPI_Recv(void) { for (;;) pause(); return 0; }                 /* a deadlock */
int MPI_Barrier(int ms)                                              /* a slow call */
{ struct timespec t = { ms / 1000, (ms % 1000) * 1000000L }; nanosleep(&t, 0); return 0; }
'''

# argv: a list of steps, each "beat:MS" (sleep MS, then beat), "recv" (the deadlock),
# "barrier:MS" (an MPI call that takes MS), "spin:MS" (the program's own loop, no call),
# "stop" (tb_watchdog_stop)
PROGRAM = r'''
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "tb_watchdog.h"
int MPI_Recv(void);
int MPI_Barrier(int ms);
static double now(void)
{ struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
int main(int argc, char **argv)
{
    char err[200];
    if (tb_watchdog_start("wdtest", -1, err, sizeof err)) {
        fprintf(stderr, "wdtest: %s\n", err);
        return 2;
    }
    tb_watchdog_at("sample", "mpi Send-Recv/complete", NULL, 1024);
    for (int i = 1; i < argc; i++) {
        int ms = strchr(argv[i], ':') ? atoi(strchr(argv[i], ':') + 1) : 0;
        if (!strncmp(argv[i], "beat", 4)) {
            struct timespec t = { ms / 1000, (ms % 1000) * 1000000L };
            nanosleep(&t, NULL);
            tb_watchdog_beat();
        } else if (!strcmp(argv[i], "recv")) {
            MPI_Recv();
        } else if (!strncmp(argv[i], "barrier", 7)) {
            MPI_Barrier(ms);
        } else if (!strncmp(argv[i], "spin", 4)) {
            tb_watchdog_at("own loop", "", "N=7", -1);
            for (double t0 = now(); now() - t0 < ms / 1e3;)
                ;
        } else if (!strcmp(argv[i], "stop")) {
            tb_watchdog_stop();
        }
    }
    puts("DONE");
    return 0;
}
'''


@pytest.fixture(scope='module')
def program(tmp_path_factory):
    if not CC:
        pytest.skip('no C compiler')
    d = tmp_path_factory.mktemp('watchdog')
    (d / 'lib.c').write_text(LIBRARY)
    (d / 'prog.c').write_text(PROGRAM)
    subprocess.run([CC, '-shared', '-fPIC', '-O2', '-o', str(d / 'libfake.so'), str(d / 'lib.c')],
                   check=True, capture_output=True, text=True)
    # the flags of the programs in apps/ (warnings too: the file must stay clean under them)
    built = subprocess.run(
        [CC, '-std=c99', '-O2', '-Wall', '-Wextra', '-Werror', f'-I{HERE}', '-o', str(d / 'prog'),
         str(d / 'prog.c'), str(HERE / 'tb_watchdog.c'), f'-L{d}', '-lfake', f'-Wl,-rpath,{d}',
         '-pthread'], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    return d / 'prog'


def run(program, *steps, timeout_s='1', rank='1'):
    env = {k: v for k, v in os.environ.items()
           if k not in ('TESTBED_HANG_TIMEOUT_S', 'PMI_RANK', 'PMIX_RANK',
                        'OMPI_COMM_WORLD_RANK', 'LAMRANK', 'SLURM_PROCID')}
    if timeout_s is not None:
        env['TESTBED_HANG_TIMEOUT_S'] = timeout_s
    if rank is not None:
        env['PMI_RANK'] = rank
    t0 = time.monotonic()
    proc = subprocess.run([str(program), *steps], env=env, capture_output=True, text=True,
                          timeout=60)
    return proc, time.monotonic() - t0


def record(text):
    lines = [ln for ln in text.splitlines() if ln.startswith('TB-HUNG {')]
    assert len(lines) == 1, text
    return json.loads(lines[0][len('TB-HUNG '):])


def test_a_rank_stuck_in_a_call_is_ended_naming_the_call(program):
    proc, elapsed = run(program, 'beat:50', 'beat:50', 'recv')
    assert proc.returncode == 124, proc.stderr          # TB_WATCHDOG_EXIT
    assert 'DONE' not in proc.stdout
    rec = record(proc.stdout)
    assert record(proc.stderr) == rec                    # the same line on both streams
    assert rec['call'] == 'MPI_Recv' and rec['call_from'] == 'stack', rec
    assert (rec['program'], rec['rank'], rec['phase'], rec['mode'], rec['size'],
            rec['size_bytes']) == ('wdtest', 1, 'sample', 'mpi Send-Recv/complete', '1024 B',
                                   1024)
    assert rec['stack'][:2] == ['pause', 'MPI_Recv'], rec
    assert 1.0 <= rec['stalled_s'] and rec['timeout_s'] == 1
    # the bound, a tick of the watchdog, its second for the launcher to forward the line
    assert elapsed < 0.1 + 1.0 + 0.2 + 1.0 + 1.5, elapsed


def test_a_loop_of_the_program_is_named_by_its_phase(program):
    # no MPI or PVM frame on the stack: the record says what the program said it was in
    proc, _ = run(program, 'spin:5000')
    assert proc.returncode == 124
    rec = record(proc.stdout)
    assert (rec['call'], rec['call_from'], rec['size']) == ('own loop', 'program', 'N=7'), rec
    assert 'size_bytes' not in rec


def test_a_rank_that_beats_is_left_alone_however_long(program):
    proc, elapsed = run(program, *['beat:100'] * 25)     # 2.5 s at a bound of 1 s
    assert proc.returncode == 0 and 'TB-HUNG' not in proc.stdout + proc.stderr, proc.stderr
    assert proc.stdout.strip() == 'DONE' and elapsed > 2.4


def test_the_bound_runs_past_the_longest_step_seen(program):
    # steps of 0.8 s teach it what to expect: later 1.5 s steps are within 1 s past that,
    # where without the lesson the bound alone (1 s) would have ended the rank
    proc, _ = run(program, 'beat:800', 'beat:800', 'beat:1500', 'beat:1500')
    assert proc.returncode == 0 and 'TB-HUNG' not in proc.stdout, proc.stdout
    proc, _ = run(program, 'beat:1500')    # the first step: the bound (and a tick at most)
    assert proc.returncode == 124 and record(proc.stdout)['expected_s'] <= 0.2


def test_zero_turns_it_off_and_stop_ends_it(program):
    proc, _ = run(program, 'barrier:2000', timeout_s='0')
    assert proc.returncode == 0 and 'TB-HUNG' not in proc.stdout + proc.stderr
    proc, _ = run(program, 'stop', 'barrier:2000')
    assert proc.returncode == 0 and 'TB-HUNG' not in proc.stdout + proc.stderr


def test_unset_is_the_default_bound_and_rank_unknown_is_minus_one(program):
    proc, _ = run(program, 'barrier:1500', timeout_s=None, rank=None)   # 1.5 s < 30 s
    assert proc.returncode == 0 and 'TB-HUNG' not in proc.stdout
    proc, _ = run(program, 'recv', rank=None)
    assert record(proc.stdout)['rank'] == -1


@pytest.mark.parametrize('value', ['abc', '-1', '86401', 'nan', '1s', ''])
def test_a_bad_bound_is_one_line_naming_the_variable(program, value):
    proc, _ = run(program, 'beat:1', timeout_s=value)
    if value == '':                                      # empty: the default, not an error
        assert proc.returncode == 0
        return
    assert proc.returncode == 2 and proc.stdout == ''
    assert proc.stderr == (f"wdtest: TESTBED_HANG_TIMEOUT_S='{value}': expected seconds from 0 "
                           f"(no watchdog) to 86400, e.g. 30\n")
