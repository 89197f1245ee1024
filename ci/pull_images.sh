#!/usr/bin/env sh
# make pull-images REGISTRY_URL=docker://HOST:PORT|oras://HOST/ORG [TAG=] [SIF_DIR=] [STACKS=a,b]
#                  [NO_HTTPS=1]
# On a cluster with Apptainer: pull each stack's image into SIF_DIR (default
# ~/mpi-testbed-images) as <stack>.sif, where `make site SIF_DIR=<that folder>` finds it (the
# image route, docs/apptainer.md). Two registries, each with the names its pusher gives:
#   docker://HOST:PORT  an OCI registry holding the images as ci/images.sh pushes them to the
#                       emulated cluster's (site/cluster/oci_registry.py):
#                       HOST:PORT/mpi-testbed/<stack>:<TAG>, TAG current by default (or the
#                       in-<hash> tag of one build); Apptainer makes each a SIF as it pulls
#   oras://HOST/ORG     SIF files as .github/workflows/images.yml pushes them:
#                       HOST/ORG/mpi-testbed-<stack>:<TAG>, TAG latest by default
# NO_HTTPS=1: a registry that speaks plain HTTP (the emulated cluster's): Apptainer's
# documented --no-https ("use http instead of https for docker:// oras:// and library://
# URIs", apptainer-pull(1): https://apptainer.org/docs/user/main/cli/apptainer_pull.html).
# A registry that needs a login: `apptainer registry login --username U docker://HOST:PORT`
# (or oras://HOST) once before (https://apptainer.org/docs/user/main/cli/apptainer_registry_login.html).
# Every stack with an image is pulled, the fallback launcher's (LAM, PVM) too: make site runs
# only srun's stacks in images, the others' images are for a run by hand (docs/apptainer.md).
# A pull that fails is named and the others go on (exit 1 at the end).
# NOT RUN with Apptainer by the project: no Apptainer on the machine where it was written; its
# commands were checked against a fake apptainer (reframe/unittests/test_apptainer_route.py).
set -eu
die() { echo "error: $*" >&2; exit 2; }
url=${REGISTRY_URL:-}
[ -n "$url" ] || die "set REGISTRY_URL: docker://HOST:PORT (an OCI registry) or oras://HOST/ORG (SIF files)"
url=${url%/}
case $url in
  docker://?*) tag=${TAG:-current} ;;
  oras://?*) tag=${TAG:-latest} ;;
  *) die "REGISTRY_URL=$url: the scheme must be docker:// (an OCI registry) or oras:// (SIF files)" ;;
esac
case ${NO_HTTPS:-} in
  1) https=--no-https ;;
  ''|0) https= ;;
  *) die "NO_HTTPS=$NO_HTTPS: 1 (plain HTTP) or 0" ;;
esac
command -v apptainer >/dev/null || die "apptainer not found on PATH: pull on a node with Apptainer (docs/apptainer.md)"
repo=$(cd "$(dirname "$0")/.." && pwd)
dir=${SIF_DIR:-${TESTBED_SIF_DIR:-$HOME/mpi-testbed-images}}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
# The stacks with an image (what ci/images.sh builds: origin debian, pypi or source), or
# STACKS; the registry needs only Python's standard library: no venv on a node that only pulls.
# Each word: <stack>:srun or <stack>:fallback (the launcher that starts it on a cluster).
list=$(PYTHONPATH="$repo/reframe" python3 -c '
import sys
from testbed import registry
reg = registry.load()
try:
    chosen = reg.select(sys.argv[1] or None, source="STACKS")
except registry.RegistryError as err:
    sys.exit(f"error: {err}")
for s in chosen:
    if s.origin in ("debian", "pypi", "source"):
        print(s.name + (":srun" if s.srun_mpi else ":fallback"))
    else:
        print(f"skip {s.name}: origin {s.origin}: no image is built for it", file=sys.stderr)
' "${STACKS:-}") || exit 2
failed=''
by_hand=''
for entry in $list; do
  s=${entry%%:*}
  case $url in
    docker://*) ref=$url/mpi-testbed/$s:$tag ;;
    *) ref=$url/mpi-testbed-$s:$tag ;;
  esac
  echo "== $s: $ref"
  # $https unquoted: one option or none
  if apptainer pull --force $https "$dir/$s.sif" "$ref"; then
    [ "${entry#*:}" = srun ] || by_hand="$by_hand $s"
  else
    echo "error: $s: apptainer pull $ref failed (exit $?)" >&2
    failed="$failed $s"
  fi
done
[ -z "$by_hand" ] || echo "note:$by_hand: the fallback launcher's stacks: make site leaves them" \
  "out of the image route; run them by hand (docs/apptainer.md)"
echo "images in $dir; next: make site SIF_DIR=$dir PROVIDE=image,installed,spack,module"
[ -z "$failed" ] || { echo "error: not pulled:$failed" >&2; exit 1; }
