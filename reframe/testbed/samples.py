"""The samples behind a test's figures, as a test case keeps them (figure_samples) for
testbed.compare: every sample of every size, not their median. Names are
'MEMBER/half_round_trip_us@SIZE' for tests that measure several members of one question in a
job (PVM's send and receive calls, one-sided's operations): testbed.compare.family_figure
strips the member, so that members of one size form a family as P2PMatrix's modes do."""

FIGURE = 'half_round_trip_us'


def _samples(record):
    values = record.get('samples_us')
    if not isinstance(values, list) or not values:
        raise ValueError(f"{record.get('transport')} {record.get('pair')} "
                         f"{record.get('size_bytes')} bytes: no samples_us in the record")
    return [float(v) for v in values]      # float(): %g prints 104 as a JSON integer


def pvm(records, route):
    """{'PAIR/ENCODING/half_round_trip_us@SIZE': samples} of a PvmMatrix run's P2P records
    (variant 'ROUTE-ENCODING'; the route is the test's parameter, so not in the name)."""
    out = {}
    for r in records:
        if r.get('transport') == 'pvm':
            enc = str(r['variant']).removeprefix(f'{route}-')
            out[f"{r['pair']}/{enc}/{FIGURE}@{r['size_bytes']}"] = _samples(r)
    return out


def rma(records):
    """{'OP/half_round_trip_us@SIZE': samples} of a OneSided run's one-sided records (put,
    get); the Send-Recv baselines beside them are P2PMatrix's question, left out."""
    return {f"{str(r['pair']).lower()}/{FIGURE}@{r['size_bytes']}": _samples(r)
            for r in records if r.get('transport') == 'rma'}
