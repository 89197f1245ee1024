#!/usr/bin/env sh
# make pull-images REGISTRY_URL=oras://ghcr.io/ORG [TAG=...]: on a cluster with Apptainer, pull
# each stack's image, as pushed by .github/workflows/images.yml, into TESTBED_SIF_DIR, where
# `make site SIF_DIR=<that folder>` finds it (the image route). NOT RUN by the project:
# no Apptainer and no registry on the machine where it was written.
set -eu
url=${REGISTRY_URL:?"set REGISTRY_URL, e.g. oras://ghcr.io/your-org"}
tag=${TAG:-latest}
dir=${TESTBED_SIF_DIR:-$HOME/mpi-testbed-images}
command -v apptainer >/dev/null || { echo "error: apptainer not found on PATH" >&2; exit 2; }
repo=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$dir"
# the stacks srun can start (srun_mpi in site/stacks.toml): the hybrid model needs it
# (the registry needs only Python's standard library: no venv on a node that only pulls)
stacks=$(PYTHONPATH="$repo/reframe" python3 -c '
from testbed import registry
print(" ".join(s.name for s in registry.load().stacks.values() if s.srun_mpi))')
for s in $stacks; do
  echo "== $s"
  apptainer pull --force "$dir/$s.sif" "$url/mpi-testbed-$s:$tag"
done
