#!/usr/bin/env bash
# make studies: the ReFrame cases that feed the four studies (reframe/studies/*.toml, shared/seeds),
# then testbed/studies.py over their reports: reframe/reports/studies/<id>.md, each finding beside
# the original's figures, its direction asserted or its figure reported (docs/studies.md).
#   ci/studies.sh full    every feeding test in full on every stack (P2PMatrix and P2PStack over
#                         every range, PvmMatrix, PvmStartup, StartupTime, HplRun, OneSided, LogGP,
#                         Streams, KnobSweep, KnobSweepTrend, ThesisOriginal, ThesisSu3, ThesisHpl,
#                         ThesisStartup), then the emulated cluster in full (ci/cluster.sh full,
#                         with the link sweeps LinkSockbuf and LinkMtu).
#   ci/studies.sh quick   the short variant (make studies QUICK=1): the stacks the studies compare
#                         (mpich-4.0, its ch3:sock build, lam-7.1, pvm-3.4), the quick size range,
#                         5 samples a size, the tests' own short variants (-S ...quick=yes, fewer
#                         np, N, repeats, the smallest lattice), then ci/cluster.sh quick for
#                         mpich-4.0 (TESTBED_CLUSTER_STACKS), 10gige at MTU 9000 included.
# TESTBED_STACKS (make studies STACKS=a,b) runs those stacks instead (in place of the quick
# profile's compared stacks), on the cluster too (TESTBED_CLUSTER_STACKS).
# Tests are picked by class name: one that no file of reframe/tests defines (yet) is named here,
# "not run: no such test", and left out of the selection, and the studies' pages say the same.
# TESTBED_STUDIES_CLUSTER=0 leaves the cluster out; TESTBED_STUDIES_REPORTS="a.json b.json"
# runs nothing and reads those reports. Exit 1 when a run failed or an asserted direction failed.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
start=$PWD          # reports given by a relative path are read from where the command ran
TESTBED_REPO=$repo . "$repo/site/env.sh"
profile=${1:-full}
case "$profile" in quick|full) ;; *) echo "error: ci/studies.sh: profile '$profile' is not quick or full" >&2; exit 2 ;; esac
cd "$repo/reframe"
mkdir -p reports
out="$repo/reframe/reports/studies"
rc=0
t0=$(date +%s)

# test class -> its selection and, per profile, its settings (only a defined class is passed on)
declare -A select=(
  [P2PMatrix]="P2PMatrix" [P2PStack]="P2PStack" [PvmMatrix]="PvmMatrix" [PvmStartup]="PvmStartup"
  [StartupTime]="StartupTime" [HplRun]="HplRun" [OneSided]="OneSided" [LogGP]="LogGP"
  [Streams]="Streams" [KnobSweep]="KnobSweep( |$)" [KnobSweepTrend]="KnobSweepTrend"
  [ThesisOriginal]="ThesisOriginal" [ThesisSu3]="ThesisSu3" [ThesisHpl]="ThesisHpl"
  [ThesisStartup]="ThesisStartup")
order=(P2PMatrix P2PStack PvmMatrix PvmStartup StartupTime HplRun OneSided LogGP Streams KnobSweep
       KnobSweepTrend ThesisOriginal ThesisSu3 ThesisHpl ThesisStartup)
declare -A quick_select=(
  [P2PMatrix]="P2PMatrix.*%size_range=quick" [P2PStack]="P2PStack.*%size_range=quick"
  [PvmMatrix]="PvmMatrix.*%size_range=quick" [HplRun]="HplRun.*%grid=1x2"
  [OneSided]="OneSided.*%sync=fence" [ThesisSu3]="ThesisSu3.*preset1_"
  [ThesisHpl]="ThesisHpl.*%grid=1x2")
