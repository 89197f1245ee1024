#!/usr/bin/env bash
# make setup-images: the Debian packages that make, push, pull and run the stacks' images:
# podman, runc, mmdebstrap and uidmap (make images), skopeo (the push to the emulated cluster's
# registry, whose server docker-registry `make setup` installs, and each node's pull), umoci
# (a node unpacks its pull, unprivileged) and charliecloud-runtime (ch-run: srun starts each
# rank inside the node's copy, no daemon).
set -euo pipefail
[ "$(id -u)" -eq 0 ] || { echo "error: ci/setup_images.sh installs packages: run it as root" >&2
                          exit 2; }
DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
  podman runc mmdebstrap uidmap skopeo umoci charliecloud-runtime
