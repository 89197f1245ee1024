#!/usr/bin/env bash
# The project's test command (README: `make test`; .ci/run calls it):
#   1. set-up (idempotent), 2. pytest of the Python parts and the bad-input/leftover checks,
#   3. a quick pass of the ReFrame suite over every stack with references asserted,
#   4. the summary table and the check that no daemon or launcher is left behind,
#   5. the point-to-point matrix (one mode of each send) across two nodes of the emulated
#      Slurm cluster, under three link profiles (ci/cluster.sh), taken down after each.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
t_start=$(date +%s)
status=0
failed_steps=()
# Reports written after this marker are this run's; the failure list at the end reads only them.
marker=$(mktemp)
pytest_log=$(mktemp)
builds_log=$(mktemp)
# a step's own reasons for failing, a line each (ci/cluster.sh writes them), shown at the end
export TESTBED_STEP_REASONS=$(mktemp)
# its own process group, so that leaving early stops make and its compilers too
trap '[ -z "${builds_pid:-}" ] || kill -- "-$builds_pid" 2>/dev/null; rm -f "$marker" "$pytest_log" "$builds_log" "$TESTBED_STEP_REASONS"' EXIT
# The source stacks build from the moment Debian's packages and their tarballs are in, beside
# the rest of the set-up (venvs, PyPI stacks) and pytest, at the lowest priority: no unit test
# needs those stacks (their tests are in the quick pass).
bash ci/setup.sh --builds later --phase system || exit 1
setsid -w nice -n 19 bash ci/setup.sh --builds only >"$builds_log" 2>&1 &
builds_pid=$!
bash ci/setup.sh --builds later || exit 1
t_setup=$(date +%s)
. site/env.sh

echo "== pytest: the Python parts, bad input, leftover processes (source builds beside it)"
# Two workers, each test file whole on one (pytest-xdist --dist loadfile): 193 s against 361 s
# on one worker here (docs/verification.md, 2026-11-29); a file's tests share its fixtures.
python3 -m pytest -q -rfE --durations=12 -n 2 --dist loadfile reframe/unittests apps 2>&1 \
    | tee "$pytest_log" || { status=1; failed_steps+=(pytest); }
t_pytest=$(date +%s)
echo "== the source stacks' builds"
wait "$builds_pid" || { status=1; failed_steps+=("source builds"); }
cat "$builds_log"
t_builds=$(date +%s)

echo "== ReFrame quick pass over every stack (references asserted)"
bash ci/suite.sh quick || { status=1; failed_steps+=("quick pass"); }
t_suite=$(date +%s)

echo "== the emulated Slurm cluster: two nodes, three link profiles (ci/cluster.sh quick)"
bash ci/cluster.sh quick || { status=1; failed_steps+=(cluster); }
t_cluster=$(date +%s)

# The studies' pages over this run's quick and cluster reports (reframe/reports/studies/<id>.md;
# seconds: it reads the reports, runs nothing); an asserted direction that fails fails it.
echo "== the four studies beside the originals (testbed/studies.py; make studies runs their cases)"
# Only this host's pass: through the PVM daemons between nodes InPlace read 1.107x Raw in a clean
# fresh clone (2026-11-29): not a direction the cluster's quick pass holds (docs/verification.md).
mapfile -t study_reports < <(find "$repo/reframe/reports" -maxdepth 1 -name last-quick.json \
                             -newer "$marker" | sort)
if [ ${#study_reports[@]} -gt 0 ]; then
    (cd reframe && python3 -m testbed.studies "${study_reports[@]}") \
        || { status=1; failed_steps+=(studies); }
fi

echo "== wall time: set-up $((t_setup - t_start)) s, pytest $((t_pytest - t_setup)) s," \
     "source builds $((t_builds - t_pytest)) s past pytest," \
     "ReFrame quick pass $((t_suite - t_builds)) s, cluster $((t_cluster - t_suite)) s"
# CI keeps the tail of the log: end with what failed, so a red run says why in its last lines.
echo "== failed steps: ${failed_steps[*]:-none}"
cat "$TESTBED_STEP_REASONS"
grep -E '^(FAILED|ERROR) ' "$pytest_log" || true
mapfile -t reports < <(find "$repo/reframe/reports" -maxdepth 1 -name '*.json' -newer "$marker" | sort)
(cd reframe && python3 -m testbed.failures "${reports[@]}")
exit $status