declare -A quick_set=(
  [P2PMatrix]="P2PMatrix.samples=5" [PvmMatrix]="PvmMatrix.samples=5"
  [PvmStartup]="PvmStartup.np_list=2,4 PvmStartup.repeats=3"
  [StartupTime]="StartupTime.np_list=2,4,8 StartupTime.repeats=3"
  [HplRun]="HplRun.n_list=1800,3600" [OneSided]="OneSided.samples=5"
  [LogGP]="LogGP.quick=yes" [Streams]="Streams.quick=yes" [KnobSweep]="KnobSweep.samples=5"
  [ThesisOriginal]="ThesisOriginal.sizes=quick ThesisOriginal.samples=5"
  [ThesisSu3]="ThesisSu3.trajectories=10"
  [ThesisHpl]="ThesisHpl.n_max=4000 ThesisHpl.repeats=2"
  [ThesisStartup]="ThesisStartup.np_list=2,4,8 ThesisStartup.repeats=2")

defined() { grep -qE "^class $1\(" tests/*.py; }

reports=()
if [ -n "${TESTBED_STUDIES_REPORTS:-}" ]; then
    read -r -a given <<< "$TESTBED_STUDIES_REPORTS"
    for r in "${given[@]}"; do
        [[ "$r" = /* || ! -e "$start/$r" ]] && reports+=("$r") || reports+=("$start/$r")
    done
    echo "== the studies over the reports given (no runs): ${reports[*]}"
else
    args=()
    for t in "${order[@]}"; do
        if ! defined "$t"; then
            echo "not run: no such test ($t: no class of reframe/tests defines it)"
            continue
        fi
        pick=${select[$t]}
        [ "$profile" = quick ] && pick=${quick_select[$t]:-$pick}
        args+=(-n "^$pick")
        if [ "$profile" = quick ]; then
            for s in ${quick_set[$t]:-}; do args+=(-S "$s"); done
        fi
    done
    stacks=()
    [ "$profile" = quick ] && [ -z "${TESTBED_STACKS:-}" ] &&
        stacks=(-p '^(mpich-4_0|mpich-4_0-ch3sock|lam-7_1|pvm-3_4)$')
    . "$repo/ci/session_tags.sh"
    export TESTBED_RUN_ID="${TESTBED_RUN_ID:-studies-$(date +%Y%m%d-%H%M%S)-$$}"
    local_report="$repo/reframe/reports/studies-$profile.json"
    echo "== the studies' cases on this host ($profile)"
    t1=$(date +%s)
    reframe -c tests -r --exec-policy=serial --keep-stage-files "${stacks[@]}" "${args[@]}" \
        --session-extras "$(session_tags "studies-$profile")" --report-file "$local_report" \
        | python3 -m testbed.progress
    [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
    [ -f "$local_report" ] && reports+=("$local_report")
    t2=$(date +%s)
    echo "== run time on this host: $((t2 - t1)) s"
    if [ "${TESTBED_STUDIES_CLUSTER:-1}" != 0 ]; then
        marker=$(mktemp)
        trap 'rm -f "$marker"' EXIT
        echo "== the studies' cases on the emulated cluster (ci/cluster.sh $profile)"
        if [ "$profile" = quick ]; then
            TESTBED_CLUSTER_STACKS=${TESTBED_CLUSTER_STACKS:-mpich-4.0} TESTBED_CLUSTER_LOGGP=1 \
                TESTBED_CLUSTER_JUMBO=yes \
                bash "$repo/ci/cluster.sh" quick \
                || rc=1
        else
            bash "$repo/ci/cluster.sh" full || rc=1
        fi
        mapfile -t made < <(find "$repo/reframe/reports" -maxdepth 1 -name 'cluster-*.json' \
                            -newer "$marker" | sort)
        reports+=("${made[@]}")
        t3=$(date +%s)
        echo "== run time on the cluster: $((t3 - t2)) s"
    fi
fi
if [ ${#reports[@]} -eq 0 ]; then
    echo "error: ci/studies.sh: no report to read (every run failed before writing one)" >&2
    exit 2
fi
echo "== the studies beside the originals (testbed/studies.py)"
python3 -m testbed.studies "${reports[@]}" --out "$out"
status=$?
[ $status -eq 0 ] || rc=$status
[ -n "${TESTBED_STUDIES_REPORTS:-}" ] || python3 -m testbed.procs --check --cleanup || rc=1
echo "== make studies ($profile): $(( $(date +%s) - t0 )) s in all; pages in $out"
exit $rc
