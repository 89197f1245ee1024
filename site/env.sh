# Source this file (". site/env.sh") to use the testbed's pinned ReFrame by hand:
# it puts the ReFrame venv on PATH and points ReFrame at the embedded default configuration.
# Then: cd reframe && reframe -c tests -l   (or -r to run)
# POSIX sh (dash, /bin/sh of make) has no way to name the file being sourced, so the repository
# is, in order: $TESTBED_REPO (the Makefile passes it), bash's BASH_SOURCE, the current
# directory when it holds site/env.sh.
if [ -n "${TESTBED_REPO:-}" ]; then
    _tb_repo=$TESTBED_REPO
elif [ -n "${BASH_VERSION:-}" ]; then
    # eval: dash must never have to expand the array syntax
    eval '_tb_repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)'
elif [ -f site/env.sh ]; then
    _tb_repo=$(pwd)
else
    _tb_repo=
    echo "site/env.sh: cannot tell where the repository is; source it from the repository" \
         "root or set TESTBED_REPO" >&2
fi
if [ -n "$_tb_repo" ]; then
    export TESTBED_HOME=${TESTBED_HOME:-/opt/mpi-testbed}
    export PATH="$TESTBED_HOME/reframe/bin:$PATH"
    export RFM_CONFIG_FILES="$_tb_repo/site/local.py"
    export PYTHONPATH="$_tb_repo/reframe${PYTHONPATH:+:$PYTHONPATH}"
fi
unset _tb_repo
