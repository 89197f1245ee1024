#!/usr/bin/env bash
# make setup-images: the Debian packages that make and push the stacks' images: podman, runc,
# mmdebstrap, uidmap and skopeo (the push to the emulated cluster's registry, whose server,
# docker-registry, `make setup` installs with the cluster's packages).
set -euo pipefail
[ "$(id -u)" -eq 0 ] || { echo "error: ci/setup_images.sh installs packages: run it as root" >&2
                          exit 2; }
DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
  podman runc mmdebstrap uidmap skopeo
