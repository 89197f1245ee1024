"""Inline SVG charts drawn here, so that the report is one file with no plotting library and no
script: line charts (log or linear axes, categorical x for release series), heat maps and
grouped bars. Every chart has its axis labels (units spelled out) and a stamp line at the foot,
so that an SVG copied out of the page still says where its figures come from. Marks that
carry data have class "data" (the browser check counts them)."""
import math
from html import escape

# Distinct on white and for the common colour-vision deficiencies (Okabe-Ito, then darker
# tones); past these, dashes tell series apart.
PALETTE = ['#0072b2', '#d55e00', '#009e73', '#cc79a7', '#e69f00', '#56b4e9', '#000000',
           '#8c564b', '#7f7f7f', '#bcbd22']
DASHES = ['', '6 3', '2 2', '8 3 2 3']
W, H = 620, 360
LEFT, RIGHT, TOP, BOTTOM = 72, 170, 34, 74      # room for tick labels, legend and stamp


def style(i):
    return PALETTE[i % len(PALETTE)], DASHES[(i // len(PALETTE)) % len(DASHES)]


def _text(x, y, s, size=11, anchor='start', extra=''):
    return (f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}"{extra}>'
            f'{escape(str(s))}</text>')


def _number(v):
    """A tick label: plain digits with thin grouping, never 1e+06."""
    if v >= 1e6 and v % 1e6 == 0:
        return f'{v / 1e6:g}M'
    if v >= 1e3 and v % 1e3 == 0:
        return f'{v / 1e3:g}k'
    return f'{v:g}'


def log_ticks(lo, hi):
    """1-2-5 ticks of each decade inside [lo, hi]; 1-3 or only the decades when they are many
    (labels would overlap)."""
    decades = math.log10(hi / lo)
    steps = (1, 2, 5) if decades <= 2.5 else (1, 3) if decades <= 5 else (1,)
    out = []
    for e in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1):
        out += [m * 10 ** e for m in steps if lo <= m * 10 ** e <= hi]
    return out


def lin_ticks(lo, hi, n=5):
    span = hi - lo or abs(hi) or 1
    step = 10 ** math.floor(math.log10(span / n))
    for m in (1, 2, 5, 10):
        if span / (m * step) <= n:
            step *= m
            break
    first = math.ceil(lo / step) * step
    return [round(first + i * step, 12) for i in range(int((hi - first) / step) + 1)]


class Axis:
    """Maps data to pixels; a log axis pads to whole 1-2-5 steps, a linear one starts at 0
    when the data are all positive (a bar or throughput read against zero)."""

    def __init__(self, values, log, lo_px, hi_px, zero=True):
        values = [v for v in values if v is not None and (v > 0 or not log)]
        lo, hi = min(values), max(values)
        self.log = log
        if log:
            lo, hi = lo / 1.15, hi * 1.15
        else:
            lo = 0 if zero and lo >= 0 else lo - 0.05 * (hi - lo or 1)
            hi = hi + 0.08 * (hi - lo or abs(hi) or 1)
        self.lo, self.hi, self.lo_px, self.hi_px = lo, hi, lo_px, hi_px
        self.ticks = log_ticks(lo, hi) if log else lin_ticks(lo, hi)
        if log and len(self.ticks) < 2:       # less than a decade: label the ends too
            self.ticks = sorted(set(self.ticks) | {float(f'{lo * 1.05:.2g}'),
                                                   float(f'{hi / 1.05:.2g}')})

    def __call__(self, v):
        f = (math.log(v / self.lo) / math.log(self.hi / self.lo)) if self.log else \
            (v - self.lo) / (self.hi - self.lo)
        return self.lo_px + f * (self.hi_px - self.lo_px)


def frame(fig_id, title, body, stamp, width=W, height=H):
    return (f'<svg id="{escape(fig_id)}" class="chart" xmlns="http://www.w3.org/2000/svg" '
            f'width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
            f'aria-label="{escape(title)}" font-family="sans-serif">'
            f'<title>{escape(title)}</title><rect width="100%" height="100%" fill="#fff"/>'
            + _text(LEFT, 18, title, 13, extra=' font-weight="bold"') + ''.join(body)
            + _text(6, height - 6, stamp, 9, extra=' fill="#555"') + '</svg>')


