#!/usr/bin/env bash
# make images-run: the point-to-point matrix (quick sizes: 8 B, 1 KiB, 64 KiB, 1 MiB) of every
# stack with a built image (make images), once on the host and once inside the image, then
# testbed.compare of the two: the "median of B/A" column is container time over host time.
# Extra arguments go to both reframe runs (e.g. -S P2PMatrix.samples=30).
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
TESTBED_REPO=$repo . "$repo/site/env.sh"
oci=${TESTBED_OCI_DIR:-/var/tmp/mpi-testbed-oci}
[ -r "$oci/images.json" ] || { echo "error: $oci/images.json: no image built (make images)" >&2
                               exit 2; }
envs=$(python3 -c '
import json, sys
from testbed import registry
images = json.load(open(sys.argv[1]))["images"]
print("|".join(s.environ for s in registry.load().stacks.values() if s.name in images))' \
  "$oci/images.json") || exit 2
cd "$repo/reframe"
mkdir -p reports
export TESTBED_RUN_ID="${TESTBED_RUN_ID:-images-$(date +%Y%m%d-%H%M%S)-$$}"
common=(-c tests/p2p_matrix.py -r --exec-policy=serial --keep-stage-files
        -n 'P2PMatrix.*%size_range=quick' -S P2PMatrix.samples=15 -p "^($envs)\$")
rc=0
. "$repo/ci/session_tags.sh"
reframe "${common[@]}" --report-file reports/images-host.json \
    --session-extras "$(session_tags images-host)" "$@" || rc=1
reframe "${common[@]}" --system testbed-containers --report-file reports/images-container.json \
    --session-extras "$(session_tags images-container)" "$@" || rc=1
echo "== container / host (B = inside the image, A = on the host)"
python3 -m testbed.compare reports/images-host.json reports/images-container.json
python3 -m testbed.procs --check --cleanup || rc=1
exit $rc
