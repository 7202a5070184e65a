"""Small SVG charts, rendered on the server from plain numbers: bars, lines, a timeline and horizontal bars.

No script and no library: each chart is one ``<svg>`` element with a fixed ``viewBox`` that scales to its box,
coloured by classes the dashboard's stylesheet defines (light and dark), so the page's policy
(``default-src 'self'``) has nothing to allow. Every text that reaches a chart (a job's name, a tooltip) is
escaped here. A point's exact figure is in its ``<title>``, which browsers show on hover. Empty data draws the
frame with a "no data" line rather than nothing, so the page does not jump when the first figure arrives.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

W, H = 480, 120
LEFT, RIGHT, TOP, BOTTOM = 52, 8, 10, 20  # the plot's margins: y labels on the left, x ticks below


def e(value: object) -> str:
    return escape(str(value), quote=True)


def num(value: float) -> str:
    """A figure as the chart writes it: whole numbers plainly, small ones with two significant digits."""
    if value == 0 or abs(value) >= 100 or float(value).is_integer():
        return f"{value:,.0f}"
    digits = max(0, 1 - math.floor(math.log10(abs(value))))
    return f"{value:.{digits}f}"


def nice_max(value: float) -> float:
    """The axis' top: ``value`` rounded up to 1, 2 or 5 times a power of ten."""
    if value <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    return next(step * power for step in (1, 2, 5, 10) if step * power >= value)


def _svg(label: str, body: str, height: int = H, cls: str = "") -> str:
    return (f'<svg class="chart {e(cls)}" viewBox="0 0 {W} {height}" role="img" aria-label="{e(label)}" '
            f'preserveAspectRatio="xMidYMid meet"><title>{e(label)}</title>{body}</svg>')


def _frame(top: float, unit: str, ticks: Sequence[tuple[float, str]], height: int = H, prefix: str = "") -> str:
    """The y axis (0 and ``top``, with a grid line) and the x ticks (position 0..1 along the plot, text)."""
    base = height - BOTTOM
    out = [f'<line class="axis" x1="{LEFT}" y1="{base}" x2="{W - RIGHT}" y2="{base}"/>',
           f'<line class="grid" x1="{LEFT}" y1="{TOP}" x2="{W - RIGHT}" y2="{TOP}"/>',
           f'<text class="tick" x="{LEFT - 4}" y="{TOP + 4}" text-anchor="end">'
           f'{e(prefix)}{e(num(top))}{e(unit)}</text>',
           f'<text class="tick" x="{LEFT - 4}" y="{base}" text-anchor="end">0</text>']
    for at, text in ticks:
        x = LEFT + at * (W - LEFT - RIGHT)
        anchor = "start" if at <= 0.01 else "end" if at >= 0.99 else "middle"
        out.append(f'<text class="tick" x="{x:.1f}" y="{height - 5}" text-anchor="{anchor}">{e(text)}</text>')
    return "".join(out)


def _nodata(text: str, height: int = H) -> str:
    return f'<text class="nodata" x="{W / 2}" y="{height / 2}" text-anchor="middle">{e(text)}</text>'


def bars(values: Sequence[float], *, label: str, ticks: Sequence[tuple[float, str]] = (),
         tips: Sequence[str] | None = None, unit: str = "", prefix: str = "", empty: str = "No data yet.") -> str:
    """One bar per value, left to right (a value of 0 draws none); ``tips[i]`` is bar i's tooltip; the axis
    writes its figures as ``prefix`` figure ``unit`` ("$0.05", "2 s")."""
    top = nice_max(max(values, default=0))
    plot_w, plot_h = W - LEFT - RIGHT, H - TOP - BOTTOM
    slot = plot_w / max(1, len(values))
    out = [_frame(top, unit, ticks, prefix=prefix)]
    for i, value in enumerate(values):
        if value <= 0:
            continue
        h = max(1.0, value / top * plot_h)
        tip = tips[i] if tips is not None and i < len(tips) else num(value)
        out.append(f'<rect class="bar" x="{LEFT + i * slot + slot * 0.1:.1f}" y="{H - BOTTOM - h:.1f}" '
                   f'width="{max(1.0, slot * 0.8):.1f}" height="{h:.1f}"><title>{e(tip)}</title></rect>')
    if not any(v > 0 for v in values):
        out.append(_nodata(empty))
    return _svg(label, "".join(out), cls="bars")


@dataclass(frozen=True)
class Series:
    name: str
    values: Sequence[float | None]  # None: no figure for that point (the line breaks there)
    cls: str


