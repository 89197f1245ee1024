#!/usr/bin/env bash
# make cluster-pull [STACKS=a,b]: every node of the emulated cluster pulls the stacks' images
# from the cluster's registry into its own storage (site/cluster/node_images.py: skopeo, then
# umoci; as the job account, one srun task a node), then the list of images every node has is
# written for the system testbed-cluster-images (site/local.py), and the registry's access log
# is counted per node. Default stacks: those in the registry that srun starts (srun_mpi) or the
# fallback launcher starts (fallback_env: LAM, PVM, whose ranks the wrapper puts in the image too).
# A stack whose pull fails on a node is named with its cause; the others go on (exit 1 at the end).
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
TESTBED_REPO=$repo . "$repo/site/env.sh"
run=${TESTBED_CLUSTER_DIR:-/run/mpi-testbed-cluster}
[ "$(id -u)" -eq 0 ] || { echo "error: ci/cluster_pull.sh starts jobs as the job account: run it as root" >&2; exit 2; }
where=$(python3 "$repo/site/cluster/oci_registry.py" address) || {
  echo "error: no registry: the emulated cluster is not up (make cluster-up)" >&2; exit 2; }
for tool in skopeo umoci ch-run; do
  command -v "$tool" >/dev/null || { echo "error: $tool is missing: make setup-images installs it" >&2; exit 2; }
done
stacks=$(python3 - "$where" "${STACKS:-}" <<'PY'
import json, sys, urllib.request
from testbed import registry
where, chosen = sys.argv[1], sys.argv[2]
reg = registry.load()
try:
    stacks = reg.select(chosen or None, source='STACKS')
except registry.RegistryError as err:
    sys.exit(f'error: {err}')
try:
    with urllib.request.urlopen(f'http://{where}/v2/_catalog', timeout=10) as r:
        pushed = {name.split('/', 1)[1] for name in json.load(r)['repositories']
                  if name.startswith('mpi-testbed/')}
except (OSError, ValueError, KeyError) as err:
    sys.exit(f'error: the registry {where} does not answer its catalog ({err}): '
             f'make cluster-status says why')
missing = [s.name for s in stacks if chosen and s.name not in pushed]
if missing:
    sys.exit(f'error: the registry {where} has no image of {", ".join(missing)} '
             f'(make images STACKS={",".join(missing)} with the cluster up)')
print(' '.join(s.name for s in stacks if s.name in pushed and (s.srun_mpi or s.fallback_env)))
PY
) || exit 2
[ -n "$stacks" ] || { echo "error: the registry $where has no image of a stack srun or the fallback starts (make images)" >&2; exit 2; }
account=$(python3 -c 'from testbed import registry; print(registry.load().run_as)')
nodes=$(python3 -c "import json; print(len(json.load(open('$run/state.json'))['nodes']))")
out=$(mktemp)
echo "== pulling on $nodes node(s) from $where: $stacks"
setpriv --reuid="$account" --regid="$account" --init-groups \
  env SLURM_CONF="$run/slurm.conf" HOME=/tmp USER="$account" \
  srun -N"$nodes" --ntasks-per-node=1 --time=30 --chdir=/tmp \
  python3 "$repo/site/cluster/node_images.py" pull "$where" $stacks > "$out" 2> "$out.err"
rc=$?
python3 - "$out" "$run/node-images.json" "$nodes" "$stacks" <<'PY'
import json, sys
from testbed_site.cluster import node_images
recs = [json.loads(line) for line in open(sys.argv[1]) if line.startswith('{')]
nodes = int(sys.argv[3])
print(f"{'node':8} {'stack':18} {'pull s':>8} {'unpack s':>9}  result")
for r in sorted(recs, key=lambda r: (r['stack'], r['node'])):
    result = r.get('error') or ('unpacked' if r.get('unpacked') else
                                'same manifest as before: not unpacked again')
    print(f"{r['node']:8} {r['stack']:18} {r['pull_s']:8.1f} {r.get('unpack_s', 0):9.1f}  {result}")
# the stacks of earlier pulls in this cluster's life stay as they were
try:
    before = json.load(open(sys.argv[2]))
except (OSError, ValueError):
    before = {}
ok, failed = before.get('images', {}), before.get('failed', {})
for stack in sys.argv[4].split():
    ok.pop(stack, None)
    failed.pop(stack, None)
    mine = [r for r in recs if r['stack'] == stack]
    errors = [f"{r['node']}: {r['error']}" for r in mine if 'error' in r]
    if len(mine) == nodes and not errors:
        ok[stack] = node_images.rootfs(stack)
    else:
        failed[stack] = '; '.join(errors) or f'{len(mine)} of {nodes} nodes reported a pull'
# a stack that failed keeps its cases on the images' system: they fail with the cause
json.dump({'images': ok, 'failed': failed}, open(sys.argv[2], 'w'), indent=1)
print(f'every node has: {", ".join(sorted(ok)) or "none"} (written to {sys.argv[2]}; '
      f'run them: --system testbed-cluster-images)')
for stack, why in failed.items():
    print(f'not on every node: {stack}: {why}')
PY
[ -s "$out.err" ] && sed 's/^/  srun: /' "$out.err" | tail -5
echo "== the registry's log: requests per node (successful GETs)"
python3 "$repo/site/cluster/node_images.py" count "$run/log/registry.log"
rm -f "$out" "$out.err"
exit $rc
