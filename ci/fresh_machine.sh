#!/usr/bin/env bash
# make fresh-machine [RUNS=1]: the README's test command as a newcomer runs it, on a machine
# that never ran the project. The nearest thing this host offers is a new container from a bare
# Debian bookworm root file system (mmdebstrap: git, make, python3, ca-certificates and nothing
# of the project), with a fresh clone of this repository's HEAD inside, then `CI=true bash
# .ci/run`, which runs `make test`: set-up from nothing (Debian packages, venvs, the two source
# builds, HPL), pytest, the quick pass, the emulated cluster. RUNS containers, one after the
# other, each new; nothing is kept between them but the logs and the run reports, in
# $TESTBED_FRESH_DIR (run-<stamp>-<i>.log, run-<stamp>-<i>/reports/), so that a figure of any run
# can be traced and the spread over the runs read with the project's own tool:
#   make spread REPORTS="$(ls -d /var/tmp/mpi-testbed-fresh/run-*/reports/last-quick.json)"
# A failed run also keeps its jobs' output and scripts.
#
# Why privileged and on the host's network: the set-up installs packages from the registries
# (apt, PyPI: the host network, no bridge is set up here), starts munge and Slurm, and the
# emulated cluster makes network namespaces, veth links and tc qdiscs; its nodes' addresses are
# in 198.18.0.0/15, as on the host. /dev/shm gets half the memory, as on a Debian machine (the
# container default, 64 MB, is smaller than what the MPI stacks map). The host's CA bundle and
# PIP_* settings go in as a machine of this type has them (a site proxy with its own authority).
# Run as root; only one run at a time on a 2-core machine, and nothing else measuring beside it.
# TESTBED_FRESH_COMMAND (make fresh-machine COMMAND="make run") runs another of the README's
# commands in the fresh clone instead of .ci/run (CI=true is set either way).
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-${RUNS:-1}}
command=${TESTBED_FRESH_COMMAND:-bash .ci/run}
case $command in *\'*) echo "error: COMMAND: '$command' holds a single quote" >&2; exit 2;; esac
out=${TESTBED_FRESH_DIR:-/var/tmp/mpi-testbed-fresh}
pkgs=git,make,python3,ca-certificates
image=localhost/mpi-testbed-fresh:bookworm
podman=(podman --runtime runc)

[ "$(id -u)" -eq 0 ] || { echo "error: ci/fresh_machine.sh runs podman as root: run it as root" >&2; exit 2; }
case $runs in ''|*[!0-9]*|0) echo "error: RUNS must be a positive whole number, not '$runs'" >&2; exit 2;; esac
for tool in podman mmdebstrap git; do
  command -v "$tool" >/dev/null || { echo "error: $tool is missing: make setup-images installs podman and mmdebstrap" >&2; exit 2; }
done
if [ -n "$(git -C "$repo" status --porcelain --untracked-files=no)" ]; then
  echo "warning: uncommitted changes are not in the clone; it runs HEAD $(git -C "$repo" rev-parse --short HEAD)" >&2
fi
mkdir -p "$out"

# The bare root file system, cached by its package list (a label of the image).
have=$("${podman[@]}" image inspect --format '{{index .Labels "mpi-testbed.fresh"}}' "$image" 2>/dev/null || true)
if [ "$have" != "bookworm:$pkgs" ]; then
  echo "== bare root file system (mmdebstrap bookworm minbase + $pkgs)"
  tar="$out/rootfs.tar"
  mmdebstrap --variant=minbase --include="$pkgs" bookworm "$tar" > "$out/rootfs.log" 2>&1 || {
    echo "error: mmdebstrap failed: $out/rootfs.log" >&2; exit 1; }
  "${podman[@]}" import --change "LABEL mpi-testbed.fresh=bookworm:$pkgs" "$tar" "$image" \
      >> "$out/rootfs.log" 2>&1 || { echo "error: podman import failed: $out/rootfs.log" >&2; exit 1; }
  rm -f "$tar"
fi

# Half the memory for /dev/shm, as tmpfs gives a machine by default.
shm_kib=$(( $(awk '/^MemTotal:/ {print $2}' /proc/meminfo) / 2 ))
env_args=(-e CI=true)
for v in $(env | sed -n 's/^\(PIP_[A-Z_]*\)=.*/\1/p'); do env_args+=(-e "$v"); done
ca=/etc/ssl/certs/ca-certificates.crt
mounts=(-v "$repo:/src:ro")
[ -r "$ca" ] && mounts+=(-v "$ca:$ca:ro")

status=0
for i in $(seq 1 "$runs"); do
  name=mpi-testbed-fresh-$$-$i
  stamp=$(date -u +%Y%m%dT%H%M%S)
  log="$out/run-$stamp-$i.log"
  keep="$out/run-$stamp-$i"        # the reports (and a failed run's job logs), before --rm drops them
  mkdir -p "$keep"
  echo "== fresh machine $i of $runs: container $name, log $log"
  t0=$(date +%s)
  echo "   command: $command"
  "${podman[@]}" run --rm --name "$name" --privileged --network host --hostname "fresh$i" \
      --shm-size "${shm_kib}k" --ulimit nofile=1024:4096 --ulimit nproc=4096:4096 \
      "${env_args[@]}" "${mounts[@]}" -v "$keep:/keep" "$image" \
      bash -c 'git config --global --add safe.directory /src &&
               git clone -q /src /root/mpi-testbed && cd /root/mpi-testbed &&
               echo "clone of $(git rev-parse --short HEAD)" || exit 1
               '"$command"'; rc=$?
               cp -a reframe/reports /keep/ 2>/dev/null
               [ $rc -eq 0 ] || { find /var/tmp/mpi-testbed-root/stage reframe/output \( -name "*.out" -o \
                   -name "*.err" -o -name "*.log" -o -name "rfm_job.sh" \) -size -2M \
                   -exec cp --parents {} /keep/ \; 2>/dev/null; }
               exit $rc' \
      > "$log" 2>&1
  rc=$?
  echo "   exit $rc in $(( $(date +%s) - t0 )) s; $(grep -E '^== (wall time|failed steps)' "$log" | tr '\n' ' ')"
  if [ "$rc" -eq 0 ]; then echo "   reports: $keep/reports"
  else status=1; echo "   reports and job logs: $keep"; fi
  # The cluster's bridge and veths live in the host's network namespace (shared): a container
  # that died mid-run must not leave them there.
  leftover=$(ip -o link show 2>/dev/null | grep -c ': tbc-' || true)
  if [ "$leftover" != 0 ]; then
    echo "warning: $leftover link(s) of the emulated cluster left on the host network; removing" >&2
    ip -o link show | sed -n 's/^[0-9]*: \(tbc-[^:@]*\).*/\1/p' | xargs -r -n1 ip link del 2>/dev/null
  fi
done
exit $status
