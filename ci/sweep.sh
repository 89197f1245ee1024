#!/usr/bin/env bash
# ci/sweep.sh SERIES [reframe args...]
# A version sweep (docs/versions.md): installs the releases of SERIES from site/versions.toml
# (one venv per release, with reframe/testbed/install.py, only those stacks), runs ReFrame over
# them and prints the table of each figure against version (reframe/testbed/sweep_table.py).
#   SERIES   mpich | openmpi (every release of that family in site/versions.toml), or a
#            comma list of stack names from that file (mpich-4.1.3,mpich-4.2.3)
# Default tests: P2PMatrix Send-Recv/complete on the quick range with 15 samples per size, and
# Su3Run on 2 ranks (Ssend and Isend gathers); reframe arguments replace them.
# Report: reframe/reports/sweep-SERIES-<UTC stamp>.json. A stack that fails to install or run
# fails its own tests only (the installer records it; ReFrame goes on with the others).
# Exit status: 0 when every stack ran and passed, 1 otherwise, 2 on bad use.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
versions="$repo/site/versions.toml"
series=${1:-}
if [ -z "$series" ]; then
    echo "usage: ci/sweep.sh SERIES [reframe args...]   (SERIES: mpich, openmpi or a comma" \
         "list of stacks in site/versions.toml)" >&2
    exit 2
fi
shift
TESTBED_REPO=$repo . "$repo/site/env.sh"
export TESTBED_REGISTRY=$versions
# The series' stacks, in file order; an unknown series or stack name is bad use (exit 2).
stacks=$(python3 - "$series" <<'PY'
import sys
from testbed import registry
series = sys.argv[1]
try:
    reg = registry.load()
    families = {s.family for s in reg.stacks.values()}
    if series in families:
        print(','.join(s.name for s in reg.stacks.values() if s.family == series))
    elif ',' in series or series in reg.stacks:
        print(','.join(s.name for s in reg.select(series, source='SERIES')))
    else:
        sys.exit(f'error: ci/sweep.sh: unknown series {series!r} (series: '
                 f'{", ".join(sorted(families))}; or a comma list of stacks in {reg.path})')
except registry.RegistryError as err:
    sys.exit(f'error: ci/sweep.sh: {err}')
PY
) || exit 2
[ $# -gt 0 ] || set -- -n 'P2PMatrix.*Send-Recv/complete.*%size_range=quick' \
    -S P2PMatrix.samples=15 -n 'Su3Run.*%ranks=2'
echo "== sweep $series: $stacks"
PYTHONPATH="$repo/reframe" python3 -m testbed.install --registry "$versions" --stacks "$stacks"
rc=$?
[ $rc -eq 2 ] && exit 2          # not root, or a registry error: said above
[ $rc -eq 0 ] || { echo "error: ci/sweep.sh: the set-up failed (see above)" >&2; exit 1; }
# Every process this run starts inherits the id; the leftover check looks for it only.
export TESTBED_RUN_ID="sweep-$(date -u +%Y%m%d-%H%M%S)-$$"
mkdir -p "$repo/reframe/reports"
report="$repo/reframe/reports/sweep-${series//,/+}-$(date -u +%Y%m%dT%H%M%SZ).json"
cd "$repo/reframe"
# Serial and no retries, as the suite: two ranks own a 2-core machine.
. "$repo/ci/session_tags.sh"
TESTBED_STACKS=$stacks reframe -c tests -r --exec-policy=serial --keep-stage-files \
    --report-file "$report" --session-extras "$(session_tags "sweep-${series//,/+}"),stacks=${stacks//,/+}" "$@"
rc=$?
echo
echo "== figure against version ($report)"
python3 -m testbed.sweep_table "$report" --stacks "$stacks" || rc=1
echo
echo "== each release against the one before it (testbed.compare --series, threshold 5 %)"
python3 -m testbed.compare "$report" --series "$stacks" || rc=1
python3 -m testbed.procs --check --cleanup || rc=1
[ $rc -eq 0 ] || rc=1
exit $rc
