"""The test files a ReFrame selection needs: `-c FILE` for each file of reframe/tests that
defines a class the -n selections start with, or `-c tests` (every file) when a selection does
not start with a class name or a tag (-t) selects. ReFrame instantiates every case of every
file it loads, seconds of CPU a run for all of them, and the unit tests start ReFrame some
thirty times.

    python3 -m testbed.selection REFRAME-ARGS...    # prints the -c options, one per line
"""
import re
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent / 'tests'


def check_files(args, tests=TESTS):
    """['tests/a.py', ...] relative to reframe/, or ['tests']."""
    if '-t' in args or '--tag' in args:
        return ['tests']
    names = [args[i + 1] for i, a in enumerate(args[:-1]) if a in ('-n', '--name')]
    files = set()
    for name in names:
        m = re.match(r'\^?([A-Z][A-Za-z0-9]*)', name)
        found = m and [f for f in sorted(tests.glob('*.py'))
                       if re.search(rf'^class {m.group(1)}\(', f.read_text(), re.M)]
        if not found:
            return ['tests']
        files.update(f'tests/{f.name}' for f in found)
    return sorted(files) or ['tests']


if __name__ == '__main__':
    print('\n'.join(w for f in check_files(sys.argv[1:]) for w in ('-c', f)))
