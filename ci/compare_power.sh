#!/usr/bin/env bash
# ci/compare_power.sh [N_CLEAN [FACTOR...]]   (default: 5 clean sessions; factors 1.05 1.1 1.2)
#   TESTBED_POWER_TESTS=both|p2p|su3 chooses the tests (default both)
# Measures what testbed.compare catches: N_CLEAN clean sessions and two sessions per injected
# slowdown factor (apps/slowdown), interleaved so that a slow hour of the machine falls on
# both kinds; then every clean pair and every (clean, slowed) pair is compared
# (testbed.compare_power). Runs P2PMatrix quick (12 modes) and Su3Run on 2 ranks for
# mpich-4.0 and openmpi-4.1, measure-only. Reports land in /var/tmp/mpi-testbed-power/<stamp>/.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
n_clean=${1:-5}
shift || true
factors=("$@")
[ ${#factors[@]} -gt 0 ] || factors=(1.05 1.1 1.2)
case "$n_clean" in ''|*[!0-9]*) echo "usage: ci/compare_power.sh [N_CLEAN [FACTOR...]]" >&2
                               exit 2 ;; esac
out=/var/tmp/mpi-testbed-power/$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$out"
TESTBED_REPO=$repo . "$repo/site/env.sh"
export TESTBED_MEASURE_ONLY=1
# TESTBED_POWER_TESTS=su3: su3_rmd alone (its MPI share is a few %, so it needs larger factors)
case "${TESTBED_POWER_TESTS:-both}" in
  both) sel=(-n 'P2PMatrix.*%size_range=quick' -S P2PMatrix.samples=15 -n 'Su3Run.*%ranks=2') ;;
  p2p)  sel=(-n 'P2PMatrix.*%size_range=quick' -S P2PMatrix.samples=15) ;;
  su3)  sel=(-n 'Su3Run.*%ranks=2') ;;
  *) echo "TESTBED_POWER_TESTS: '$TESTBED_POWER_TESTS' is not both, p2p or su3" >&2; exit 2 ;;
esac
sel+=(-p '^(mpich-4_0|openmpi-4_1)$')
session() {     # session FACTOR NAME
    bash "$repo/ci/slowdown.sh" "$1" "${sel[@]}" > "$out/$2.log" 2>&1
    cp "/var/tmp/mpi-testbed-slowdown/run-$1/report.json" "$out/$2.json" ||
        echo "no report for $2 (see $out/$2.log)" >&2
}
for k in $(seq 1 "$n_clean"); do
    session 1 "clean-$k"
    # two slowed sessions per factor, spread over the clean ones
    if [ "$k" -le 2 ]; then
        for f in "${factors[@]}"; do session "$f" "slow-$f-$k"; done
    fi
done
cd "$repo/reframe" && python3 -m testbed.compare_power "$out" | tee "$out/power.md"
echo "reports and table: $out"
