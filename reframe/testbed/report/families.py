"""The report's PVM and one-sided figures: PvmMatrix's send and receive calls per route and
packing, OneSided's Put and Get per synchronisation beside Send-Recv in the same job."""
from testbed.report import svg
from testbed.report.data import geomean, perf, stack_of
from testbed.report.page import (MBS, US, _bars, caption, figure, label, note, range_text,
                                 slug, svg_stamp)

RATIO = 'ratio (one-sided time / two-sided Send-Recv time, same job)'


def _pvm_values(cases, what):
    """{('PAIR ENCODING', 'ROUTE PACK'): value} of PvmMatrix cases' perf variables
    WHAT_PAIR_ENCODING (latency: smallest size of the range, bandwidth: largest)."""
    out = {}
    for tc in cases:
        for var, (value, _) in perf(tc).items():
            if var.startswith(f'{what}_') and var.count('_') == 2:
                _, pair, enc = var.split('_')
                out[(f'{pair} {enc}', f"{tc.get('route')} {tc.get('pack')}")] = value
    return out


def pvm(run, pre):
    cases = [tc for tc in run.cases if tc['name'].startswith('PvmMatrix')]
    if not cases:
        return [note('No PvmMatrix case in this report: no PVM figures.')]
    out = []
    for stack in [s for s in run.stacks if any(stack_of(tc) == s for tc in cases)]:
        for rng in sorted({str(tc.get('size_range')) for tc in cases}):
            picked = [tc for tc in cases if stack_of(tc) == stack and
                      str(tc.get('size_range')) == rng]
            for what, unit, where in (('latency', US, 'smallest'),
                                      ('bandwidth', MBS, 'largest')):
                values = _pvm_values(picked, what)
                if not values:
                    out.append(note(f'{stack} {rng}: no PVM {what} figure.'))
                    continue
                rows = list(dict.fromkeys(r for r, _ in values))
                cols = sorted({c for _, c in values})
                chart = svg.heat_map(
                    f'{pre}-pvm-{what[:3] if what == "latency" else "bw"}-{slug(stack)}-{rng}',
                    f'{label(run, stack)}: {what}, {where} size of the {rng} range', rows,
                    cols, values, svg_stamp(run), 'route and packing', f'{unit}; colour: red '
                    'worse (slower), blue better than the geometric mean of the cells.',
                    centre=geomean(list(values.values())), higher_is_better=what == 'bandwidth')
                out.append(figure(chart, caption(run, [stack], f'{range_text([rng])}. ')))
    return out


def one_sided(run, pre):
    cases = [tc for tc in run.cases if tc['name'].startswith('OneSided')]
    if not cases:
        return [note('No OneSided case in this report (make run has them: docs/one-sided.md);'
                     ' no one-sided figures.')]
    out = []
    for fid, title, suffix, ylab in (
            ('rma-lat', 'One-sided half round trip at 8 bytes', 'latency_8B', US),
            ('rma-bw', 'One-sided bandwidth at 1 MiB', 'bandwidth_1MiB', MBS),
            ('rma-ratio-lat', 'One-sided over Send-Recv, 8 bytes', 'over_sendrecv_latency_8B',
             RATIO),
            ('rma-ratio-bw', 'One-sided over Send-Recv bandwidth, 1 MiB',
             'over_sendrecv_bandwidth_1MiB', 'ratio (one-sided bandwidth / Send-Recv '
             'bandwidth, same job)')):
        out.append(_bars(run, pre, fid, f'{title}, per synchronisation', cases,
                         lambda tc, s=suffix: {f"{op} {tc.get('sync')}": f'{op}_{s}'
                                               for op in ('put', 'get')},
                         ylab, 'operation and synchronisation'))
    return out
