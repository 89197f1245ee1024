"""A hung or crashed stack costs one case of a run, not every case it has left.

The programs of apps/ end a launch that makes no progress for TESTBED_HANG_TIMEOUT_S seconds
with one record (apps/common/tb_watchdog.h):
    TB-HUNG {"program":..,"rank":1,"call":"MPI_Recv","mode":..,"size":..,"stalled_s":..}
HangGuard, a mixin of every test that launches a stack (StackLaunch, StartupTime):
  - fails the case whose output holds such a record, or a rank killed by a crash signal (a
    launcher's "KILLED BY SIGNAL: 11", "exited on signal 11", a core dump), with a sanity
    message that names the call, mode, size and rank;
  - remembers the stack for the rest of the run, in a small state file keyed by the run
    (TESTBED_RUN_ID, which ci/suite.sh exports; else this ReFrame process), together with
    a case that ReFrame's time limit killed before any record came out;
  - fails every later case of that stack at once, before it launches: "stack X hung in
    <test> (<call>, <mode>, <size>, rank r) earlier in this run: not launched". Every other
    stack goes on.
It also passes the bound to the jobs (TESTBED_HANG_TIMEOUT_S, or -S hang_timeout_s=S) and,
test-only, injects a deadlock into one stack: TESTBED_INJECT_HANG=CALL:N:RANK (rank RANK's
N-th CALL never returns, apps/slowdown's TESTBED_SLOWDOWN_HANG) with
TESTBED_INJECT_HANG_STACK=NAME[,NAME] (the registry's names, or all).
"""
import fcntl
import json
import os
import re
import shlex
import time
from pathlib import Path

import reframe as rfm
from reframe.core.builtins import run_after, run_before, variable
from reframe.core.exceptions import ReframeError, SanityError

from testbed.checks import slowdown_shim, stack_of

TIMEOUT_VAR = 'TESTBED_HANG_TIMEOUT_S'
DEFAULT_TIMEOUT_S = 30.0        # apps/common/tb_watchdog.h's TB_WATCHDOG_DEFAULT_S
MAX_TIMEOUT_S = 86400.0
RECORD = re.compile(r'TB-HUNG (\{.*\})')
#: signals that mean the library crashed, not that a launcher tore the job down
CRASH_SIGNALS = {4: 'SIGILL', 6: 'SIGABRT', 7: 'SIGBUS', 8: 'SIGFPE', 11: 'SIGSEGV',
                 31: 'SIGSYS'}
#: how the launchers (Hydra, Open MPI's mpirun and prterun, LAM's mpirun) and a shell
#: say that a rank died of a signal
SIGNAL_TEXT = re.compile(r'(?:KILLED BY SIGNAL|exited on signal|killed by signal)\W{0,3}(\d+)',
                         re.I)
SHELL_CRASH = re.compile(r'\b(Segmentation fault|Bus error|Illegal instruction|'
                         r'Floating point exception)\b|\(core dumped\)')
#: grace past a case's time limit before its launch counts as killed there (ReFrame cancels
#: at the limit, then waits a few seconds for the job)
TIME_LIMIT_GRACE_S = 120


def timeout_s(value=None):
    """The bound in seconds: `value` (the test's -S hang_timeout_s) when >= 0, else
    $TESTBED_HANG_TIMEOUT_S, else the programs' default; a bad one stops the run in one line."""
    if value is not None and value >= 0:
        text, where = str(value), 'hang_timeout_s'
    else:
        text, where = os.environ.get(TIMEOUT_VAR, ''), TIMEOUT_VAR
        if not text:
            return DEFAULT_TIMEOUT_S
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds <= MAX_TIMEOUT_S:
        raise ReframeError(f'{where}={text!r}: expected seconds from 0 (no hang watchdog) to '
                           f'{MAX_TIMEOUT_S:.0f}, e.g. 30')
    return seconds


def hung_records(*paths):
    """The TB-HUNG records in these files (a job's stdout and stderr: each rank writes its
    record to both), one per rank, in the order they appear."""
    out, ranks = [], set()
    for path in paths:
        try:
            text = Path(path).read_text(errors='replace')
        except OSError:
            continue
        for m in RECORD.finditer(text):
            try:
                rec = json.loads(m.group(1))
            except ValueError:
                continue
            key = (rec.get('rank'), rec.get('pid'))
            if key not in ranks:
                ranks.add(key)
                out.append(rec)
    return out


