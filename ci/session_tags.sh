# Sourced by the ci/ scripts that run ReFrame: session_tags PROFILE prints the tags every stored
# session carries (ReFrame's --session-extras; they land in the report's session_info and the
# results storage): the run's profile, the project's commit and the machine type. testbed.compare
# refuses sessions of two machine types on them; history and the report group sessions by them.
session_tags() {
    local commit mtype
    commit=$(git -C "$repo" describe --always --dirty --abbrev=12 2>/dev/null || echo none)
    mtype=$(cd "$repo/reframe" && python3 -c \
        'from testbed import machine; print(machine.record()["machine_type"])') || mtype=unknown
    echo "profile=$1,testbed_commit=$commit,machine_type=$mtype"
}
