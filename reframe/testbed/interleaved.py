"""Jobs that run the point-to-point program two ways, launch by launch, over the quick sizes:
ContainerTax (bare, then inside the stack's image) and BindModel (the stack's own build, then
the bind model's image with the stack's library bound in). Alternating in one job (ABAB) puts
the machine's slow minutes on both sides; each round pairs a launch of the first side with the
launch of the second right after it, and a figure is the median over the rounds."""
import os
import statistics

from testbed.checks import records

SIZES = (8, 1024, 65536, 1048576)


def outputs(test, side, last):
    """The output files of `side`'s rounds (SIDE_R.out in the stage); the final round of the
    side named `last` is the job's own launch, its stdout."""
    names = [f'{side}_{r}.out' for r in range(1, test.rounds + 1)]
    if side == last:
        names[-1] = test.stdout.evaluate()
    return [os.path.join(test.stagedir, n) for n in names]


def incomplete(paths):
    """Why a launch's output falls short (no P2P-END record, or not every quick size); None
    when none does."""
    for path in paths:
        name = os.path.basename(path)
        if not os.path.exists(path) or not records(path, 'P2P-END'):
            return f'{name}: no P2P-END record (see its .err)'
        got = {r['size_bytes'] for r in records(path, 'P2P') if r['transport'] == 'mpi'}
        if got != set(SIZES):
            return f'{name}: sizes {sorted(got)}, not {list(SIZES)}'
    return None


def medians(recs):
    """{size: median half round trip (us)} of the MPI records of one launch."""
    return {r['size_bytes']: r['median_us'] for r in recs if r.get('transport') == 'mpi'}


def paired(first, second, sides):
    """Per size, the median over rounds of each side's time ('first_us', 'second_us'), of the
    second over the first round by round ('ratio', with the rounds' 'ratios') and of the time
    the second adds ('extra_us'). `first`, `second`: one list of MPI records per round, in the
    order they ran; `sides`: their names, for the error. A size missing from a round leaves that
    round out for it."""
    if len(first) != len(second) or not first:
        raise ValueError(f'{len(first)} {sides[0]} and {len(second)} {sides[1]} launches: they '
                         f'pair by round')
    pairs = [(medians(a), medians(b)) for a, b in zip(first, second)]
    out = {}
    for size in sorted({s for a, b in pairs for s in a if s in b}):
        both = [(a[size], b[size]) for a, b in pairs if size in a and size in b]
        ratios = [b / a for a, b in both]
        out[size] = {'first_us': statistics.median(a for a, _ in both),
                     'second_us': statistics.median(b for _, b in both),
                     'ratio': statistics.median(ratios), 'ratios': ratios,
                     'extra_us': statistics.median(b - a for a, b in both)}
    return out
