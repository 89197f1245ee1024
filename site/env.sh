# Source this file (". site/env.sh") to use the testbed's pinned ReFrame by hand:
# it puts the ReFrame venv on PATH and points ReFrame at the embedded default configuration.
# Then: cd reframe && reframe -c tests -l   (or -r to run)
_tb_repo=$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")/.." && pwd)
export TESTBED_HOME=${TESTBED_HOME:-/opt/mpi-testbed}
export PATH="$TESTBED_HOME/reframe/bin:$PATH"
export RFM_CONFIG_FILES="$_tb_repo/site/local.py"
export PYTHONPATH="$_tb_repo/reframe${PYTHONPATH:+:$PYTHONPATH}"
unset _tb_repo
