"""Where the ranks ran: each program reports every rank's CPU (sched_getcpu) at start and end,
and, when the rank pinned itself (--bind-self, stacks whose registry entry says self_bind), the
CPU it asked for. A run that is not oversubscribed must show one distinct CPU per rank that did
not change, and where the record says how many CPUs each rank may run on (cpus_allowed), that
is 1; a self-bound rank r must be on the (r mod n)-th CPU the job may use."""
import os

from testbed.checks import records


def allowed_cpus():
    """The CPUs this job may use, in order (ReFrame's local scheduler: the same as ours)."""
    return sorted(os.sched_getaffinity(0))


def placement_problem(run, end, self_bind=False, allowed=None):
    """None when the placement holds, else what is wrong. `run` is the start record (fields
    self_bound, bind_cpus, cpus_start, cpus_allowed if present), `end` the end record
    (cpus_end); `self_bind`: the registry says the ranks must pin themselves (so a run that
    did not is wrong too)."""
    allowed = allowed if allowed is not None else allowed_cpus()
    start, stop = run['cpus_start'], end['cpus_end']
    if self_bind and not run.get('self_bound'):
        return 'the stack needs self-binding (registry self_bind) but the ranks did not pin'
    if len(start) != len(stop) or not start:
        return f'CPU lists of different length: start {start}, end {stop}'
    if start != stop:
        return f'ranks moved: CPUs per rank at start {start}, at end {stop}'
    if len(set(start)) != len(start):
        return f'ranks share CPUs: {start} (one distinct CPU per rank expected)'
    allowed_counts = run.get('cpus_allowed')
    if allowed_counts is not None and any(n != 1 for n in allowed_counts):
        # bound means one CPU allowed: a rank allowed two may stay put by luck (Intel MPI's
        # default pin domain gave a 1-rank job both CPUs; it moved in one CI run in many)
        return (f'ranks not bound to one CPU each: CPUs each rank may run on '
                f'{allowed_counts}')
    if run.get('self_bound'):
        asked = [allowed[r % len(allowed)] for r in range(len(start))]
        if run['bind_cpus'] != asked or start != asked:
            return (f'self-bound ranks not on the CPUs asked: expected {asked}, pinned to '
                    f'{run["bind_cpus"]}, ran on {start}')
    return None


def launch_placement_problem(path, self_bind=False, one_per_node=False):
    """None when the p2p program's launch whose output is `path` ended and its ranks sat where
    they should, else what is wrong: no start or end record (the run was cut short), both ranks
    on one host where `one_per_node` asked for one on each node, or placement_problem."""
    run, end = records(path, 'P2P-RUN'), records(path, 'P2P-END')
    if not run or not end:
        return 'no P2P-RUN or P2P-END record: the run was cut short'
    if one_per_node and run[0]['host'] == run[0]['host_rank1']:
        return f"both ranks ran on {run[0]['host']}: one per node was asked for"
    return placement_problem(run[0], end[0], self_bind)
