#!/usr/bin/env bash
# make bind-image: the bind model's one image (docs/bind-model.md), containers/bind-abi:
#   1. apps/p2p built twice on this host with the mpich 5.0 wheel's headers and libraries
#      (the venv of the stack mpich-5.0): against the MPICH ABI (libmpi.so.12, mpicc's flags)
#      and against the MPI standard ABI (libmpi_abi.so.1, mpicc_abi's flags), both without the
#      wrapper's rpath, so that the programs name no host path;
#   2. the image built with podman from the shared base (make images builds it) and the two
#      programs, no MPI library; saved as $TESTBED_OCI_DIR/bind-abi.tar beside the stacks';
#   3. unpacked for ch-run as the job account into $TESTBED_OCI_DIR/host-images/bind-abi
#      (site/cluster/node_images.py, as make images does), and checked: the unpacked image
#      must hold no libmpi*/libmpich* of its own (else the bind would prove nothing).
# Cached by its inputs (this script, which holds the build's flags, the Containerfile, apps/p2p
# and apps/common, the wheel's version, the base image's id): an image of the same inputs is neither built nor unpacked again.
# Run as root (podman, as ci/images.sh: runc and lowered ulimits).
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
oci=${TESTBED_OCI_DIR:-/var/tmp/mpi-testbed-oci}
podman=(podman --runtime runc)
limits=(--ulimit nofile=1024:4096 --ulimit nproc=4096:4096)
base_image=localhost/mpi-testbed-base:bookworm
image=localhost/mpi-testbed-bind-abi
export PYTHONPATH="$repo/reframe"

if [ "$(id -u)" -ne 0 ]; then
  echo "error: ci/bind_image.sh runs podman as root: run it as root" >&2; exit 2
fi
for tool in podman skopeo umoci ch-run make cc; do
  command -v "$tool" >/dev/null || {
    echo "error: $tool is missing: make setup-images (podman, skopeo, umoci, ch-run), make setup (cc, make)" >&2
    exit 2; }
done
# the wheel that builds both programs: the stack mpich-5.0's venv (make setup installs it)
read -r account wheel < <(python3 -c '
from testbed import registry
reg = registry.load()
print(reg.run_as, reg.stacks["mpich-5.0"].prefix if "mpich-5.0" in reg.stacks else "")') || exit 2
if [ -z "$wheel" ] || [ ! -x "$wheel/bin/mpicc_abi" ] || [ ! -e "$wheel/lib/libmpi_abi.so.1" ]; then
  echo "error: ${wheel:-the stack mpich-5.0}: no mpicc_abi or libmpi_abi.so.1: the bind image is built with the mpich 5.0 wheel (make setup installs it)" >&2
  exit 2
fi
"${podman[@]}" image exists "$base_image" || {
  echo "error: $base_image: no such image: make images builds it (the shared base)" >&2; exit 2; }

inputs=$( { cat ci/bind_image.sh containers/bind-abi/Containerfile apps/p2p/Makefile apps/p2p/*.[ch] apps/common/*.[ch]
            "$wheel/bin/mpichversion" 2>&1 | head -3
            "${podman[@]}" image inspect --format '{{.Id}}' "$base_image"; } | sha256sum | cut -c1-16)
host=$oci/host-images
rootfs=$host/bind-abi/rootfs
state=$oci/bind-abi.json
have=$("${podman[@]}" image inspect --format '{{index .Labels "mpi-testbed.inputs"}}' "$image" 2>/dev/null || true)
mkdir -p "$oci/logs" "$host"
chown "$account:" "$host"
log=$oci/logs/bind-abi.log
t0=$(date +%s)
if [ "$have" = "$inputs" ] && [ -f "$oci/bind-abi.tar" ]; then
  echo "== bind-abi: $image is of the same inputs ($inputs): not built again"
else
  echo "== bind-abi: building $image (inputs $inputs), log $log"
  ctx=$oci/bind-abi-context
  rm -rf "$ctx" && mkdir -p "$ctx/apps" && cp -r apps/p2p apps/common "$ctx/apps/" &&
    rm -f "$ctx/apps/p2p/p2p" "$ctx/apps/p2p/p2p-pvm" "$ctx/apps/p2p/.build-id" &&
    : > "$ctx/empty" || exit 1
  : > "$log"
  # the wrapper's compile and link flags, its rpath left out: mpicc -show, mpicc_abi -show
  for abi in mpich-abi mpi-abi; do
    wrapper=$wheel/bin/mpicc; [ "$abi" = mpi-abi ] && wrapper=$wheel/bin/mpicc_abi
    mapfile -t flags < <("$wrapper" -show | python3 -m testbed.bind_model wrapper-flags)
    cflags=${flags[0]:-}; libs=${flags[1]:-}
    echo "-- p2p-$abi: cc $cflags ... $libs" >> "$log"
    make -C "$ctx/apps/p2p" -B CC="cc $cflags" LDFLAGS="" LDLIBS="$libs -lm -lrt -pthread" p2p \
        >> "$log" 2>&1 && mv "$ctx/apps/p2p/p2p" "$ctx/p2p-$abi" || {
      echo "error: p2p-$abi (apps/p2p with $(basename "$wrapper")'s flags) failed to build: $log" >&2; exit 1; }
  done
  "${podman[@]}" build "${limits[@]}" --network=none --build-arg "INPUTS=$inputs" -t "$image" \
      -f containers/bind-abi/Containerfile "$ctx" >> "$log" 2>&1 || {
    echo "error: podman build of $image failed: $log" >&2; exit 1; }
  rm -f "$oci/bind-abi.tar"
  "${podman[@]}" save --format oci-archive -o "$oci/bind-abi.tar" "$image" >> "$log" 2>&1 || {
    echo "error: podman save of $image failed: $log" >&2; exit 1; }
  rm -rf "$ctx"
fi
# unpacked as the job account (skipped where the copy is of the same manifest)
out=$(setpriv --reuid="$account" --regid="$account" --init-groups env HOME=/tmp USER="$account" \
        python3 site/cluster/node_images.py unpack "$host" bind-abi "$oci/bind-abi.tar" 2>&1) || {
  echo "error: $oci/bind-abi.tar not unpacked into $host: $(printf '%s' "$out" | tail -1)" >&2
  exit 1; }
# the image must hold no MPI library of its own
python3 -m testbed.bind_model check-image "$rootfs" || exit 1
python3 - "$state" "$image" "$oci/bind-abi.tar" "$rootfs" "$inputs" <<'PY'
import json, sys
path, image, archive, rootfs, inputs = sys.argv[1:]
json.dump({'image': image, 'archive': archive, 'rootfs': rootfs, 'inputs': inputs},
          open(path, 'w'), indent=1)
PY
bytes=$("${podman[@]}" image inspect --format '{{.Size}}' "$image")
printf 'bind-abi: %s s, %s MB, %s; unpacked for ch-run: %s\n' "$(( $(date +%s) - t0 ))" \
    "$(awk -v b="$bytes" 'BEGIN { printf "%.0f", b / 1e6 }')" "$oci/bind-abi.tar" "$rootfs"
echo "run it: . site/env.sh; cd reframe; reframe -c tests/bind_model.py -r"
