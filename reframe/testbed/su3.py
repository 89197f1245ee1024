"""su3_rmd's figures from its records (apps/su3_rmd prints them): plaquettes compared across rank
counts, the gathers over memcpy and over the same exchange with no library, and the lower
quartile of the trajectory times that the speedups divide. Used by reframe/tests/su3_rmd.py."""
import math
import statistics

from testbed import checks

UNITARITY = 1e-10
#: plaquettes of the same seed and lattice agree to this, relative, whatever the ranks
SAME_PLAQUETTE = 1e-10


def plaquette_difference(ref, got):
    """The first pair (ref, got) of plaquettes that differ by more than SAME_PLAQUETTE
    relative, None if all agree (compared over the shorter list)."""
    return next(((a, b) for a, b in zip(ref, got) if abs(a - b) > SAME_PLAQUETTE * abs(a)),
                None)


def over_memcpy(gathers, field='lq_s'):
    """The geometric mean over message sizes of a time per message (`field` of the SU3-GATHER
    records) over the seconds memcpy takes for the same bytes on the same core. 'lq_s': the
    gathers' lower quartile inside MPI during the run (gather_over_memcpy); 'exchange_min_s':
    the same exchange timed alone after the run, the ranks in step, its least sample
    (exchange_over_memcpy)."""
    if not gathers:
        raise ValueError('no SU3-GATHER record in the output')
    logs = []
    for g in gathers:
        if not g.get('memcpy_lq_s') or not g.get(field, 0) > 0:
            raise ValueError(f'SU3-GATHER for {g.get("bytes")} bytes has no {field}: {g}')
        logs.append(math.log(g[field] / g['memcpy_lq_s']))
    return math.exp(sum(logs) / len(logs))


def exchange_problem(gathers):
    """What is wrong with the exchanges timed alone (SU3-GATHER records), None if nothing:
    every size was timed and each sample's last message brought what its sender sent."""
    for g in gathers:
        if 'exchange_bad' not in g:
            return f'the exchange of {g["bytes"]} bytes was not timed (see stderr)'
        if g['exchange_bad']:
            return f'the exchange of {g["bytes"]} bytes delivered a wrong payload in ' \
                f'{g["exchange_bad"]} of {g["exchange_samples"]} samples'
        for way in ('shm', 'cma'):
            if g.get(f'{way}_exchange_bad'):
                return f'the exchange of {g["bytes"]} bytes through ' \
                    f'{"shared memory" if way == "shm" else "the kernel"} (the baseline) ' \
                    f'delivered a wrong payload in {g[f"{way}_exchange_bad"]} of ' \
                    f'{g["exchange_samples"]} samples'
    return None


def over_shm(gathers, way='shm'):
    """The geometric mean over message sizes of the exchange timed alone (its least sample)
    over the same exchange with no library (its least sample, timed sample by sample beside
    it: apps/su3_rmd/shm_exchange.c), `way` 'shm' (copies through shared memory) or 'cma'
    (process_vm_readv); None where a record has no such time (more than two ranks, ranks on
    two hosts, or a kernel that refused process_vm_readv)."""
    field = f'{way}_exchange_min_s'
    if not gathers or not all(g.get(field, 0) > 0 and g.get('exchange_min_s', 0) > 0
                              for g in gathers):
        return None
    logs = [math.log(g['exchange_min_s'] / g[field]) for g in gathers]
    return math.exp(sum(logs) / len(logs))


def kernel_copy_problem(reference, gathers):
    """Why exchange_over_cma, where it has a row to meet, cannot be asserted, or None
    (testbed.checks.kernel_copy_problem): the kernel copy left out of every record."""
    return checks.kernel_copy_problem(reference, 'exchange_over_cma',
                                      over_shm(gathers, 'cma') is not None, 'Su3Run')


def lower_quartile(trajs):
    """The lower quartile of the seconds of the timed trajectories (trajectory 0, the cold
    start, has no dynamics), interpolated between order statistics."""
    t = [float(x['seconds']) for x in trajs if x['traj'] > 0]
    if not t:
        raise ValueError('no timed trajectory in the output')
    return statistics.quantiles(t, n=4, method='inclusive')[0] if len(t) > 1 else t[0]
