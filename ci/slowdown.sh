#!/usr/bin/env bash
# ci/slowdown.sh FACTOR [reframe args...]
# Proof that the performance references bite: builds the slowdown shim (apps/slowdown), runs
# part of the suite with every job slowed by FACTOR (TESTBED_INJECT_SLOWDOWN; the calls:
# TESTBED_INJECT_CALLS, default the shim's list) and lists the tests that missed a reference.
# TESTBED_INJECT_SCOPE=run slows the test's own launch and not the baselines its job measures
# (with TESTBED_INJECT_CALLS=work,cblas_dgemm,dgemm_: an application's computation, for the
# bite of its whole-run figures; docs/measurement.md). TESTBED_INJECT_SENDS=before pads the
# sends before they run rather than after; TESTBED_INJECT_WAITS=poll runs each blocking
# point-to-point call as its nonblocking form and a loop of padded MPI_Test (apps/slowdown/README.md).
# Default part: the quick pass's p2p tests; give reframe arguments to choose another
# (e.g. -n 'P2PMatrix.*%mode=Send-Recv/complete.*%size_range=small' -p mpich-4_0).
# Not through ci/suite.sh: that writes reframe/reports/last-quick.json, reframe/summary* and
# the archive, where a slowed run could be taken for a real one. Here everything goes under
# /var/tmp/mpi-testbed-slowdown/run-FACTOR/. Exit status: 0 if some reference caught the
# slowdown, 1 if none did, 2 on bad use.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
factor=${1:-}
# FACTOR: 1 to 100 (every slowed call takes FACTOR times as long), or +Nns (a fixed wait of
# N ns after each, 1 to 1000000: small enough for a 5 % slower latency; apps/slowdown).
if [ -z "$factor" ] || ! python3 -c 'import re, sys
a = sys.argv[1]
m = re.fullmatch(r"\+(\d+)ns", a)
sys.exit(not (1 <= int(m.group(1)) <= 1000000 if m else 1 <= float(a) <= 100))' \
        "$factor" 2> /dev/null; then
    echo "usage: ci/slowdown.sh FACTOR [reframe args...]   (FACTOR from 1 to 100, e.g. 1.2," \
         "or a fixed wait +Nns from +1ns to +1000000ns)" >&2
    exit 2
fi
shift
out=/var/tmp/mpi-testbed-slowdown
make -s -C "$repo/apps/slowdown" OUT="$out" || exit 2
run="$out/run-$factor"
rm -rf "$run"; mkdir -p "$run"; chmod 755 "$run"     # the job account reads its stage
TESTBED_REPO=$repo . "$repo/site/env.sh"
[ $# -gt 0 ] || set -- -n 'P2P(Matrix|Stack).*%size_range=quick' -S P2PMatrix.samples=15
export TESTBED_INJECT_SLOWDOWN=$factor TESTBED_SLOWDOWN_LIB="$out/libslowdown.so"
export TESTBED_RUN_ID="slowdown-$(date +%Y%m%d-%H%M%S)-$$"
cd "$repo/reframe"
. "$repo/ci/session_tags.sh"
reframe -c tests -r --exec-policy=serial --keep-stage-files -s "$run/stage" -o "$run/output" \
    --perflogdir "$run/perflogs" --report-file "$run/report.json" \
    --session-extras "$(session_tags "slowdown-$factor")" "$@"
python3 -m testbed.procs --check --cleanup
python3 - "$run/report.json" "$factor" <<'PY'
import json, sys
report, factor = sys.argv[1], sys.argv[2]
try:
    cases = json.load(open(report))['runs'][-1]['testcases']
except (OSError, ValueError, KeyError, IndexError) as err:
    sys.exit(f'ci/slowdown.sh: no usable report {report}: {err}')
caught = [tc for tc in cases if tc['result'] == 'fail' and tc.get('fail_phase') == 'performance']
other = [tc for tc in cases if tc['result'] == 'fail' and tc not in caught]
print(f'\n== slowdown {factor}: {len(caught)} of {len(cases)} tests missed a reference '
      f'({len(other)} failed otherwise)')
for tc in cases:
    for key, (value, ref, lower, upper, unit, *_) in (tc.get('perfvalues') or {}).items():
        ratio = f'{value / ref:.2f}x ref' if ref and value is not None else 'no reference'
        mark = 'CAUGHT' if tc in caught else ('FAILED' if tc in other else 'passed')
        shown = 'none' if value is None else f'{value:.4g}'     # a case failed before it
        print(f"{mark:7} {tc['name'].split()[0]:60.60} {tc['environ']:15} {key.split(':')[-1]:12}"
              f' {shown:>10} {unit:5} {ratio}')
for tc in other:
    print(f"FAILED  {tc['name']} @{tc['environ']}: {tc.get('fail_phase')}: {tc.get('fail_reason')}")
if not any(v[1] for tc in cases for v in (tc.get('perfvalues') or {}).values()):
    print('no reference for any of these figures on this machine: nothing could be caught')
print(f'report: {report}')
sys.exit(0 if caught else 1)
PY