def lines(series: Sequence[Series], *, label: str, ticks: Sequence[tuple[float, str]] = (), unit: str = "",
          empty: str = "No data yet.") -> str:
    """A line per series over the same points; a point without a figure breaks its line."""
    figures = [v for s in series for v in s.values if v is not None]
    top = nice_max(max(figures, default=0))
    plot_w, plot_h = W - LEFT - RIGHT, H - TOP - BOTTOM
    out = [_frame(top, unit, ticks)]
    for k, s in enumerate(series):
        n = max(1, len(s.values))
        step = plot_w / n
        path, dots = [], []
        pen_up = True
        for i, value in enumerate(s.values):
            if value is None:
                pen_up = True
                continue
            x, y = LEFT + (i + 0.5) * step, H - BOTTOM - min(value, top) / top * plot_h
            path.append(f"{'M' if pen_up else 'L'}{x:.1f} {y:.1f}")
            pen_up = False
            dots.append(f'<circle class="dot {e(s.cls)}" cx="{x:.1f}" cy="{y:.1f}" r="2">'
                        f'<title>{e(s.name)}: {e(num(value))}{e(unit)}</title></circle>')
        if path:
            out.append(f'<path class="line {e(s.cls)}" d="{" ".join(path)}"/>')
            out += dots
        out.append(f'<text class="legend {e(s.cls)}" x="{LEFT + 6 + 40 * k}" y="{TOP + 14}">{e(s.name)}</text>')
    if not figures:
        out.append(_nodata(empty))
    return _svg(label, "".join(out), cls="lines")


@dataclass(frozen=True)
class Mark:
    at: float  # when (seconds since the epoch)
    top: str  # the class of its upper half (how the run went)
    bottom: str  # the class of its lower half (how its delivery went)
    tip: str


LANE, NAME_W = 22, 130


def timeline(lanes: Sequence[tuple[str, Sequence[Mark]]], *, start: float, end: float, label: str,
             ticks: Sequence[tuple[float, str]] = (), empty: str = "Nothing ran.") -> str:
    """One row per lane (a name and its marks between ``start`` and ``end``); each mark is two halves."""
    height = TOP + BOTTOM + LANE * max(1, len(lanes))
    span = max(1e-9, end - start)
    plot_w = W - NAME_W - RIGHT
    out = [f'<line class="axis" x1="{NAME_W}" y1="{height - BOTTOM}" x2="{W - RIGHT}" y2="{height - BOTTOM}"/>']
    for at, text in ticks:
        x = NAME_W + at * plot_w
        anchor = "start" if at <= 0.01 else "end" if at >= 0.99 else "middle"
        out.append(f'<text class="tick" x="{x:.1f}" y="{height - 5}" text-anchor="{anchor}">{e(text)}</text>')
    for row, (name, marks) in enumerate(lanes):
        y = TOP + row * LANE
        shown = name if len(name) <= 18 else name[:17] + "…"
        out.append(f'<g><title>{e(name)}</title><text class="name" x="{NAME_W - 6}" y="{y + LANE / 2 + 4}" '
                   f'text-anchor="end">{e(shown)}</text></g>')
        out.append(f'<line class="grid" x1="{NAME_W}" y1="{y + LANE / 2}" x2="{W - RIGHT}" y2="{y + LANE / 2}"/>')
        for m in marks:
            x = NAME_W + min(1.0, max(0.0, (m.at - start) / span)) * plot_w - 2
            out.append(f'<g class="mark"><title>{e(m.tip)}</title>'
                       f'<rect class="{e(m.top)}" x="{x:.1f}" y="{y + 3}" width="4" height="{LANE / 2 - 3}"/>'
                       f'<rect class="{e(m.bottom)}" x="{x:.1f}" y="{y + LANE / 2}" width="4" '
                       f'height="{LANE / 2 - 3}"/></g>')
    if not any(marks for _name, marks in lanes):
        out.append(_nodata(empty, height))
    return _svg(label, "".join(out), height, cls="timeline")


def hbars(items: Sequence[tuple[str, float, str]], *, label: str, unit: str = "",
          empty: str = "None.") -> str:
    """One horizontal bar per (name, value, tooltip), longest first as given."""
    height = TOP + BOTTOM + LANE * max(1, len(items))
    top = nice_max(max((v for _n, v, _t in items), default=0))
    plot_w = W - NAME_W - RIGHT - 50
    out = []
    for row, (name, value, tip) in enumerate(items):
        y = TOP + row * LANE
        w = max(1.0, value / top * plot_w) if value > 0 else 0
        out.append(f'<text class="name" x="{NAME_W - 6}" y="{y + LANE / 2 + 4}" text-anchor="end">{e(name)}</text>')
        if w:
            out.append(f'<rect class="bar" x="{NAME_W}" y="{y + 4}" width="{w:.1f}" height="{LANE - 8}">'
                       f'<title>{e(tip)}</title></rect>')
        out.append(f'<text class="value" x="{NAME_W + w + 4:.1f}" y="{y + LANE / 2 + 4}">'
                   f'{e(num(value))}{e(unit)}</text>')
    if not items:
        out.append(_nodata(empty, height))
    return _svg(label, "".join(out), height, cls="hbars")
