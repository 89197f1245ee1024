#!/usr/bin/env bash
# Run the ReFrame suite on the embedded default and print the summary table.
#   ci/suite.sh quick   the README's test pass, every stack: p2p's 12 modes over the quick
#                       range (8 B, 1 KiB, 64 KiB, 1 MiB) with 15 samples per size; HPL at
#                       N=7200 on the 1x2 grid (its residual and efficiency; the panels'
#                       figures are `make run`'s, HplRun.panels);
#                       su3_rmd's rank invariance over 1, 2 and 4 ranks (its physics on
#                       every stack; Su3Run's figures are `make run`'s); start-up for np 2 and 4
#                       (9 warm launches each: enough for testbed.compare to judge them);
#                       KnobReach; PVM's matrix (both routes, bytes and doubles) and spawn;
#                       our p2p beside one peer a stack
#                       runs (IMB-MPI1 where it runs, else NetPIPE: PeerCompare, 5 rounds, up
#                       to 8 while fewer than 5 are steady, the least its 90 % interval needs;
#                       with fewer an injected slowdown passed as not held: docs/peers.md),
#                       within 10 % at the four sizes.
#                       `make run` only: HPL's 1x1 and oversubscribed 2x2 grids, Su3Run,
#                       MPI one-sided (reported), both peers (the choices and
#                       their times: docs/verification.md, "the test command's budget").
#                       A missing portable reference fails the test where the machine has
#                       rows (its type's or its own); a machine without any reports its figures
#                       and says so (testbed/references.py notice).
#   ci/suite.sh full    every range, default samples (30); missing references are reported
# Extra arguments go to reframe (e.g. -p mpich-4_0 to pick one stack's environment).
# Every run's report and summary are kept in reframe/archive/ (the last TESTBED_ARCHIVE_KEEP,
# default 20), with the machine record, so any figure can be traced to its run and machine.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
TESTBED_REPO=$repo . "$repo/site/env.sh"
profile=${1:-full}; shift || true
cd "$repo/reframe"
mkdir -p reports
report="$repo/reframe/reports/last-$profile.json"
case "$profile" in
  quick) args=(-n 'P2P(Matrix|Stack).*%size_range=quick' -S P2PMatrix.samples=15
               -n 'HplRun.*%grid=1x2' -S HplRun.n_list=7200 -S HplRun.panels=no
               -n Su3RankInvariance
               -n StartupTime -S StartupTime.np_list=2,4 -S StartupTime.repeats=9
               -n KnobReach
               -n 'PvmMatrix.*%size_range=quick' -S PvmMatrix.samples=15
               -n PvmStartup -S PvmStartup.np_list=2,4 -S PvmStartup.repeats=3
               -n '^PeerCompare' -S PeerCompare.rounds=5 -S PeerCompare.min_steady=5
               -S PeerCompare.max_rounds=8 -S PeerCompare.one_peer=yes)
         export TESTBED_REQUIRE_REFERENCES=${TESTBED_REQUIRE_REFERENCES:-1} ;;
  # BindModel needs its image (make bind-image); the studies' own tests (LogGP, Streams, the
  # knob sweeps, the thesis's definitions) are make studies' (ci/studies.sh)
  full)  args=(-x BindModel -x '^(LogGP|Streams|KnobSweep|Thesis)') ;;
  *) echo "error: ci/suite.sh: profile '$profile' is not quick or full" >&2; exit 2 ;;
esac
# Every process this run starts inherits the id; the leftover check looks for it only.
export TESTBED_RUN_ID="${TESTBED_RUN_ID:-run-$(date +%Y%m%d-%H%M%S)-$$}"
echo "== references for this machine"
python3 -m testbed.references status || exit 2
# --keep-stage-files: with the serial policy ReFrame 4.10 can remove a fixture's stage
# before a dependent test of the same name on another stack has run (seen with StartupTime).
# No retries: a figure must hold on the first run, and a hung stack costs one time limit.
# The session, kept in ReFrame's results storage, is tagged with what made it (testbed.compare
# and `reframe --list-stored-sessions` show it); each test case also carries the stack's
# version, knobs, machine record and commit.
. "$repo/ci/session_tags.sh"
extras=$(session_tags "$profile")
# ReFrame's lines pass through testbed.progress, which adds one to stderr a minute: cases done,
# cases left and the time left as the stored sessions of the same cases took it.
reframe -c tests -r --exec-policy=serial --keep-stage-files "${args[@]}" \
    --session-extras "$extras" --report-file "$report" "$@" | python3 -m testbed.progress
rc=${PIPESTATUS[0]}
python3 -m testbed.summary "$report" --out "$repo/reframe/summary" || rc=1
echo "== the studies' directions (asserted on any machine: testbed/directions.py)"
python3 -m testbed.directions "$report" || rc=1
python3 -m testbed.archive --profile "$profile" --summary "$repo/reframe/summary" "$report" \
    || rc=1
python3 -m testbed.procs --check --cleanup || rc=1
python3 -m testbed.failures --unreferenced "$report"
exit $rc
