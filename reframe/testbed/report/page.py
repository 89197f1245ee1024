"""The sections of one run report: point-to-point curves, pair matrices, raw-layer ratios, peers,
HPL, su3_rmd and start-up. Each figure is an inline SVG in a <figure> whose caption is its stamp
(session, date, machine, stack versions); missing data get a sentence, never an empty chart."""
import re
from html import escape

from testbed import peer_table, sizes
from testbed.report import svg
from testbed.report.data import geomean, modes, p2p_cases, perf, ranges, short_version, \
    size_table, stack_of

US = 'half round trip (microseconds, us)'
MBS = 'bandwidth (MB/s = 10^6 bytes per second)'
SIZE = 'message size (bytes, logarithmic axis; k = 10^3, M = 10^6)'
BASE_MODE = 'Send-Recv/complete'


def slug(text):
    return re.sub(r'[^A-Za-z0-9]+', '-', text).strip('-')


def unrecorded(run):
    """What a run without a machine record (its tests look up no reference: one-sided, LogGP,
    the thesis's) still says of its machine: ReFrame's own host name."""
    host = ((run.report or {}).get('session_info') or {}).get('hostname')
    return f'host {host} (no machine record in the report)' if host else \
        'machine not recorded in the report'


def machine_text(run):
    m = run.machine
    if not m:
        return unrecorded(run)
    return (f"machine {m.get('machine_type', '?')} {m.get('machine_id', '')} "
            f"({m.get('cpu_model', '?')}, {m.get('cpus', '?')} CPUs, "
            f"{(m.get('memory_bytes') or 0) / 1e9:.1f} GB, kernel {m.get('kernel', '?')})")


def svg_stamp(run):
    m = run.machine
    where = f"{m.get('machine_type', '?')} {m.get('machine_id', '')}" if m else unrecorded(run)
    return f'ReFrame session {run.session[:8]} | {run.time_start} | {where}'


def stack_text(run, stack):
    """'STACK: VERSION', with the configure flags of a stack built here."""
    flags = run.configure.get(stack)
    return (f'{stack}: {run.versions.get(stack, "version not reported")}'
            + (f' (built here, configure {flags})' if flags else ''))


def caption(run, stacks, what=''):
    versions = '; '.join(stack_text(run, s) for s in dict.fromkeys(stacks))
    return (f'<figcaption>{escape(what)}<span class="stamp">ReFrame session {escape(run.session)}'
            f', {escape(run.time_start)}, {escape(machine_text(run))}. '
            f'Stacks: {escape(versions)}.</span></figcaption>')


def figure(chart, cap):
    return f'<figure>{chart}{cap}</figure>'


def label(run, stack):
    v = short_version(run.versions.get(stack))
    return f'{stack} ({v})' if v and not stack.endswith(v) else stack


def note(text):
    return f'<p class="missing">{escape(text)}</p>'


def range_text(names):
    out = []
    for r in names:
        s = sizes.SCHEDULES.get(r)
        out.append(f'{r} {s[0]:,}..{s[-1]:,}' if s else r)
    return ', '.join(out) + ' bytes'


def p2p_curves(run, pre):
    cases = p2p_cases(run)
    if not cases:
        return [note('No P2PMatrix test case in this report: no point-to-point curves.')]
    tables = [size_table(tc) for tc in cases]
    out, missing = [], [t for t in tables if t.problem]
    if missing:
        out.append(f'<details class="missing"><summary>{len(missing)} of {len(tables)} per-size '
                   'tables not drawn (their cases are left out of the curves)</summary><ul>'
                   + ''.join(f'<li>{escape(t.stack)} {escape(t.mode)} {escape(t.size_range)}: '
                             f'{escape(t.problem)}</li>' for t in missing) + '</ul></details>')
    order = ranges(cases)
    for mode in modes(cases):
        series = {}
        for t in tables:
            if t.mode == mode and t.rows:
                series.setdefault(t.stack, []).append((order.index(t.size_range), t.rows))
        if not series:
            out.append(note(f'{mode}: no per-size table left for any stack; not drawn.'))
            continue
        stacks = list(series)
        for key, ylab, logy, what in (('bandwidth_MBps', MBS, False, 'Bandwidth'),
                                      ('median_us', US, True, 'Latency')):
            lines = [(label(run, s), [[(r['size_bytes'], r[key]) for r in rows]
                                      for _, rows in sorted(series[s])]) for s in stacks]
            fid = f'{pre}-p2p-{"bw" if key[0] == "b" else "lat"}-{slug(mode)}'
            chart = svg.line_chart(fid, f'{what}, {mode} (median per size)', lines, SIZE, ylab,
                                   svg_stamp(run), logx=True, logy=logy)
            gone = [f'{t.stack} {t.size_range}' for t in missing if t.mode == mode]
            why = f'Not drawn (no per-size table, see above): {", ".join(gone)}. ' if gone else ''
            out.append(figure(chart, caption(run, stacks, 'Lines break between size ranges. '
                                             + why)))
    return out


