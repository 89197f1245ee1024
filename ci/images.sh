#!/usr/bin/env bash
# make images [STACKS=a,b]: the OCI image of every stack the embedded default installs, built
# from containers/ (generated from site/stacks.toml by site/generate.py) with podman:
#   1. a Debian bookworm root file system made by mmdebstrap (no registry image can be pulled
#      here), imported as localhost/mpi-testbed-rootfs:bookworm; rebuilt only when its package
#      list changes (the list is a label of the image);
#   2. the shared base, containers/base/Containerfile;
#   3. one image per stack, containers/<stack>/Containerfile: the project's own installer
#      (install.py --image) installs the stack inside, as `make setup` does on the host;
#   4. each image saved as an OCI archive in $TESTBED_OCI_DIR (the input of the Apptainer
#      definitions: apptainer build x.sif containers/x/apptainer.def), and the sizes printed;
#      unpacked from it for ch-run on this host (host-images/, --system testbed-local-images);
#   5. where the emulated cluster is up (make cluster-up starts its OCI registry), each image
#      pushed there as mpi-testbed/<stack>:<hash of its inputs> and :current, unless the
#      registry has that tag already (site/cluster/oci_registry.py); with IMAGES_REUSE=1 such an
#      image is not even built.
# Run as root. podman runs with runc and lowered ulimits: crun fails here on setrlimit and
# cgroups, and the default nofile/nproc limits are above what this kernel grants.
# A stack whose image fails is reported with its log; the others go on (exit 1 at the end).
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
oci=${TESTBED_OCI_DIR:-/var/tmp/mpi-testbed-oci}
logs=$oci/logs
podman=(podman --runtime runc)
limits=(--ulimit nofile=1024:4096 --ulimit nproc=4096:4096)
rootfs_pkgs=python3,ca-certificates
rootfs_image=localhost/mpi-testbed-rootfs:bookworm
base_image=localhost/mpi-testbed-base:bookworm

if [ "$(id -u)" -ne 0 ]; then
  echo "error: ci/images.sh runs podman and mmdebstrap as root: run it as root" >&2; exit 2
fi
for tool in podman mmdebstrap; do
  command -v "$tool" >/dev/null || {
    echo "error: $tool is missing: make setup-images installs them" >&2
    exit 2; }
