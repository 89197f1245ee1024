#!/usr/bin/env bash
# Install everything the embedded default needs (Debian packages, the pinned ReFrame venv, one
# venv per PyPI stack, the unprivileged job account). Idempotent; run as root.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
if [ "$(id -u)" -ne 0 ]; then
  echo "error: ci/setup.sh installs packages: run it as root (or with sudo)" >&2
  exit 2
fi
# tomllib needs Python >= 3.11: Debian bookworm's python3 has it.
py=/usr/bin/python3
[ -x "$py" ] || py=$(command -v python3)
# The installer is part of the testbed package it installs: before the set-up, Python finds it
# through PYTHONPATH (as the other tools that run before any venv: docs/code.md).
PYTHONPATH="$repo/reframe" exec "$py" -m testbed.install "$@"
