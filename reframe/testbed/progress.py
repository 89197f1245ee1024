"""Progress of a long ReFrame run: cases done, cases left, and the time left as the stored
sessions of the same cases took it.

    reframe ... | python3 -m testbed.progress [--interval 60]

ReFrame's output passes through unchanged (stdout); every --interval seconds a line goes to
stderr:

    progress: 14 of 52 cases done, about 6 min left (from 3 stored sessions)

Cases done and the total are ReFrame's own counters ('[ OK ] (14/52) NAME /HASH @SYS:PART+ENV',
'[ FAIL ] ...'). The estimate: the stored sessions (testbed.storage, read-only) with as many
cases as this run and every case done so far among theirs, the same selection run before;
in each, a case took the time from the previous case's job completion to its own
(job_completion_time_unix; serial runs, a build's time lands on the case after it); the time
left is the median over those sessions of the sum over the cases not done yet. Without such a
session: 'no estimate: no stored run of these cases'. Independent of ReFrame's internals: it
reads the lines ReFrame prints, and never writes to the storage."""
import argparse
import re
import statistics
import sys
import threading
import time

from testbed import storage

ANSI = re.compile(r'\x1b\[[0-9;]*m')
DONE = re.compile(r'^\[\s*(?:OK|FAIL)\s*\] \(\s*(\d+)/(\d+)\) (.+?)\s*$')


def case_id(tc):
    """A stored case as ReFrame prints it after its counter: 'NAME /HASH @SYS:PART+ENV'."""
    return (f"{tc.get('display_name') or tc.get('name')} /{tc.get('hashcode')} "
            f"@{tc.get('system')}:{tc.get('partition')}+{tc.get('environ')}")


def durations(report):
    """{case id: seconds} of a stored session (see the module's text)."""
    cases = [tc for run in report.get('runs') or [] for tc in run.get('testcases') or []
             if isinstance(tc, dict)]
    start = (report.get('session_info') or {}).get('time_start_unix') or 0
    out = {case_id(tc): 0.0 for tc in cases}
    timed = sorted((tc['job_completion_time_unix'], case_id(tc)) for tc in cases
                   if isinstance(tc.get('job_completion_time_unix'), (int, float)))
    before = start
    for when, cid in timed:
        out[cid] = max(when - before, 0.0)
        before = when
    return out


class Progress:
    def __init__(self, sessions=None):
        self.done, self.total, self.started = set(), None, time.monotonic()
        self._sessions, self._timings = sessions, None

    def feed(self, line):
        m = DONE.match(ANSI.sub('', line).strip())
        if m:
            self.done.add(m[3])
            self.total = int(m[2])

    def timings(self):
        """Case durations of every stored session (read once, when first needed)."""
        if self._timings is None:
            try:
                reports = self._sessions if self._sessions is not None else storage.sessions()
            except storage.StorageError as err:
                print(f'progress: {err}', file=sys.stderr)
                reports = []
            self._timings = [durations(r) for r in reports]
        return self._timings

    def line(self):
        if self.total is None:
            return 'progress: no case done yet'
        head = f'progress: {len(self.done)} of {self.total} cases done'
        same = [t for t in self.timings() if len(t) == self.total and self.done <= set(t)]
        if not same:
            return f'{head}, no estimate: no stored run of these cases'
        left = statistics.median(sum(s for c, s in t.items() if c not in self.done)
                                 for t in same)
        when = f'{round(left)} s' if left < 90 else f'{round(left / 60)} min'
        return (f'{head}, about {when} left '
                f'(from {len(same)} stored session{"s" if len(same) > 1 else ""})')


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--interval', type=float, default=60,
                    help='seconds between progress lines (default 60)')
    args = ap.parse_args(argv)
    progress, stop = Progress(), threading.Event()

    def tick():
        while not stop.wait(args.interval):
            try:
                print(progress.line(), file=sys.stderr, flush=True)
            except Exception as err:         # never stop ReFrame's output for an estimate
                print(f'progress: no estimate ({type(err).__name__}: {err})', file=sys.stderr)
    threading.Thread(target=tick, daemon=True).start()
    for line in sys.stdin:
        sys.stdout.write(line)
        sys.stdout.flush()
        progress.feed(line)
    stop.set()
    return 0


if __name__ == '__main__':
    sys.exit(main())