done
# Which stacks: the registry's (origin debian or pypi: what install.py installs), or STACKS.
# (the registry and the generator need only Python's standard library, no venv)
export PYTHONPATH="$PWD/reframe"
stacks=$(python3 -c '
import sys
from testbed import registry
reg = registry.load()
try:
    chosen = reg.select(sys.argv[1] or None, source="STACKS")
except registry.RegistryError as err:
    sys.exit(f"error: {err}")
print(" ".join(s.name for s in chosen if s.origin in ("debian", "pypi", "source")))
' "${STACKS:-}") || exit 2
python3 site/generate.py --check || {
  echo "error: containers/ is stale: run make generate" >&2; exit 2; }
mkdir -p "$logs"

# 1. root file system, cached by its package list
have=$("${podman[@]}" image inspect --format '{{index .Labels "mpi-testbed.rootfs"}}' \
       "$rootfs_image" 2>/dev/null || true)
if [ "$have" != "bookworm:$rootfs_pkgs" ]; then
  echo "== root file system (mmdebstrap bookworm, $rootfs_pkgs)"
  t0=$(date +%s)
  rm -f "$oci/rootfs.tar"
  mmdebstrap --variant=minbase --include="$rootfs_pkgs" bookworm "$oci/rootfs.tar" \
      > "$logs/rootfs.log" 2>&1 || { echo "error: mmdebstrap failed: $logs/rootfs.log" >&2; exit 1; }
  "${podman[@]}" import --change "LABEL mpi-testbed.rootfs=bookworm:$rootfs_pkgs" \
      "$oci/rootfs.tar" "$rootfs_image" >> "$logs/rootfs.log" 2>&1 || {
    echo "error: podman import failed: $logs/rootfs.log" >&2; exit 1; }
  rm -f "$oci/rootfs.tar"
  echo "   made in $(( $(date +%s) - t0 )) s"
fi

# 2. the shared base
echo "== base image"
"${podman[@]}" build "${limits[@]}" -t "$base_image" -f containers/base/Containerfile \
    containers/base > "$logs/base.log" 2>&1 || {
  echo "error: base image failed: $logs/base.log" >&2; exit 1; }

# 3. and 4. one image per stack; the build needs the network for apt and pip (host network:
# no bridge or port is set up for it), the runs later get none.
# The host's CA bundle for pip (a site proxy with its own authority), mounted read-only.
cert=${PIP_CERT:-$(python3 -m pip config get global.cert 2>/dev/null || true)}
ca=()
[ -n "$cert" ] && [ -r "$cert" ] && ca=(--volume "$cert:/run/host-ca.crt:ro" \
                                      --build-arg PIP_CERT=/run/host-ca.crt)
status=0
built=''
registry=$(python3 site/cluster/oci_registry.py address) || registry=''
[ -n "$registry" ] && ! command -v skopeo >/dev/null && {
  echo "error: skopeo is missing (it pushes to the cluster's registry): make setup-images" >&2
  exit 2; }
printf '%-18s %8s %10s  %s\n' stack 'build s' 'size MB' 'OCI archive'
for s in $stacks; do
  t0=$(date +%s)
  image=localhost/mpi-testbed-$s
  # IMAGES_REUSE=1 (make cluster-images): an image the registry has from the same inputs is
  # not built again (podman would rebuild it: the installer's COPY takes the whole tree)
  if [ "${IMAGES_REUSE:-}" = 1 ] && [ -n "$registry" ] &&
     python3 site/cluster/oci_registry.py has "$s" 2>/dev/null; then
    printf '%-18s %8s %10s  %s\n' "$s" - - "in the registry already (same inputs): not built"
    python3 site/cluster/oci_registry.py current "$s" || status=1
    "${podman[@]}" image exists "$image" && built="$built $s"
    continue
  fi
  if "${podman[@]}" build "${limits[@]}" "${ca[@]}" --network=host -t "$image" \
       -f "containers/$s/Containerfile" . > "$logs/$s.log" 2>&1 &&
     rm -f "$oci/$s.tar" &&
     "${podman[@]}" save --format oci-archive -o "$oci/$s.tar" "$image" >> "$logs/$s.log" 2>&1
  then
    bytes=$("${podman[@]}" image inspect --format '{{.Size}}' "$image")
    printf '%-18s %8d %10s  %s\n' "$s" $(( $(date +%s) - t0 )) \
        "$(awk -v b="$bytes" 'BEGIN { printf "%.0f", b / 1e6 }')" "$oci/$s.tar"
    built="$built $s"
    if [ -n "$registry" ]; then
      python3 site/cluster/oci_registry.py push "$s" "$oci/$s.tar" || status=1
    fi
  else
    printf '%-18s FAILED: see %s\n' "$s" "$logs/$s.log"
    status=1
  fi
done
# 6. each image unpacked on this host for ch-run, as the job account (skipped where the copy is
# of the same manifest): the ranks of --system testbed-local-images run in it
account=$(python3 -c 'from testbed import registry; print(registry.load().run_as)')
host=$oci/host-images
mkdir -p "$host" && chown "$account:" "$host"
unpacked=''
for s in $stacks; do
  [ -f "$oci/$s.tar" ] || continue
  if out=$(setpriv --reuid="$account" --regid="$account" --init-groups env HOME=/tmp USER="$account" \
             python3 site/cluster/node_images.py unpack "$host" "$s" "$oci/$s.tar" 2>&1); then
    unpacked="$unpacked $s"
  else
    echo "$s: not unpacked on this host: $(printf '%s' "$out" | tail -1)"
    status=1
  fi
done
# The lists site/local.py reads for the systems testbed-containers (podman's images) and
# testbed-local-images (the unpacked copies); earlier builds kept.
python3 - "$oci/images.json" "$host" "$built" "$unpacked" <<'PY'
import json, os, sys
path, host, built, unpacked = sys.argv[1], sys.argv[2], sys.argv[3].split(), sys.argv[4].split()
try:
    before = json.load(open(path))
except FileNotFoundError:
    before = {}
images, rootfs = before.get('images', {}), before.get('rootfs', {})
images.update({s: f'localhost/mpi-testbed-{s}' for s in built})
rootfs.update({s: os.path.join(host, s, 'rootfs') for s in unpacked})
json.dump({'images': images, 'rootfs': rootfs}, open(path, 'w'), indent=1)
PY
echo "images: $oci/images.json; run the p2p matrix inside them: make images-run"
[ -n "$registry" ] || echo "not pushed: no OCI registry is up (the emulated cluster starts one: make cluster-up)"
exit $status