def pair_matrix(run, pre):
    cases = p2p_cases(run)
    if not cases:
        return [note('No P2PMatrix test case: no pair matrix.')]
    order, all_modes, out = ranges(cases), modes(cases), []
    lat = {(stack_of(tc), tc.get('mode'), tc.get('size_range')): perf(tc).get('latency')
           for tc in cases}
    for stack in [s for s in run.stacks if any(k[0] == s for k in lat)]:
        values = {}
        for (s, mode, rng), v in lat.items():
            base = lat.get((stack, BASE_MODE, rng))
            if s == stack and v and base and base[0] > 0:
                values[(mode, rng)] = v[0] / base[0]
        if not values:
            out.append(note(f'{stack}: no {BASE_MODE} latency to divide by; no pair matrix.'))
            continue
        chart = svg.heat_map(f'{pre}-pairs-{slug(stack)}', f'{label(run, stack)}: each mode '
                             f'over {BASE_MODE}', all_modes, order, values, svg_stamp(run),
                             'size range', 'Ratio of half round trips (geometric mean over the '
                             'range); red: slower, blue: faster, full colour at 2x.')
        out.append(figure(chart, caption(run, [stack], f'Ranges: {range_text(order)}. ')))
    return out


def raw_layers(run, pre):
    cases = p2p_cases(run)
    out = []
    for var, layer in (('time_over_shm', 'the shared-memory floor'),
                       ('time_over_memcpy', 'one-core memcpy')):
        for rng in ranges(cases):
            values = {(tc.get('mode'), stack_of(tc)): perf(tc)[var][0] for tc in cases
                      if tc.get('size_range') == rng and var in perf(tc)}
            if not values:
                out.append(note(f'No {var} figure over the {rng} range.'))
                continue
            stacks = [s for s in run.stacks if any(k[1] == s for k in values)]
            centre = geomean(list(values.values()))
            chart = svg.heat_map(
                f'{pre}-raw-{var}-{rng}', f'MPI time over {layer}, {rng} range', modes(cases),
                stacks, values, svg_stamp(run), 'stack', 'Ratio of times (MPI / raw layer, same '
                f'job). Colour: red above, blue below their geometric mean {centre:.3g}.',
                centre=centre)
            out.append(figure(chart, caption(run, stacks, f'{range_text([rng])}. ')))
    return out


def peers(run, pre):
    cases = [tc for tc in run.cases if tc['name'].startswith('PeerCompare')]
    if not cases:
        return [note('No PeerCompare case in this report (the full run has them: docs/peers.md);'
                     ' no peer figures.')]
    figs = {stack_of(tc): peer_table._figures(tc) for tc in cases}
    out = []
    for size in sorted({s for f in figs.values() for _, s in f}):
        series = [('ours, mean', 'imb', 'ours'), ('IMB-MPI1 t_avg', 'imb', 'peer'),
                  ('ours, minimum', 'netpipe', 'ours'), ('NetPIPE 3.7.2', 'netpipe', 'peer')]
        data = [(name, {s: f.get((peer, size), {}).get(kind) for s, f in figs.items()})
                for name, peer, kind in series]
        data = [d for d in data if any(v is not None for v in d[1].values())]
        if not data:
            out.append(note(f'Peers at {size:,} bytes: no figure recorded.'))
            continue
        chart = svg.bar_chart(f'{pre}-peers-{size}', f'Send-Recv beside IMB and NetPIPE, '
                              f'{size:,} bytes', list(figs), data, 'stack', US, svg_stamp(run))
        out.append(figure(chart, caption(run, list(figs), 'IMB quotes the mean of a loop, '
                                         'NetPIPE the least of its trials: ours likewise. ')))
    table = peer_table.render(run.report)
    rows = [ln for ln in table if ln.startswith('| ') and not ln.startswith('| stack')]
    out.append('<table><tr><th>stack</th><th>bytes</th><th>ours mean (us)</th><th>IMB t_avg '
               '(us)</th><th>ours/IMB</th><th>ours min (us)</th><th>NetPIPE (us)</th>'
               '<th>ours/NetPIPE</th><th>result</th></tr>' + ''.join(
                   '<tr>' + ''.join(f'<td>{escape(c.strip())}</td>' for c in r.strip('|')
                                    .split('|')) + '</tr>' for r in rows) + '</table>')
    return out


