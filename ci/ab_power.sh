#!/usr/bin/env bash
# ci/ab_power.sh [STACK [N_AA [SETTING:RUNS ...]]]
#   default: mpich-4.0, 20 clean A/A runs, +1ns:3 +3ns:10 +10ns:3 copy:0.05:3 copy:0.1:10
#   copy:0.2:3 1.02:3 1.05:2 1.1:2 1.2:2 (about 70 min on a 2-core VM)
# What make ab catches and how often it raises a false alarm: N_AA runs of STACK against itself
# (A/A) and RUNS runs per SETTING with B's launches slowed by the test-only shim (apps/slowdown:
# a factor, '+Nns', or 'copy:N', N extra copies of every send buffer or a share of one),
# interleaved so that a slow hour of the machine falls on every kind; then the table and the
# power curve (python3 -m testbed.ab_power DIR --svg FILE).
# TESTBED_AB_ROUNDS as for make ab. TESTBED_AB_LOCK=FILE: take this flock around each run (a
# machine shared with other jobs). Reports land in /var/tmp/mpi-testbed-ab-power/<stamp>/.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
stack=${1:-mpich-4.0}
n_aa=${2:-20}
shift 2 2>/dev/null || shift $#
settings=("$@")
[ ${#settings[@]} -gt 0 ] || settings=(+1ns:3 +3ns:10 +10ns:3 copy:0.05:3 copy:0.1:10 copy:0.2:3
                                         1.02:3 1.05:2 1.1:2 1.2:2)
case "$n_aa" in ''|*[!0-9]*) echo "usage: ci/ab_power.sh [STACK [N_AA [SETTING:RUNS ...]]]" >&2
                             exit 2 ;; esac
out=/var/tmp/mpi-testbed-ab-power/$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$out"
most=$n_aa
for s in "${settings[@]}"; do n=${s##*:}; [ "$n" -gt "$most" ] && most=$n; done
one() {     # one NAME [INJECT]
    local lock=()
    [ -z "${TESTBED_AB_LOCK:-}" ] || lock=(flock "$TESTBED_AB_LOCK")
    TESTBED_AB_INJECT=${2:-} TESTBED_AB_REPORT="$out/$1.json" \
        "${lock[@]}" bash "$repo/ci/ab.sh" "$stack" "$stack" > "$out/$1.txt" 2>&1
    echo "$1: exit $? ($(date -u +%H:%M:%S))"
}
for k in $(seq 1 "$most"); do
    [ "$k" -gt "$n_aa" ] || one "aa-$k"
    for s in "${settings[@]}"; do
        n=${s##*:}; inject=${s%:*}
        [ "$k" -gt "$n" ] || one "inject-$inject-$k" "$inject"
    done
done
cd "$repo/reframe" && TESTBED_REPO=$repo . "$repo/site/env.sh" &&
    python3 -m testbed.ab_power "$out" --svg "$out/power.svg" | tee "$out/power.md"
echo "reports and table: $out"