def where(rec):
    """'MPI_Recv, mpi Send-Recv/complete, 1 B, handshake, rank 1' from a TB-HUNG record: the
    call, mode, size, the program's phase and the rank."""
    call = rec.get('call') or rec.get('phase') or 'unknown call'
    parts = [call, rec.get('mode'), rec.get('size'),
             rec.get('phase') if rec.get('phase') != call else '',
             f"rank {rec.get('rank', '?')}"]
    return ', '.join(p for p in parts if p)


def hang_message(records, timeout):
    """The hung case's sanity message: every rank's record, the first in full."""
    first = records[0]
    context = ', '.join(first.get(k) for k in ('mode', 'size', 'phase') if first.get(k))
    text = (f"launch hung: {first.get('program', 'the program')} made no progress for "
            f"{first.get('stalled_s', '?')} s ({TIMEOUT_VAR}={timeout:g}): rank "
            f"{first.get('rank', '?')} in {first.get('call') or first.get('phase')} "
            f"({context})")
    others = [f"rank {r.get('rank', '?')} in {r.get('call') or r.get('phase')}"
              for r in records[1:]]
    return text + (f'; {", ".join(others)}' if others else '')


def crash_of(exit_code, *texts):
    """Why a launch counts as crashed: a rank killed by a crash signal, as the launcher or
    the shell said it, or an exit code of 128 + such a signal; None otherwise. A clean exit
    is never a crash (a launcher that tore down the other ranks after one failed says
    SIGKILL or SIGTERM, which are not in CRASH_SIGNALS)."""
    if exit_code == 0:
        return None
    for text in texts:
        for m in SIGNAL_TEXT.finditer(text):
            sig = int(m.group(1))
            if sig in CRASH_SIGNALS:
                return f'a rank killed by signal {sig} ({CRASH_SIGNALS[sig]})'
        m = SHELL_CRASH.search(text)
        if m:
            return f'a rank crashed ({m.group(0)})'
    if exit_code is not None and exit_code - 128 in CRASH_SIGNALS:
        sig = exit_code - 128
        return f'exit code {exit_code}: killed by signal {sig} ({CRASH_SIGNALS[sig]})'
    return None


class RunState:
    """The stacks that hung or crashed in this run, and the launch under way, in one JSON file
    per run: $TESTBED_HANG_STATE_DIR (default /var/tmp/mpi-testbed-hangs-UID)/RUN.json, where
    RUN is $TESTBED_RUN_ID, or this ReFrame process (pid and start time) without one."""

    def __init__(self, run=None, directory=None):
        self.run = run or os.environ.get('TESTBED_RUN_ID') or self.this_process()
        self.dir = Path(directory or os.environ.get('TESTBED_HANG_STATE_DIR') or
                        f'/var/tmp/mpi-testbed-hangs-{os.getuid()}')
        self.path = self.dir / (re.sub(r'[^\w.-]', '_', self.run) + '.json')

    @staticmethod
    def this_process():
        try:
            start = Path('/proc/self/stat').read_text().rsplit(')', 1)[1].split()[19]
        except (OSError, IndexError):
            start = str(int(time.time()))
        return f'reframe-{os.getpid()}-{start}'

    def _update(self, change):
        """Read, change and write the state under a lock; returns the state."""
        self.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        with open(self.dir / '.lock', 'w') as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                state = json.loads(self.path.read_text())
            except (OSError, ValueError):
                state = {'run': self.run, 'stacks': {}, 'launching': {}}
                self._forget_old()
            if change and change(state) is not False:
                tmp = self.path.with_suffix('.tmp')
                tmp.write_text(json.dumps(state, indent=1) + '\n')
                tmp.replace(self.path)
            return state

    def _forget_old(self, days=7):
        for old in self.dir.glob('*.json'):
            try:
                if time.time() - old.stat().st_mtime > days * 86400:
                    old.unlink()
            except OSError:
                pass

    def stopped(self, stack):
        """What stopped `stack` earlier in this run ({'test','what','detail'}), or None. A
        launch that began, never reached its end and is past its time limit counts: ReFrame
        killed it there (with no record, or the watchdog would have ended it)."""
        def judge(state):
            if stack in state['stacks']:
                return False
            run = state['launching'].get(stack)
            if not run or not run.get('limit_s') or \
                    time.time() - run['started'] < run['limit_s'] + TIME_LIMIT_GRACE_S:
                return False
            state['stacks'][stack] = {
                'test': run['test'], 'what': 'hung',
                'detail': f"killed at its time limit of {run['limit_s']:g} s, no TB-HUNG record"}
            del state['launching'][stack]
        return self._update(judge)['stacks'].get(stack)

    def stop(self, stack, test, what, detail):
        """Remember that `stack` hung or crashed ('what') in `test`; the first reason stays."""
        def add(state):
            state['launching'].pop(stack, None)
            if stack in state['stacks']:
                return None
            state['stacks'][stack] = {'test': test, 'what': what, 'detail': detail}
        self._update(add)

    def launching(self, stack, test, limit_s):
        def add(state):
            state['launching'][stack] = {'test': test, 'started': time.time(),
                                         'limit_s': limit_s}
        self._update(add)

    def launched(self, stack, test):
        def remove(state):
            if state['launching'].get(stack, {}).get('test') != test:
                return False
            del state['launching'][stack]
        self._update(remove)