def _bars(run, pre, fid, title, cases, pick, ylab, xlab, scale=1.0):
    """Grouped bars of one perf variable: categories from pick(tc) -> {category: variable}."""
    data, stacks, cats = {}, [], []
    for tc in cases:
        for cat, var in pick(tc).items():
            v = perf(tc).get(var)
            if v is None:
                continue
            data.setdefault(stack_of(tc), {})[cat] = v[0] * scale
            stacks += [stack_of(tc)] if stack_of(tc) not in stacks else []
            cats += [cat] if cat not in cats else []
    if not data:
        return note(f'{title}: no figure in this report.')
    chart = svg.bar_chart(f'{pre}-{fid}', title, cats, [(label(run, s), data[s]) for s in stacks],
                          xlab, ylab, svg_stamp(run))
    cpus = run.machine.get('cpus')
    over = f'More ranks than the machine\'s {cpus} CPUs: oversubscribed, reported only. ' \
        if cpus and any((tc.get('num_tasks') or 0) > cpus for tc in cases) else ''
    return figure(chart, caption(run, stacks, over))


def _n_of(tc, prefix):
    return {int(k[len(prefix):]): k for k in perf(tc) if re.fullmatch(prefix + r'\d+', k)}


def apps(run, pre):
    hpl = [tc for tc in run.cases if tc['name'].startswith('HplRun')]
    su3 = [tc for tc in run.cases if tc['name'].startswith('Su3Run')]
    start = [tc for tc in run.cases if tc['name'].startswith('StartupTime')]
    out = ['<h3>HPL</h3>']
    for var, ylab, what in (('gflops_N', 'rate (Gflop/s = 10^9 floating-point operations per '
                             'second)', 'Gflop/s'),
                            ('efficiency_N', 'efficiency (ratio to cores x one-core DGEMM)',
                             'efficiency')):
        out.append(_bars(run, pre, f'hpl-{var[:-2]}', f'HPL {what} against N and process grid',
                         hpl, lambda tc, v=var: {f"{tc.get('grid')} N={n}": k for n, k in
                                                 sorted(_n_of(tc, v).items())},
                         ylab, 'process grid and matrix order N'))
    out.append('<h3>su3_rmd</h3>')
    lattice = {1: '4^3x8', 2: '6^3x12', 3: '8^3x16', 4: '12^3x24', 5: '16^3x32'}

    def su3_cat(tc):
        return (f"{lattice.get(tc.get('preset'), tc.get('preset'))} "
                f"{tc.get('num_tasks')}r {tc.get('comm')}")
    for var, what, ylab, scale in (
            ('s_per_traj', 'time per trajectory', 'time per trajectory (seconds)', 1.0),
            ('comm_share', 'share of time in MPI', 'share of wall time in MPI calls (percent)',
             100.0)):
        out.append(_bars(run, pre, f'su3-{var}', f'su3_rmd {what} against lattice and ranks',
                         su3, lambda tc, v=var: {su3_cat(tc): v}, ylab,
                         'lattice, ranks (r), neighbour gather', scale))
    out.append('<h3>Start-up</h3>')
    for what in ('init', 'exit'):
        lines = [(label(run, stack_of(tc)), [sorted((n, perf(tc)[k][0]) for n, k in
                                                    _n_of(tc, f'{what}_np').items())])
                 for tc in start if _n_of(tc, f'{what}_np')]
        if not lines:
            out.append(note(f'Start-up {what}: no StartupTime figure in this report.'))
            continue
        nps = sorted({n for _, segs in lines for n, _ in segs[0]})
        chart = svg.line_chart(f'{pre}-startup-{what}', f'Launch to MPI_{what.title()} '
                               '(median over repeats)' if what == 'init' else
                               'Launch to exit of every rank (median over repeats)',
                               lines, 'ranks (processes)', 'time (seconds)', svg_stamp(run),
                               logx=False, xticks=[(n, str(n)) for n in nps])
        out.append(figure(chart, caption(run, [stack_of(tc) for tc in start])))
    return out


def run_section(run, pre):
    """Every per-report section; returns [(anchor, title, html)]."""
    from testbed.report import families      # it draws with this module's helpers
    return [(f'{pre}-curves', 'Point-to-point curves (NetPIPE style)', p2p_curves(run, pre)),
            (f'{pre}-pairs', 'Pair matrix per stack', pair_matrix(run, pre)),
            (f'{pre}-raw', 'Ratios to the raw layers', raw_layers(run, pre)),
            (f'{pre}-peers', 'Peers: IMB and NetPIPE', peers(run, pre)),
            (f'{pre}-apps', 'Applications: HPL, su3_rmd, start-up', apps(run, pre)),
            (f'{pre}-pvm', 'PVM: send and receive calls, encodings', families.pvm(run, pre)),
            (f'{pre}-rma', 'MPI one-sided: Put and Get beside Send-Recv',
             families.one_sided(run, pre))]