def _axes(x, y, xlabel, ylabel, xticks=None, height=H, width=W):
    out = [f'<rect x="{LEFT}" y="{TOP}" width="{width - LEFT - RIGHT}" '
           f'height="{height - TOP - BOTTOM}" fill="none" stroke="#333"/>']
    for t in y.ticks:
        py = y(t)
        out.append(f'<line x1="{LEFT}" x2="{width - RIGHT}" y1="{py:.1f}" y2="{py:.1f}" '
                   f'stroke="#ddd"/>')
        out.append(_text(LEFT - 5, py + 4, _number(t), 10, 'end'))
    for t, label in (xticks or [(t, _number(t)) for t in x.ticks]):
        px = x(t)
        out.append(f'<line y1="{TOP}" y2="{height - BOTTOM}" x1="{px:.1f}" x2="{px:.1f}" '
                   f'stroke="#eee"/>')
        out.append(_text(px, height - BOTTOM + 14, label, 10, 'middle'))
    out.append(_text((LEFT + width - RIGHT) / 2, height - BOTTOM + 34, xlabel, 11, 'middle'))
    cy = (TOP + height - BOTTOM) / 2
    lines = [ylabel]
    if len(ylabel) > 44:                    # longer than the axis: two lines, split at a space
        cut = ylabel.rfind(' ', 0, len(ylabel) // 2 + 8)
        lines = [ylabel[:cut], ylabel[cut + 1:]] if cut > 0 else lines
    for k, line in enumerate(lines):
        lx = 16 + 13 * k - 6 * (len(lines) - 1)
        out.append(_text(lx, cy, line, 11, 'middle', f' transform="rotate(-90 {lx} {cy:.1f})"'))
    return out


def _legend(labels, width=W):
    out = []
    for i, label in enumerate(labels):
        color, dash = style(i)
        y = TOP + 8 + 16 * i
        x0 = width - RIGHT + 10
        out.append(f'<line x1="{x0}" x2="{x0 + 18}" y1="{y}" y2="{y}" stroke="{color}" '
                   f'stroke-width="2.5" stroke-dasharray="{dash}"/>')
        out.append(_text(x0 + 22, y + 4, label[:26], 10))
    return out


def line_chart(fig_id, title, series, xlabel, ylabel, stamp, logx=True, logy=False,
               xticks=None, marks=(), categorical=False):
    """series: [(label, [segment, ...])], a segment a list of (x, y) drawn as one line (a gap
    between segments is a gap in the data, never bridged). xticks: [(x, label)] instead of a
    numeric axis's own labels, or with categorical=True the categories at x = 0, 1, ...
    marks: [(x0, x1, text, colour)] bands between two x positions."""
    # a log axis cannot place zero or less: such points are left out, not clipped
    series = [(name, [[(px, py) for px, py in seg if (px > 0 or not logx) and
                       (py > 0 or not logy)] for seg in segs]) for name, segs in series]
    series = [(name, [seg for seg in segs if seg]) for name, segs in series]
    series = [(name, segs) for name, segs in series if segs]
    points = [p for _, segs in series for seg in segs for p in seg]
    x = Axis([p[0] for p in points] + [t for t, _ in xticks or []], logx, LEFT, W - RIGHT,
             zero=False)
    if categorical:                         # half a step of room either side
        x.lo, x.hi = -0.5, len(xticks) - 0.5
    y = Axis([p[1] for p in points], logy, H - BOTTOM, TOP)
    body = _axes(x, y, xlabel, ylabel, xticks)
    for x0, x1, text, color in marks:
        a, b = x(x0), x(x1)
        body.append(f'<rect x="{a:.1f}" y="{TOP}" width="{b - a:.1f}" '
                    f'height="{H - TOP - BOTTOM}" fill="{color}" fill-opacity="0.12"/>')
        body.append(_text((a + b) / 2, TOP + 12, text, 10, 'middle', f' fill="{color}"'))
    for i, (label, segs) in enumerate(series):
        color, dash = style(i)
        for seg in segs:
            pts = ' '.join(f'{x(px):.1f},{y(py):.1f}' for px, py in seg)
            body.append(f'<polyline class="data" points="{pts}" fill="none" stroke="{color}" '
                        f'stroke-width="1.8" stroke-dasharray="{dash}"/>')
            if len(seg) <= 12:              # few points: show where they are
                body += [f'<circle class="data" cx="{x(px):.1f}" cy="{y(py):.1f}" r="3" '
                         f'fill="{color}"/>' for px, py in seg]
    body += _legend([s[0] for s in series])
    return frame(fig_id, title, body, stamp)


def _heat_colour(ratio):
    """White at 1, red when slower (ratio > 1), blue when faster; full at a factor of 2."""
    if ratio is None:
        return '#eee'
    f = max(-1.0, min(1.0, math.log2(ratio)))
    c = int(255 * (1 - abs(f) * 0.75))
    return f'rgb(255,{c},{c})' if f > 0 else f'rgb({c},{c},255)'


def heat_map(fig_id, title, rows, cols, values, stamp, xlabel, ylabel, centre=1.0,
             higher_is_better=False):
    """values[(row, col)] -> ratio (or None: no figure). Each cell prints its value; its
    colour is value / centre (white at the centre), red the worse side: above the centre for
    times, below it for rates (higher_is_better)."""
    cw, ch, left, top = max(60, min(110, 480 // max(len(cols), 1))), 20, 170, TOP + 18
    width = max(left + cw * len(cols) + 20, 600)
    height = top + ch * len(rows) + 64
    body = [_text(left + cw * len(cols) / 2, top - 6, xlabel, 11, 'middle')]
    for j, col in enumerate(cols):
        body.append(_text(left + cw * (j + 0.5), top + ch * len(rows) + 14, col, 10, 'middle'))
    for i, row in enumerate(rows):
        body.append(_text(left - 6, top + ch * (i + 0.7), row, 10, 'end'))
        for j, col in enumerate(cols):
            v = values.get((row, col))
            worse = v and (centre / v if higher_is_better else v / centre)
            body.append(f'<rect class="data" x="{left + cw * j}" y="{top + ch * i}" '
                        f'width="{cw - 1}" height="{ch - 1}" fill="{_heat_colour(worse)}"/>')
            body.append(_text(left + cw * (j + 0.5), top + ch * (i + 0.7),
                              '-' if v is None else f'{v:.3g}', 10, 'middle'))
    body.append(_text(8, top + ch * len(rows) + 32, ylabel, 10))
    return frame(fig_id, title, body, stamp, width=width, height=height)


def bar_chart(fig_id, title, categories, series, xlabel, ylabel, stamp, logy=False):
    """Grouped bars: series [(label, {category: value})]; a missing value leaves a gap."""
    values = [v for _, d in series for v in d.values() if v is not None]
    y = Axis(values, logy, H - BOTTOM, TOP)
    n = max(len(series), 1)
    slot = (W - LEFT - RIGHT) / max(len(categories), 1)
    bw = slot * 0.8 / n
    x = Axis([0, len(categories)], False, LEFT, W - RIGHT)
    x.lo, x.hi = 0, len(categories)
    ticks = [(k + 0.5, c) for k, c in enumerate(categories)]
    body = _axes(x, y, xlabel, ylabel, ticks)
    base = y(y.lo) if logy else y(max(y.lo, 0))
    for i, (_, d) in enumerate(series):
        color, _ = style(i)
        for k, c in enumerate(categories):
            v = d.get(c)
            if v is None or (logy and v <= 0):
                continue
            px, py = LEFT + slot * (k + 0.1) + bw * i, y(v)
            body.append(f'<rect class="data" x="{px:.1f}" y="{min(py, base):.1f}" width="{bw:.1f}" '
                        f'height="{abs(base - py):.1f}" fill="{color}"><title>'
                        f'{escape(c)}: {v:.4g}</title></rect>')
    body += _legend([s[0] for s in series])
    return frame(fig_id, title, body, stamp)