def not_launched(stack, entry):
    return (f"stack {stack} {entry['what']} in {entry['test']} ({entry['detail']}) earlier in "
            f"this run: not launched")


def hang_injection(stack_name, names):
    """TESTBED_INJECT_HANG for `stack_name`: the shim's TESTBED_SLOWDOWN_HANG value, or ''
    (unset, or the stack is not among TESTBED_INJECT_HANG_STACK's). `names`: the registry's
    stack names, for the one-line error."""
    value = os.environ.get('TESTBED_INJECT_HANG', '')
    if not value:
        return ''
    if not re.fullmatch(r'\w+:[1-9]\d*:\d+', value):
        raise ReframeError(f'TESTBED_INJECT_HANG={value!r}: expected CALL:N:RANK, e.g. '
                           f'MPI_Recv:200:1 (rank 1\'s 200th MPI_Recv never returns)')
    chosen = os.environ.get('TESTBED_INJECT_HANG_STACK', '')
    wanted = [s for s in chosen.split(',') if s]
    unknown = [s for s in wanted if s not in names and s != 'all']
    if not wanted or unknown:
        raise ReframeError(f'TESTBED_INJECT_HANG_STACK={chosen!r}: expected the stacks to hang, '
                           f'a comma list of {", ".join(sorted(names))} (or all)')
    return value if stack_name in wanted or 'all' in wanted else ''


class HangGuard(rfm.RegressionTestPlugin):
    """A launch of a stack that hung or crashed earlier in the run is not made; one that hangs
    or crashes now fails naming where, and stops its stack for the rest of the run."""

    #: seconds without progress before a rank ends its launch (apps/common/tb_watchdog.h);
    #: -1: $TESTBED_HANG_TIMEOUT_S, else 30; 0: no watchdog
    hang_timeout_s = variable(float, value=-1.0)
    #: test-only: the deadlock injected into this case (TESTBED_INJECT_HANG), '' for none
    injected_hang = variable(str, value='')
    #: the registry's name of the stack the case launches (the run's state is keyed by it)
    guarded_stack = variable(str, value='')

    @run_before('run')
    def refuse_a_stopped_stack(self):
        reg, entry = stack_of(self)
        stack = self.guarded_stack = entry.name
        entry = RunState().stopped(stack)
        if entry:
            raise ReframeError(not_launched(stack, entry))
        self.hang_timeout_s = timeout_s(self.hang_timeout_s)
        self.env_vars[TIMEOUT_VAR] = f'{self.hang_timeout_s:g}'
        self.injected_hang = hang_injection(stack, reg.stacks)
        if self.injected_hang:
            lib = slowdown_shim('TESTBED_INJECT_HANG')
            self.env_vars.update({'LD_PRELOAD': shlex.quote(lib),
                                  'TESTBED_SLOWDOWN_HANG': shlex.quote(self.injected_hang)})

    @run_before('run', always_last=True)
    def note_the_launch(self):
        RunState().launching(self.guarded_stack, self.display_name, self.time_limit)

    @run_after('run')
    def note_its_end(self):
        RunState().launched(self.guarded_stack, self.display_name)

    @run_before('sanity')
    def fail_a_hang_or_crash(self):
        out = os.path.join(self.stagedir, self.stdout.evaluate())
        err = os.path.join(self.stagedir, self.stderr.evaluate())
        stack = self.guarded_stack
        records = hung_records(out, err)
        if records:
            RunState().stop(stack, self.display_name, 'hung', where(records[0]))
            raise SanityError(hang_message(records, self.hang_timeout_s))
        code = self.exit_code() if hasattr(self, 'exit_code') else self.job.exitcode
        texts = []
        for path in (err, out):
            try:
                texts.append(Path(path).read_text(errors='replace'))
            except OSError:
                pass
        crash = crash_of(code, *texts)
        if crash:
            RunState().stop(stack, self.display_name, 'crashed', crash)
            raise SanityError(f'launch crashed: {crash}')
