"""Tiny SVG charts for the HTML report: grouped bars with whiskers, and lines. No dependencies.

    bar_chart(["seq-read", "rand-read"], ["tmpfs", "local"],
              {("seq-read", "tmpfs"): Bar(4.5e9, 4.4e9, 4.6e9), ...}, unit="B/s")
    line_chart({"tmpfs": [(1, 99.0), (2, 97.5)], ...}, unit="%", x_label="accelerators")

Each returns one `<svg>` element (inline in the page, styled by the page's CSS
classes), with a `<title>` on every bar and point so a hover shows the figures.
Values are drawn in canonical units (B/s, ns, ...) and labelled in human ones.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
from collections.abc import Callable, Mapping, Sequence
from html import escape

from iolab.units import human

# Observable's categorical palette: distinct, readable on white, kind to colour-blind readers.
PALETTE = ("#4269d0", "#efb118", "#ff725c", "#6cc5b0", "#3ca951", "#ff8ab7", "#a463f2", "#97bbf5", "#9c6b4e", "#9498a0")
FONT = 12


@dataclasses.dataclass(frozen=True)
class Bar:
    value: float  # the bar's height (a median)
    low: float | None = None  # whisker: the smallest repeat
    high: float | None = None  # whisker: the largest repeat
    note: str = ""  # added to the hover text


def colors(names: Sequence[str]) -> dict[str, str]:
    """A stable colour per name (a backend keeps its colour in every chart of a page)."""
    return {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(names)}


# --- scales ---------------------------------------------------------------------------------------

_SCALES: dict[str, list[tuple[float, str]]] = {
    "B/s": [(1024**4, "TiB/s"), (1024**3, "GiB/s"), (1024**2, "MiB/s"), (1024, "KiB/s"), (1, "B/s")],
    "B": [(1024**4, "TiB"), (1024**3, "GiB"), (1024**2, "MiB"), (1024, "KiB"), (1, "B")],
    "ns": [(1e9, "s"), (1e6, "ms"), (1e3, "µs"), (1, "ns")],
    "s": [(1, "s"), (1e-3, "ms"), (1e-6, "µs")],
    "IOPS": [(1e6, "M IOPS"), (1e3, "k IOPS"), (1, "IOPS")],
    "samples/s": [(1e6, "M samples/s"), (1e3, "k samples/s"), (1, "samples/s")],
}


def axis_unit(unit: str, top: float) -> tuple[float, str]:
    """(divisor, label) so that a linear axis up to `top` reads in one human unit: (2**30, 'GiB/s')."""
    for factor, label in _SCALES.get(unit, []):
        if abs(top) >= factor:
            return factor, label
    steps = _SCALES.get(unit)
    return (steps[-1][0], steps[-1][1]) if steps else (1.0, unit)


def nice_ticks(top: float, count: int = 5) -> list[float]:
    """0 and round steps up to at least `top`: nice_ticks(4.4) → [0, 1, 2, 3, 4, 5]."""
    if top <= 0:
        return [0.0, 1.0]
    raw = top / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    ticks = [0.0]
    while ticks[-1] < top * (1 - 1e-9):
        ticks.append(round(ticks[-1] + step, 12))
    return ticks


def log_ticks(low: float, high: float) -> list[float]:
    """Powers of ten from below `low` to above `high`."""
    first = math.floor(math.log10(max(low, 1e-12)))
    last = math.ceil(math.log10(max(high, low * 10, 1e-12)))
    return [10.0**e for e in range(first, last + 1)]


def _number(value: float) -> str:
    return f"{value:g}" if abs(value) >= 1e-3 or value == 0 else f"{value:.1e}"


def _svg(width: float, height: float, body: list[str], css_class: str, label: str) -> str:
    return (
        f'<svg class="{css_class}" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width:.0f} {height:.0f}" '
        f'width="{width:.0f}" height="{height:.0f}" role="img" aria-label="{escape(label)}" '
        f'font-size="{FONT}">' + "".join(body) + "</svg>"
    )


def _text_width(text: str) -> float:
    return 6.9 * len(text)  # system-ui at 12 px, near enough for layout


def _legend(
    names: Sequence[str], palette: Mapping[str, str], x: float, y: float, width: float
) -> tuple[list[str], float]:
    """Swatches and names in rows that wrap at `width`; returns the elements and the height used."""
    out, cursor, row = [], x, 0
    for name in names:
        step = 14 + _text_width(name) + 16
        if cursor > x and cursor + step > width:
            cursor, row = x, row + 1
        top = y + row * 18
        out.append(
            f'<rect class="swatch" x="{cursor:.1f}" y="{top - 9:.1f}" width="10" height="10" rx="2" '
            f'fill="{palette[name]}"/>'
            f'<text class="legend" x="{cursor + 14:.1f}" y="{top:.1f}">{escape(name)}</text>'
        )
        cursor += step
    return out, (row + 1) * 18


def _y_axis(
    ticks: list[float],
    y_of: Callable[[float], float],
    left: float,
    right: float,
    label_of: Callable[[float], str],
    title: str,
    top: float,
) -> list[str]:
    out = []
    for tick in ticks:
        y = y_of(tick)
        out.append(
            f'<line class="gridline" x1="{left:.1f}" x2="{right:.1f}" y1="{y:.1f}" y2="{y:.1f}"/>'
            f'<text class="tick" x="{left - 6:.1f}" y="{y + 4:.1f}" text-anchor="end">'
            f"{escape(label_of(tick))}</text>"
        )
    out.append(
        f'<text class="axis-title" x="{left - 6:.1f}" y="{top - 10:.1f}" text-anchor="end">{escape(title)}</text>'
    )
    return out


# --- grouped bars ---------------------------------------------------------------------------------


def bar_chart(
    categories: Sequence[str],
    series: Sequence[str],
    values: Mapping[tuple[str, str], Bar],
    unit: str,
    palette: Mapping[str, str] | None = None,
    log: bool = False,
    label: str = "",
    plot_height: int = 180,
    min_width: int = 520,
) -> str:
    """Bars of each series side by side per category, with min–max whiskers; log scale on request."""
    palette = palette or colors(series)
    present = [v for v in values.values() if v.value > 0 or not log]
    tops = [max(v.value, v.high or 0) for v in present] or [1.0]
    lows = [min(v.value, v.low or v.value) for v in present if v.value > 0] or [1.0]
    left, right_pad, bottom = 64, 12, 40
    width = max(min_width, left + right_pad + len(categories) * (len(series) * 14 + 24))
    group_w = (width - left - right_pad) / max(len(categories), 1)
    bar_w = max(8.0, min(34.0, (group_w - 20) / max(len(series), 1)))
    shown = [category if len(category) <= 32 else category[:31] + "…" for category in categories]
    longest = max((_text_width(c) for c in shown), default=0)
    tilt = longest > group_w - 8
    if tilt:
        bottom = int(24 + min(longest, 220) * 0.55)
        # A tilted name ends under its group and runs down to the left (cos 30° of its width): the first
        # ones need room left of the axis, or the chart's edge cuts them.
        reach = max(0.87 * _text_width(c) - (i + 0.5) * group_w + 4 for i, c in enumerate(shown))
        shift = max(0, math.ceil(reach - left))
        left, width = left + shift, width + shift
    legend, legend_h = _legend(series, palette, left, 16, width - right_pad)
    top = 26 + legend_h
    height = top + plot_height + bottom
    ticks, y_of, tick_label, axis_title = _bar_scale(unit, log, lows, tops, top, plot_height)
    body = _y_axis(ticks, y_of, left, width - right_pad, tick_label, axis_title, top)
    body += legend
    base = y_of(ticks[0])
    inner = (group_w - len(series) * bar_w) / 2
    for ci, category in enumerate(categories):
        gx = left + ci * group_w
        for si, name in enumerate(series):
            bar = values.get((category, name))
            if bar is not None:
                y = y_of(bar.value) if (bar.value > 0 or not log) else base
                body += _bar_marks(
                    bar, unit, name, category, palette[name], gx + inner + si * bar_w, bar_w, y, base, y_of
                )
        cx = gx + group_w / 2
        text = escape(shown[ci])
        if tilt:
            body.append(
                f'<text class="category" transform="translate({cx:.1f},{base + 14:.1f}) rotate(-30)" '
                f'text-anchor="end">{text}</text>'
            )
        else:
            body.append(f'<text class="category" x="{cx:.1f}" y="{base + 18:.1f}" text-anchor="middle">{text}</text>')
    body.append(f'<line class="axis" x1="{left:.1f}" x2="{width - right_pad:.1f}" y1="{base:.1f}" y2="{base:.1f}"/>')
    return _svg(width, height, body, "chart bar-chart", label or "bar chart")


def _bar_scale(
    unit: str, log: bool, lows: list[float], tops: list[float], top: float, plot_h: float
) -> tuple[list[float], Callable[[float], float], Callable[[float], str], str]:
    """A bar chart's value axis: its ticks, the y of a value, a tick's label and the axis title."""
    if log:
        ticks = log_ticks(min(lows), max(tops))
        lo_e, hi_e = math.log10(ticks[0]), math.log10(ticks[-1])

        def y_of(v: float) -> float:
            v = max(v, ticks[0])
            return top + plot_h * (1 - (math.log10(v) - lo_e) / (hi_e - lo_e or 1))

        return ticks, y_of, lambda v: human(v, unit), f"{unit_title(unit)} (log scale)"
    factor, axis_label = axis_unit(unit, max(tops))
    linear = [t * factor for t in nice_ticks(max(tops) / factor)]

    def y_linear(v: float) -> float:
        return top + plot_h * (1 - v / linear[-1])

    return linear, y_linear, lambda v: _number(v / factor), axis_label


def _bar_marks(
    bar: Bar,
    unit: str,
    name: str,
    category: str,
    fill: str,
    x: float,
    bar_w: float,
    y: float,
    base: float,
    y_of: Callable[[float], float],
) -> list[str]:
    """One bar from `y` down to `base`, its figures in its hover, and its min–max whisker when the repeats differ."""
    hover = f"{name} · {category}: {human(bar.value, unit)}"
    if bar.low is not None and bar.high is not None:
        hover += f" (repeats {human(bar.low, unit)} – {human(bar.high, unit)})"
    if bar.note:
        hover += f" · {bar.note}"
    out = [
        f'<rect class="bar" data-series="{escape(name)}" data-category="{escape(category)}" '
        f'x="{x + 1:.1f}" y="{y:.1f}" width="{bar_w - 2:.1f}" height="{max(base - y, 0.5):.1f}" '
        f'fill="{fill}"><title>{escape(hover)}</title></rect>'
    ]
    if bar.low is not None and bar.high is not None and bar.high > bar.low:
        cx = x + bar_w / 2
        y1, y2 = y_of(bar.low), y_of(bar.high)
        out.append(
            f'<g class="whisker"><line x1="{cx:.1f}" x2="{cx:.1f}" y1="{y1:.1f}" y2="{y2:.1f}"/>'
            f'<line x1="{cx - 4:.1f}" x2="{cx + 4:.1f}" y1="{y1:.1f}" y2="{y1:.1f}"/>'
            f'<line x1="{cx - 4:.1f}" x2="{cx + 4:.1f}" y1="{y2:.1f}" y2="{y2:.1f}"/></g>'
        )
    return out


def _frame(
    names: list[str], palette: Mapping[str, str], unit: str, top_value: float, width: int, plot_h: int, right: int = 16
) -> tuple[float, str, list[float], list[str], float, float]:
    """A chart with a linear value axis from 0: (divisor, axis label, ticks, legend, plot top, height); the plot
    starts 64 px from the left and ends `right` px from the right, 40 px above the bottom."""
    factor, axis_label = axis_unit(unit, top_value)
    ticks = [t * factor for t in nice_ticks(top_value / factor if top_value > 0 else 1)]
    legend, legend_h = _legend(names, palette, 64, 16, width - right)
    top = 26 + legend_h
    return factor, axis_label, ticks, legend, top, top + plot_h + 40


def _marks(marks: Sequence[tuple[float, float, str]], top: float, base: float, x_label: str) -> list[str]:
    """Vertical dashed lines at (position, x, label), labelled at the top (every other label a line lower, so that
    marks close together stay readable), with the x in the hover title."""
    return [
        f'<line class="mark" x1="{at:.1f}" x2="{at:.1f}" y1="{top:.1f}" y2="{base:.1f}">'
        f"<title>{escape(text)} at {escape(x_label)} {_number(round(x, 1))}</title></line>"
        f'<text class="mark-label" x="{at + 3:.1f}" y="{top + 10 + 11 * (index % 2):.1f}">{escape(text)}</text>'
        for index, (at, x, text) in enumerate(marks)
    ]


def unit_title(unit: str) -> str:
    return {"ns": "latency", "B/s": "bandwidth", "IOPS": "IOPS", "%": "%"}.get(unit, unit)


# --- lines ----------------------------------------------------------------------------------------


def line_chart(
    series: Mapping[str, Sequence[tuple[float, float]]],
    unit: str,
    x_label: str,
    palette: Mapping[str, str] | None = None,
    threshold: tuple[float, str] | None = None,
    y_max: float | None = None,
    x_min: float | None = None,
    label: str = "",
    width: int = 520,
    plot_height: int = 150,
    x_integer: bool = False,
    markers: bool = True,
    marks: Sequence[tuple[float, str]] = (),
) -> str:
    """One line per series over x; optional: a dashed threshold (value, label), `marks` (x, label: a fault's)."""
    palette = palette or colors(list(series))
    points = [p for line in series.values() for p in line]
    xs = [x for x, _ in points] + [x for x, _ in marks] or [0.0, 1.0]
    ys = [y for _, y in points] or [0.0]
    x_lo, x_hi, x_ticks = _x_scale(xs, x_min, x_integer)
    top_value = max(ys + [threshold[0] if threshold else 0.0, y_max or 0.0])
    left, right = 64, 16
    factor, axis_label, ticks, legend, top, height = _frame(list(series), palette, unit, top_value, width, plot_height)
    plot_w, plot_h = width - left - right, plot_height

    def x_of(x: float) -> float:
        return left + plot_w * (x - x_lo) / (x_hi - x_lo)

    def y_of(y: float) -> float:
        return top + plot_h * (1 - y / ticks[-1])

    body = _y_axis(ticks, y_of, left, width - right, lambda v: _number(v / factor), axis_label, top)
    body += legend
    base = y_of(0)
    body += [
        f'<text class="tick" x="{x_of(x):.1f}" y="{base + 16:.1f}" text-anchor="middle">{_number(round(x, 2))}</text>'
        for x in x_ticks
    ]
    body.append(
        f'<text class="axis-title" x="{left + plot_w / 2:.1f}" y="{height - 6:.1f}" '
        f'text-anchor="middle">{escape(x_label)}</text>'
    )
    body.append(f'<line class="axis" x1="{left}" x2="{width - right}" y1="{base:.1f}" y2="{base:.1f}"/>')
    if threshold:
        y = y_of(threshold[0])
        body.append(
            f'<line class="threshold" x1="{left}" x2="{width - right}" y1="{y:.1f}" y2="{y:.1f}"/>'
            f'<text class="threshold-label" x="{width - right - 4}" y="{y - 5:.1f}" '
            f'text-anchor="end">{escape(threshold[1])}</text>'
        )
    body += _marks([(x_of(x), x, text) for x, text in sorted(marks)], top, base, x_label)
    for name, line in series.items():
        body += _line(name, sorted(line), palette, x_of, y_of, unit, x_label, markers)
    return _svg(width, height, body, "chart line-chart", label or "line chart")


def _x_scale(xs: list[float], x_min: float | None, x_integer: bool) -> tuple[float, float, list[float]]:
    """A line chart's x range (lowest, highest) and its ticks: each x where there are few whole ones
    (`x_integer`), round steps from 0, or six even steps from the lowest x."""
    x_lo, x_hi = (min(xs) if x_min is None else x_min), max(xs)
    if x_hi == x_lo:
        x_lo, x_hi = x_lo - 1, x_hi + 1
    if x_integer and len(set(xs)) <= 16:
        x_ticks = sorted(set(xs))
    elif x_lo == 0:
        x_ticks = nice_ticks(x_hi)
        x_hi = x_ticks[-1]
    else:
        x_ticks = [x_lo + (x_hi - x_lo) * i / 5 for i in range(6)]
    return x_lo, x_hi, x_ticks


def _line(
    name: str,
    line: list[tuple[float, float]],
    palette: Mapping[str, str],
    x_of: Callable[[float], float],
    y_of: Callable[[float], float],
    unit: str,
    x_label: str,
    markers: bool,
) -> list[str]:
    """One series' path through its (sorted) points, and a marker with its value at each (`markers`)."""
    if not line:
        return []
    color = palette[name]
    path = " ".join(f"{'M' if i == 0 else 'L'}{x_of(x):.1f},{y_of(y):.1f}" for i, (x, y) in enumerate(line))
    out = [f'<path class="line" data-series="{escape(name)}" d="{path}" stroke="{color}"/>']
    if markers:
        out += [
            f'<circle class="point" cx="{x_of(x):.1f}" cy="{y_of(y):.1f}" r="3.5" '
            f'fill="{color}"><title>{escape(name)}: {escape(human(y, unit))} at '
            f"{escape(x_label)} {_number(x)}</title></circle>"
            for x, y in line
        ]
    return out


# --- over time ------------------------------------------------------------------------------------

SHAPES = ("circle", "square", "triangle", "diamond")  # a backend's marker, beside its colour


@dataclasses.dataclass(frozen=True)
class TimePoint:
    when: float  # seconds since the epoch
    value: float  # a median
    low: float  # the smallest repeat
    high: float  # the largest
    note: str = ""  # added to the hover text: the campaign, n, the change
    regression: bool = False  # breaks a rule against the point before


def _marker(shape: str, x: float, y: float, fill: str) -> str:
    """A marker centred on (x, y) whose shape tells the series apart where colours do not."""
    if shape == "square":
        return f'<rect x="{x - 4:.1f}" y="{y - 4:.1f}" width="8" height="8" fill="{fill}"/>'
    if shape == "triangle":
        return f'<path d="M{x:.1f},{y - 5:.1f} L{x + 5:.1f},{y + 4:.1f} L{x - 5:.1f},{y + 4:.1f} Z" fill="{fill}"/>'
    if shape == "diamond":
        corners = f"M{x:.1f},{y - 5:.1f} L{x + 5:.1f},{y:.1f} L{x:.1f},{y + 5:.1f} L{x - 5:.1f},{y:.1f} Z"
        return f'<path d="{corners}" fill="{fill}"/>'
    return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4" fill="{fill}"/>'


def time_chart(
    series: Mapping[str, Sequence[TimePoint]],
    unit: str,
    palette: Mapping[str, str],
    label: str = "",
    width: int = 560,
    plot_height: int = 170,
) -> str:
    """One line per series (a backend) over dates: each point its median with a min–max whisker, a marker
    of the series' shape (SHAPES, in palette order) and a red ring where it breaks a rule (class regression)."""
    points = [p for line in series.values() for p in line]
    first, last = min(p.when for p in points), max(p.when for p in points)
    if last == first:
        first, last = first - 43200, last + 43200  # one campaign: half a day each side
    left, right = 64, 24
    top_value = max(p.high for p in points)
    factor, axis_label, ticks, legend, top, height = _frame(
        list(series), palette, unit, top_value, width, plot_height, right
    )

    def x_of(when: float) -> float:
        return left + (width - left - right) * (when - first) / (last - first)

    def y_of(value: float) -> float:
        return top + plot_height * (1 - value / ticks[-1])

    body = _y_axis(ticks, y_of, left, width - right, lambda v: _number(v / factor), axis_label, top) + legend
    base = y_of(0)
    for i in range(5):
        when = first + (last - first) * i / 4
        stamp = dt.datetime.fromtimestamp(when, dt.UTC).strftime("%Y-%m-%d")
        anchor = "start" if i == 0 else "end" if i == 4 else "middle"
        at = f'x="{x_of(when):.1f}" y="{base + 16:.1f}" text-anchor="{anchor}"'
        body.append(f'<text class="tick" {at}>{stamp}</text>')
    body.append(f'<line class="axis" x1="{left}" x2="{width - right}" y1="{base:.1f}" y2="{base:.1f}"/>')
    shapes = {name: SHAPES[i % len(SHAPES)] for i, name in enumerate(palette)}
    for name, line in series.items():
        line = sorted(line, key=lambda p: p.when)
        path = " ".join(f"{'M' if i == 0 else 'L'}{x_of(p.when):.1f},{y_of(p.value):.1f}" for i, p in enumerate(line))
        body.append(f'<path class="line" data-series="{escape(name)}" d="{path}" stroke="{palette[name]}"/>')
        for p in line:
            x, y = x_of(p.when), y_of(p.value)
            hover = f"{name}: {human(p.value, unit)} (repeats {human(p.low, unit)} – {human(p.high, unit)})"
            hover += f" · {p.note}" if p.note else ""
            whisker = (
                f'<line class="whisker-line" x1="{x:.1f}" x2="{x:.1f}" y1="{y_of(p.low):.1f}" '
                f'y2="{y_of(p.high):.1f}" stroke="{palette[name]}"/>'
                if p.high > p.low
                else ""
            )
            ring = f'<circle class="ring" cx="{x:.1f}" cy="{y:.1f}" r="8"/>' if p.regression else ""
            body.append(
                f'<g class="point{" regression" if p.regression else ""}" data-series="{escape(name)}">'
                f"{whisker}{_marker(shapes[name], x, y, palette[name])}{ring}<title>{escape(hover)}</title></g>"
            )
    return _svg(width, height, body, "chart time-chart", label or "chart over time")
