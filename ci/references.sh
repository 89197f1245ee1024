#!/usr/bin/env bash
# Make references on this machine from N runs of the README's quick pass (default 3):
#   ci/references.sh [N] [absolute|ratio|all]        (make references RUNS=N KIND=...)
#   ci/references.sh --reports R1.json R2.json ...    (from runs already made; KIND from
#                                                      TESTBED_REFERENCE_KIND, default all)
#   ci/references.sh --sessions UUID1 UUID2 ...       (from sessions in ReFrame's results storage:
#                                                      reframe --list-stored-sessions)
# Either way it ends with the change to reframe/references as a diff, for review before commit.
# absolute (the default) writes rows keyed by this machine's id: they are asserted here only,
# into TESTBED_REFERENCES_DIR where it is set (a site's folder outside the checkout).
# ratio writes the portable rows keyed by the machine type, the ones the repository ships; a
# commit that changes them names the runs (their session ids are in the rows).
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
TESTBED_REPO=$repo . "$repo/site/env.sh"
kind=absolute
if [ "${1:-}" = "--reports" ]; then
    shift
    reports=()
    for r in "$@"; do       # as the caller named them: update runs in reframe/
        case "$r" in /*) reports+=("$r") ;; *) reports+=("$PWD/$r") ;; esac
    done
    kind=${TESTBED_REFERENCE_KIND:-all}
elif [ "${1:-}" = "--sessions" ]; then
    shift
    kind=${TESTBED_REFERENCE_KIND:-all}
    tmp=$(mktemp -d /tmp/testbed-sessions.XXXXXX)
    trap 'rm -rf "$tmp"' EXIT
    reports=()
    for uuid in "$@"; do
        (cd "$repo/reframe" && python3 -c 'import json, sys
from testbed import compare
try:
    report = compare.load(sys.argv[1])
except compare.CompareError as err:
    sys.exit(f"ci/references.sh: {err}")
json.dump(report, open(sys.argv[2], "w"))' "$uuid" "$tmp/$uuid.json") || exit 2
        reports+=("$tmp/$uuid.json")
    done
else
    runs=${1:-3}; kind=${2:-absolute}
    case "$runs" in ''|*[!0-9]*) echo "error: RUNS: '$runs' is not a whole number" >&2; exit 2;; esac
    [ "$runs" -ge 3 ] || { echo "error: RUNS: a tolerance needs at least 3 runs, got $runs" >&2; exit 2; }
    reports=()
    for i in $(seq 1 "$runs"); do
        echo "== reference run $i of $runs"
        # References are not asserted while they are being made.
        TESTBED_MEASURE_ONLY=1 TESTBED_REQUIRE_REFERENCES=0 bash "$repo/ci/suite.sh" quick
        out="$repo/reframe/reports/reference-run-$i.json"
        cp "$repo/reframe/reports/last-quick.json" "$out"
        reports+=("$out")
    done
fi
case "$kind" in absolute|ratio|all) ;; *) echo "error: KIND: '$kind' is not absolute, ratio or all" >&2; exit 2;; esac
cd "$repo/reframe" && python3 -m testbed.references update --only "$kind" "${reports[@]}" || exit $?
if [ -n "${TESTBED_REFERENCES_DIR:-}" ]; then
    # a site's own folder, outside the checkout: updating the testbed leaves it
    echo "== written to TESTBED_REFERENCES_DIR=$TESTBED_REFERENCES_DIR (keep it with the site)"
    exit 0
fi
echo "== the change to reframe/references (review it before committing)"
git -C "$repo" --no-pager diff --stat -- reframe/references
git -C "$repo" --no-pager diff -U0 -- reframe/references
