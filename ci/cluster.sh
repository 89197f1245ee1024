#!/usr/bin/env bash
# The emulated-cluster part of the test command (ci/test.sh) and of `make run-cluster`:
#   ci/cluster.sh quick   2 nodes; native: the point-to-point matrix across the two nodes, one
#                         mode of each send (Send-Recv, Isend-Irecv preposted, Ssend-Recv,
#                         Issend-Irecv) over the quick range (8 B, 1 KiB, 64 KiB, 1 MiB), and
#                         KnobReach; then
#                         native, gige and 10gige: Send-Recv over the quick range (8 B ..
#                         1 MiB; on gige its 1 MiB must stay under the rate); 10gige with MTU
#                         9000 runs in `full` (with LinkMtu, MTU 1500's segment against 9000's)
#                         or where TESTBED_CLUSTER_JUMBO=yes (make studies QUICK=1). The
#                         large range on gige (200 kB .. 2 MB, 110 of the cluster's 406 s on a
#                         fresh machine) runs in `full`.
#                         Stacks: TESTBED_CLUSTER_STACKS (default mpich-4.0, openmpi-4.1).
#                         On native also Send-Recv over the quick range for the stacks srun
#                         cannot start, through the fallback launcher (their own launcher and
#                         site/cluster/agent), and PVM's matrix (its pvmds on both nodes, rank 1
#                         spawned on the other): TESTBED_CLUSTER_FALLBACK_STACKS (lam-7.1,
#                         pvm-3.4); of PVM's four cases, through the daemons only the one
#                         packing doubles (byte packing through the daemons took 42 of the
#                         fallback's 69-75 s, its 1 MiB at 18-42 ms a half round trip, for
#                         figures reported, not asserted; the in-host quick pass and `full`
#                         run it). On gige the fallback runs in `full` only, or for the
#                         stacks TESTBED_CLUSTER_SHAPED_FALLBACK_STACKS names (PVM's matrix at
#                         1 Gb/s took 90 of the cluster's 466 s on a fresh machine; LAM's figures
#                         there are reported, not asserted, too).
#                         Start-up against np (reported only) runs in `full`, or where
#                         TESTBED_CLUSTER_STARTUP_STACKS names stacks.
#   ci/cluster.sh full    the same with every stack srun or the fallback can start and every
#                         size range (PVM's matrix too); on native, start-up against np (2 to
#                         16 ranks over the two nodes; mpich-4.0's start-up program hangs in
#                         MPI_Finalize in some launches, docs/cluster.md); raw TCP between the
#                         nodes with the socket buffers swept on gige (LinkSockbuf) and MTU
#                         1500's segment against 9000's on 10gige MTU 9000 (LinkMtu); LogGP
#                         of MPI and of raw TCP between the nodes (LogGPNodes; quick asks for
#                         its short variant with TESTBED_CLUSTER_LOGGP=1, as make studies does).
# Each profile brings the cluster up, checks its rate (`cluster.py check`: a raw TCP stream
# between the two nodes carries at least 90 % of the most TCP payload the rate allows and at most
# 102 % of the rate; about 1-4 s) and takes it down
# again (also on error or interrupt), then
# site/cluster/profile_check.py prints MPI as a percentage of raw TCP and asserts that the
# shaped profile's added latency shows. Reports: reframe/reports/cluster-<profile>.json, and all of
# one run's in reframe/archive/<time>-cluster-<quick|full>-<session>/ (testbed/archive.py).
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
TESTBED_REPO=$repo . "$repo/site/env.sh"
profile=${1:-quick}; shift || true
extra=("$@")     # more reframe options for every run (make run FAMILY=...: -t FAMILY)
cluster="python3 $repo/site/cluster/cluster.py"
case "$profile" in
  quick) stacks=${TESTBED_CLUSTER_STACKS:-mpich-4.0,openmpi-4.1}
         fallback=${TESTBED_CLUSTER_FALLBACK_STACKS:-lam-7.1,pvm-3.4}
         shaped_fallback=${TESTBED_CLUSTER_SHAPED_FALLBACK_STACKS-}
         startup=${TESTBED_CLUSTER_STARTUP_STACKS-}      # reported only: `full` runs it
         startup_np=2,4,8 startup_repeats=3
         # the other 8 modes, and HPL and su3_rmd across the nodes (correctness only: the cluster
         # has no references for them), run in `full`: the test command's budget (docs/cluster.md)
         matrix=(-n 'P2PMatrix.*%mode=(Send-Recv/complete|Isend-Irecv/preposted|Ssend-Recv/complete|Issend-Irecv/complete).*%size_range=quick')
         samples=15
         gige_ranges=quick
         pvm=(-n 'PvmMatrix.*%size_range=quick' -x 'PvmMatrix.*%route=daemon.*%pack=byte')
         apps=()
         sockbuf_sweep=() mtu_sweep=()
         jumbo=${TESTBED_CLUSTER_JUMBO:-no}      # yes: 10gige at MTU 9000 too (make studies)
         # LogGP of MPI and raw TCP between the nodes: make studies asks for it (short variant)
         loggp=()
         [ "${TESTBED_CLUSTER_LOGGP:-0}" = 1 ] && loggp=(-n '^LogGPNodes' -S LogGPNodes.quick=yes) ;;
  full)  stacks=${TESTBED_CLUSTER_STACKS:-} fallback=${TESTBED_CLUSTER_FALLBACK_STACKS:-pvm-3.4}
         gige_ranges='(quick|large)'
         shaped_fallback=${TESTBED_CLUSTER_SHAPED_FALLBACK_STACKS:-$fallback}
         startup=${TESTBED_CLUSTER_STARTUP_STACKS:-openmpi-4.1,openmpi-5.0,mpich-5.0,lam-7.1}
         startup_np=2,4,8,16 startup_repeats=5
         matrix=(-n 'P2PMatrix') samples=30
         pvm=(-n PvmMatrix)
         apps=(-n 'HplRun.*%grid=1x2' -n 'Su3Run.*%ranks=2')
         # raw TCP between the nodes, one knob swept (reframe/tests/link_sweep.py)
         sockbuf_sweep=(-n LinkSockbuf) mtu_sweep=(-n LinkMtu) jumbo=yes
         loggp=(-n '^LogGPNodes') ;;
  *) echo "error: ci/cluster.sh: profile '$profile' is not quick or full" >&2; exit 2 ;;
