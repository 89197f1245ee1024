"""The container tax from one job's interleaved launches (tests/container_tax.py): the same
point-to-point program run bare and inside the stack's image in turn, round by round (ABAB),
so that the machine's slow minutes fall on both sides; each round pairs its bare launch with
the image launch right after it."""
import statistics


def medians(recs):
    """{size: median half round trip (us)} of the MPI records of one launch."""
    return {r['size_bytes']: r['median_us'] for r in recs if r.get('transport') == 'mpi'}


def tax(bare, image):
    """Per size: the median over rounds of image over bare ('ratio') and of image minus bare
    in us ('extra_us'), with the rounds' ratios ('ratios'). `bare`, `image`: one list of MPI
    records per round, in the order they ran; a size missing from a round is left out of
    that round."""
    if len(bare) != len(image) or not bare:
        raise ValueError(f'{len(bare)} bare and {len(image)} image launches: they pair by round')
    pairs = [(medians(b), medians(i)) for b, i in zip(bare, image)]
    sizes = sorted({s for b, i in pairs for s in b if s in i})
    out = {}
    for size in sizes:
        ratios = [i[size] / b[size] for b, i in pairs if size in b and size in i]
        extra = [i[size] - b[size] for b, i in pairs if size in b and size in i]
        out[size] = {'ratio': statistics.median(ratios), 'extra_us': statistics.median(extra),
                     'ratios': ratios}
    return out
