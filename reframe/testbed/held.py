"""Whether a figure's same-job baseline held, so that the figure may be judged against its row.

HplRun's efficiency and Su3Run's speedup_busy divide by baselines measured in the same job,
before and after the run. When those baselines disagree by more than the figure's own band,
the machine changed state during the job and a verdict would be on the machine; when the
figure passes a physical bound (an efficiency above 1, a speedup above the rank count), a
baseline ran slow. Either way the figure is reported, not judged (checks.drop_judgement)."""
import math


def _spread(baselines, unit):
    """(max/min of the baselines, their spread in words)."""
    values = list(baselines.values())
    spread = max(values) / min(values)
    return spread, (f'the baselines of the job moved {spread:.3f}x ('
                    + ', '.join(f'{k} {v:.4g}' for k, v in baselines.items()) + f' {unit})')


def why_not_held(baselines, unit, band, figure=None, bound=None):
    """None where the figure can be judged, else why not, in one line.

    baselines: {name: value} of the job's baseline measurements (same unit, larger = faster
    or slower alike: only their spread counts); band: the figure's half-width in log space
    (None: no band, the spread is not judged); figure: the value; bound: (limit, text) that
    the figure cannot pass, e.g. (1, 'efficiency 1'), or None where it has none."""
    spread, moved = _spread(baselines, unit)
    if band is not None and math.log(spread) > band:
        return f'{moved}, beyond the {math.exp(band) - 1:.1%} the figure is judged to'
    if bound is not None and figure > bound[0]:
        return f'{figure:.3f} above {bound[1]}: a baseline ran slow'
    return None


def sides_not_held(baselines, unit, below, above):
    """{side: why} for each side of a figure's row ('lower', 'upper') that the job's baselines
    moved by more than: where the band is asymmetric (a side widened by `references transfer`)
    the narrow side cannot be judged when the baselines spread wider than it, though the wide
    side still can. below, above: the side's half-width in log space (None: no such side)."""
    spread, moved = _spread(baselines, unit)
    return {side: (f'{side} side not judged: {moved}, beyond the {math.exp(w) - 1:.1%} the row '
                   f'allows {"below" if side == "lower" else "above"} its value')
            for side, w in (('lower', below), ('upper', above))
            if w is not None and math.log(spread) > w}


def why_below_its_layer(ratio, layer):
    """None where a library's time over the layer it runs on (`ratio`) can be judged, else why
    not: below 1 the library beat the path its own messages take (MPI over TCP faster than raw
    TCP over the same link in the same job), so the layer's baseline ran slow."""
    if ratio < 1:
        return (f'{ratio:.3f} of {layer}: faster than the layer beneath it, so that baseline '
                'ran slow')
    return None