esac
# TESTBED_CLUSTER_STACKS given (make run STACKS=...): the fallback and start-up runs keep to it
only_chosen() {
    [ -z "${TESTBED_CLUSTER_STACKS:-}" ] && { echo "$1"; return; }
    local out=() s
    for s in ${1//,/ }; do [[ ",$stacks," == *",$s,"* ]] && out+=("$s"); done
    (IFS=,; echo "${out[*]}")
}
fallback=$(only_chosen "$fallback") shaped_fallback=$(only_chosen "$shaped_fallback")
startup=$(only_chosen "$startup")
# a comma list of stacks as ReFrame's environment selection (environment names hold no dots)
environs_of() { echo "^($(echo "$1" | sed 's/\./_/g; s/,/|/g'))\$"; }
environs=()
if [ -n "$stacks" ]; then
    environs=(-p "$(environs_of "$stacks")")
fi
. "$repo/ci/session_tags.sh"
export TESTBED_RUN_ID="${TESTBED_RUN_ID:-cluster-$(date +%Y%m%d-%H%M%S)-$$}"
# The registry's images a person kept (make cluster-down KEEP_REGISTRY=1) stay kept: every up
# and down here leaves a storage it found as it was, and removes one it made.
[ -d "$(python3 -c 'from testbed_site.cluster import oci_registry; print(oci_registry.STORAGE)')" ] \
    && keep=--keep-registry || keep=''
trap '$cluster down $keep >/dev/null 2>&1 || $cluster down $keep' EXIT
trap 'exit 130' INT TERM
cd "$repo/reframe"
mkdir -p reports
rc=0
reports=()
# why this run failed, a line each: printed at its end, and appended to TESTBED_STEP_REASONS
# (ci/test.sh) so that a red `make test` names the cause in its last lines
failed() {
    rc=1
    [ -n "${reasons_file:-}" ] || reasons_file=$(mktemp)
    echo "cluster: $*" >> "$reasons_file"
}
sendrecv='P2PMatrix.*%mode=Send-Recv/complete.*%size_range'
# profile MTU, then the test selection of that run; ReFrame's lines pass through
# testbed.progress (a line a minute: cases done, left, the time left from stored sessions)
run_profile() {
    local prof=$1 mtu=$2; shift 2
    echo "== emulated cluster: 2 nodes, link profile $prof, MTU $mtu"
    $cluster down $keep >/dev/null 2>&1
    $cluster up --nodes 2 --profile "$prof" --mtu "$mtu" || { failed "$prof/$mtu: cluster up failed"; return; }
    # the profile's rate (site/cluster/link_rate.py): a raw TCP stream node1 -> node2 within
    # 90-102 % of it; a miss fails the run, the figures below are still taken (and say the link)
    local line
    line=$($cluster check 2>&1) || failed "$prof/$mtu: $line"
    echo "$line"
    local report="$repo/reframe/reports/cluster-$prof-mtu$mtu.json"
    # No retries, one job at a time: the nodes share this machine's cores.
    reframe -c tests --system testbed-cluster -r --exec-policy=serial --keep-stage-files \
        "${environs[@]}" "$@" "${extra[@]}" -S P2PMatrix.samples="$samples" --report-file "$report" \
        --session-extras "$(session_tags "cluster-$profile-$prof-mtu$mtu")" \
        | python3 -m testbed.progress
    [ "${PIPESTATUS[0]}" -eq 0 ] || failed "$prof/$mtu: reframe exited non-zero ($report)"
    reports+=("$report")
    if [ -n "${with_fallback:-}" ]; then      # the stacks of the fallback launcher
        echo "== the same profile, the fallback launcher: $with_fallback"
        report="$repo/reframe/reports/cluster-$prof-mtu$mtu-fallback.json"
        reframe -c tests --system testbed-cluster -r --exec-policy=serial --keep-stage-files \
            -p "$(environs_of "$with_fallback")" -n "$sendrecv=quick" "${pvm[@]}" \
            -S P2PMatrix.samples="$samples" -S PvmMatrix.samples="$samples" "${extra[@]}" \
            --report-file "$report" \
            --session-extras "$(session_tags "cluster-$profile-$prof-mtu$mtu-fallback")" \
            | python3 -m testbed.progress
        [ "${PIPESTATUS[0]}" -eq 0 ] || failed "$prof/$mtu: reframe exited non-zero ($report)"
        reports+=("$report")
    fi
    if [ -n "${with_startup:-}" ] && [ -n "$startup" ]; then
        echo "== the same profile, start-up against np: $startup"
        startup_report="$repo/reframe/reports/cluster-$prof-mtu$mtu-startup.json"
        reframe -c tests --system testbed-cluster -r --exec-policy=serial --keep-stage-files \
            -p "$(environs_of "$startup")" -n StartupTime -S StartupTime.np_list="$startup_np" \
            -S StartupTime.repeats="$startup_repeats" "${extra[@]}" --report-file "$startup_report" \
            --session-extras "$(session_tags "cluster-$profile-$prof-mtu$mtu-startup")" \
            | python3 -m testbed.progress
        [ "${PIPESTATUS[0]}" -eq 0 ] || failed "$prof/$mtu: reframe exited non-zero ($startup_report)"
    fi
    $cluster down $keep || failed "$prof/$mtu: cluster down failed"
}
startup_report=''
with_fallback=$fallback with_startup=1 run_profile native 1500 "${matrix[@]}" -n "$sendrecv=quick" \
    -n KnobReach "${apps[@]}" "${loggp[@]}"
with_fallback=$shaped_fallback run_profile gige 1500 -n "$sendrecv=$gige_ranges" "${sockbuf_sweep[@]}"
run_profile 10gige 1500 -n "$sendrecv=quick"
[ "$jumbo" = yes ] && run_profile 10gige 9000 -n "$sendrecv=quick" "${mtu_sweep[@]}"
echo "== link profiles: MPI against raw TCP, shaped latency"
python3 -m testbed_site.cluster.profile_check "${reports[@]}" \
    ${startup_report:+--startup "$startup_report"} --out "$repo/reframe/summary-cluster.md" \
    || failed "profile_check: MPI against raw TCP did not hold (its error line above)"
# kept with the machine record beside the quick pass's runs, so every figure traces to its run
existing=()
for r in "${reports[@]}" ${startup_report:+"$startup_report"}; do [ -f "$r" ] && existing+=("$r"); done
if [ ${#existing[@]} -gt 0 ]; then
    python3 -m testbed.archive --profile "cluster-$profile" --summary "$repo/reframe/summary-cluster" \
        "${existing[@]}" || failed "testbed.archive failed"
fi
python3 -m testbed.procs --check --cleanup || failed "leftover processes (testbed.procs, above)"
if [ -n "${reasons_file:-}" ]; then
    echo "== ci/cluster.sh failed:"
    cat "$reasons_file"
    [ -z "${TESTBED_STEP_REASONS:-}" ] || cat "$reasons_file" >> "$TESTBED_STEP_REASONS"
    rm -f "$reasons_file"
fi
exit $rc
