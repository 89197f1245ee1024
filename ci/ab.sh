#!/usr/bin/env bash
# ci/ab.sh A B [reframe args...]   (make ab A=stack B=stack [ROUNDS=24] [INJECT=...])
# Interleaved A/B: stacks A and B in one job, launch by launch in ABBA order, the whole quick
# point-to-point matrix each launch (tests/ab.py), then the decision on the paired differences
# (testbed/ab.py, docs/ab.md). B defaults to A (an A/A run). TESTBED_AB_ROUNDS (24),
# TESTBED_AB_INJECT (test-only: B slowed by the shim, e.g. 1.05, +20ns, copy:1),
# TESTBED_AB_THRESHOLD (0.02), TESTBED_AB_REPORT (where the run report goes).
# Exit status: 0 same, 1 B slower, 2 bad input or a failed run.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
a=${1:-}; b=${2:-}
if [ -z "$a" ]; then
    echo "usage: make ab A=stack [B=stack] (stacks: reframe/../site/stacks.toml; B defaults to A)" >&2
    exit 2
fi
shift 2 2>/dev/null || shift $#
b=${b:-$a}
TESTBED_REPO=$repo . "$repo/site/env.sh"
cd "$repo/reframe"
environs=$(python3 -m testbed.ab --environs "$a" "$b") || exit 2
rounds=${TESTBED_AB_ROUNDS:-24}
case "$rounds" in ''|*[!0-9]*) echo "ROUNDS=$rounds: expected an even whole number >= 6" >&2
                               exit 2 ;; esac
inject=()
[ -z "${TESTBED_AB_INJECT:-}" ] || inject=(-S "AbP2P.inject_b=$TESTBED_AB_INJECT")
if [ -n "${TESTBED_AB_INJECT:-}" ]; then
    make -s -C "$repo/apps/slowdown" >/dev/null || exit 2
fi
mkdir -p reports
report=${TESTBED_AB_REPORT:-$repo/reframe/reports/ab-$(date -u +%Y%m%dT%H%M%SZ).json}
export TESTBED_RUN_ID="${TESTBED_RUN_ID:-ab-$(date +%Y%m%d-%H%M%S)-$$}"
export TESTBED_AB_A=$a TESTBED_AB_B=$b
. "$repo/ci/session_tags.sh"
extras=$(session_tags ab)
# Progress, on stderr every 30 s: the launches the job has finished (their output files in the
# test's stage, newer than this run's start) and the time left at this run's own pace.
stage="${TESTBED_STAGEDIR:-/var/tmp/mpi-testbed-$(id -un)/stage}/testbed-local/default/${environs%%|*}/AbP2P"
marker=$(mktemp /tmp/testbed-ab-start.XXXXXX)
progress() {
    local done total=$((2 * rounds)) start=$SECONDS nap
    trap 'kill $nap 2>/dev/null; exit 0' TERM     # no sleep left behind
    while sleep 30 & nap=$!; wait $nap; do
        done=$(find "$stage" -maxdepth 1 -name '[ab]_*.out' -newer "$marker" 2>/dev/null | wc -l)
        [ "$done" -gt 0 ] || continue
        echo "ab: $done of $total launches done, about $(( (SECONDS - start) * (total - done) / done )) s left" >&2
    done
}
progress & watcher=$!
reframe -c tests/ab.py -r --exec-policy=serial --keep-stage-files -p "^($environs)\$" \
    -S "AbP2P.rounds=$rounds" "${inject[@]}" --session-extras "$extras" \
    --report-file "$report" "$@" > "${report%.json}.log" 2>&1
rc=$?
kill "$watcher" 2>/dev/null; wait "$watcher" 2>/dev/null; rm -f "$marker"
if [ ! -s "$report" ]; then
    tail -20 "${report%.json}.log" >&2
    echo "ab: reframe wrote no report (exit $rc; log ${report%.json}.log)" >&2
    exit 2
fi
python3 -m testbed.ab "$report" ${TESTBED_AB_THRESHOLD:+--threshold "$TESTBED_AB_THRESHOLD"}
status=$?
python3 -m testbed.procs --check --cleanup >&2 || status=2
echo "report: $report"
exit $status
