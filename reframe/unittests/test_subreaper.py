"""testbed/subreaper.py: a job script run through it adopts its orphans (a daemon's halt then
does not wait on PID 1), runs once more from its top only, and keeps its exit code."""
import subprocess
import sys
from pathlib import Path

SUBREAPER = Path(__file__).resolve().parents[1] / 'testbed' / 'subreaper.py'

# The first line is the one StackLaunch writes; a subshell leaves an orphan behind.
SCRIPT = '''#!/bin/bash
[ -n "${TESTBED_SUBREAPER:-}" ] || exec python3 %s "$0"
echo "start $$"
orphan=$(sleep 30 > /dev/null 2>&1 & echo $!)
echo "parent $(ps -o ppid= -p "$orphan" | tr -d ' ')"
kill "$orphan"
exit 7
'''


def test_job_shell_adopts_orphans_and_keeps_its_exit_code(tmp_path):
    out = tmp_path / 'job.out'
    script = tmp_path / 'job.sh'
    script.write_text(SCRIPT % SUBREAPER)
    script.chmod(0o755)
    with open(out, 'w') as fh:
        rc = subprocess.run([str(script)], stdout=fh, stderr=subprocess.PIPE, text=True,
                            timeout=30).returncode
    lines = out.read_text().split('\n')
    starts = [ln for ln in lines if ln.startswith('start ')]
    assert rc == 7
    assert len(starts) == 1, lines          # the re-exec happens before anything else runs
    shell = starts[0].split()[1]
    assert f'parent {shell}' in lines, lines  # the orphan's parent is the job's shell


def test_usage_error():
    out = subprocess.run([sys.executable, str(SUBREAPER)], capture_output=True, text=True)
    assert out.returncode == 2 and 'usage: subreaper.py JOB_SCRIPT' in out.stderr
