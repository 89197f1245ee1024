#!/usr/bin/env bash
# make cluster-images [STACKS=a,b] [ROUNDS=24]: the quick suite on the emulated cluster with every
# rank inside its stack's image, from images built here and pulled by each node:
#   1. the cluster up (2 nodes, native), unless it is up already (then it is left up);
#   2. ci/images.sh builds the stacks' images and pushes them to the cluster's registry (an
#      image the registry holds from the same inputs is neither built nor pushed again);
#   3. ci/cluster_pull.sh: each node pulls them into its own storage (the registry's log counted
#      per node);
#   4. on --system testbed-cluster-images: the Send-Recv quick matrix across the two nodes (PVM:
#      its matrix, as ci/cluster.sh quick selects it) and ContainerTax (bare and image launch
#      by launch, a rank on each node), every stack that every node has; tax_ratio asserted
#      where references/containers.csv has this machine type's row, reported elsewhere;
#   5. ContainerTax on this host too (--system testbed-local-images: the stack's own launcher,
#      each rank in ch-run in the copy make images unpacked here);
#   6. the reports archived as profile cluster-images (testbed/archive.py), the summary printed.
# A stack whose image fails to build or pull fails its own cases; the others go on (exit 1).
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
TESTBED_REPO=$repo . "$repo/site/env.sh"
[ "$(id -u)" -eq 0 ] || { echo "error: ci/cluster_images.sh builds images and starts the cluster: run it as root" >&2; exit 2; }
cluster="python3 $repo/site/cluster/cluster.py"
rounds=${ROUNDS:-24}
case $rounds in ''|*[!0-9]*|0) echo "error: ROUNDS=$rounds: give a whole number of rounds, at least 1" >&2; exit 2 ;; esac
rc=0
if python3 "$repo/site/cluster/oci_registry.py" address >/dev/null 2>&1; then
    echo "== the emulated cluster is up: used as it is, and left up"
else
    [ -d "$(python3 -c 'from testbed_site.cluster import oci_registry; print(oci_registry.STORAGE)')" ] \
        && keep=--keep-registry || keep=''
    trap '$cluster down $keep >/dev/null 2>&1 || $cluster down $keep' EXIT
    trap 'exit 130' INT TERM
    $cluster up --nodes 2 --profile native --mtu 1500 || exit 1
fi
echo "== images (built, pushed where changed)"
IMAGES_REUSE=1 STACKS=${STACKS:-} bash "$repo/ci/images.sh" || rc=1
echo "== each node pulls"
STACKS=${STACKS:-} bash "$repo/ci/cluster_pull.sh" || rc=1
. "$repo/ci/session_tags.sh"
export TESTBED_RUN_ID="${TESTBED_RUN_ID:-cluster-images-$(date +%Y%m%d-%H%M%S)-$$}"
environs=()
if [ -n "${STACKS:-}" ]; then
    environs=(-p "^($(echo "$STACKS" | sed 's/\./_/g; s/,/|/g'))\$")
fi
cd "$repo/reframe"
mkdir -p reports
report="$repo/reframe/reports/cluster-images.json"
echo "== ranks in the images: the Send-Recv quick matrix (PVM's) across two nodes, the container tax"
reframe -c tests --system testbed-cluster-images -r --exec-policy=serial --keep-stage-files \
    "${environs[@]}" -n 'P2PMatrix.*%mode=Send-Recv/complete.*%size_range=quick' \
    -n 'PvmMatrix.*%size_range=quick' -x 'PvmMatrix.*%route=daemon.*%pack=byte' \
    -n ContainerTax -S P2PMatrix.samples=15 -S PvmMatrix.samples=15 -S ContainerTax.rounds="$rounds" \
    --report-file "$report" --session-extras "$(session_tags cluster-images)" || rc=1
echo "== the container tax on this host: the stack's launcher here, each rank in ch-run"
here="$repo/reframe/reports/local-images.json"
reframe -c tests/container_tax.py --system testbed-local-images -r --exec-policy=serial \
    --keep-stage-files "${environs[@]}" -S ContainerTax.rounds="$rounds" \
    --report-file "$here" --session-extras "$(session_tags local-images)" || rc=1
reports=() summary=''
for r in "$here" "$report"; do         # summaries: summary-local-images, summary-cluster-images
    [ -f "$r" ] || continue
    reports+=("$r") summary="$repo/reframe/summary-$(basename "$r" .json)"
    python3 -m testbed.summary "$r" --out "$summary" || rc=1
done
if [ ${#reports[@]} -gt 0 ]; then
    python3 -m testbed.archive --profile cluster-images --summary "$summary" "${reports[@]}" || rc=1
fi
python3 -m testbed.procs --check --cleanup || rc=1
exit $rc
