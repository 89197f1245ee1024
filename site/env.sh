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
    # The set-up installs this clone's testbed package into the venv (editable); the venv is
    # shared by the clones of a host, so say so when it serves another one.
    _tb_pkg=$("$TESTBED_HOME/reframe/bin/python" -c 'import importlib.util as u; print(u.find_spec("testbed").origin)' 2>/dev/null)
    if [ "$_tb_pkg" != "$_tb_repo/reframe/testbed/__init__.py" ]; then
        echo "site/env.sh: the ReFrame venv in $TESTBED_HOME serves the testbed package from" \
             "${_tb_pkg:-nowhere}, not this clone: run make setup here" >&2
    fi
    unset _tb_pkg
fi
unset _tb_repo
