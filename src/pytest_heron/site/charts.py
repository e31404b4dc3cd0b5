"""The site's charts: inline SVG laid out here by hand. Pure: data in, markup out.

Every chart has a fixed ``viewBox`` and scales down with its box (``max-width: 100%``), so it
never overflows a narrow window. Text is measured with :func:`text_width` (a conservative
estimate for the page's 12 px sans-serif), and labels and values get their own columns, so a bar
at 100 % never runs into its value or the next chart. All text is escaped.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from markupsafe import Markup
from markupsafe import escape as _escape

from pytest_heron.core.safe_text import printable

CHAR_W = 7.2  # px per character of 12 px sans-serif, rounded up (wide enough for digits)
WIDTH = 640


def escape(value: object) -> Markup:
    """Chart text: control and bidi characters shown escaped, then HTML-escaped."""
    return _escape(printable(str(value)))


def text_width(text: str) -> float:
    return CHAR_W * len(text)


def _svg(
    width: float, height: float, label: str, body: Sequence[str], cls: str = "chart"
) -> Markup:
    head = (
        f'<svg class="{cls}" role="img" aria-label="{escape(label)}" width="{width:.0f}" '
        f'height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}" '
        ">"
    )
    return Markup(head + f"<title>{escape(label)}</title>" + "".join(body) + "</svg>")


def _num(value: float | None, unit: str) -> str:
    if value is None:
        return "n/a"
    return f"{value:.1f}{unit}" if unit == "%" else f"{value:g}{unit}"


def bars(
    title: str,
    items: Sequence[tuple[str, float | None, str]],
    *,
    top: float = 100.0,
    unit: str = "%",
) -> Markup:
    """Horizontal bars, one per ``(label, value, note)``; ``top`` is a full bar. A value of None
    is drawn as no bar and the text ``n/a``."""
    step, head = 22, 28
    label_w = max([text_width(label) for label, _, _ in items] + [60.0]) + 12
    shown = [f"{_num(v, unit)} {note}".strip() for _, v, note in items]
    value_w = max([text_width(s) for s in shown] + [40.0]) + 12
    bar_w = max(120.0, WIDTH - label_w - value_w)
    width = label_w + bar_w + value_w
    height = head + step * len(items) + 6
    body = [f'<text x="0" y="16" class="title">{escape(title)}</text>']
    for i, ((label, value, _), text) in enumerate(zip(items, shown, strict=True)):
        y = head + step * i
        w = 0.0 if value is None or top <= 0 else max(0.0, min(1.0, value / top)) * bar_w
        body.append(
            f'<text x="{label_w - 8:.1f}" y="{y + 13}" text-anchor="end">{escape(label)}</text>'
            f'<rect x="{label_w:.1f}" y="{y}" width="{bar_w:.1f}" height="16" class="track"/>'
            f'<rect x="{label_w:.1f}" y="{y}" width="{w:.1f}" height="16" class="bar"/>'
            f'<text x="{label_w + bar_w + 6:.1f}" y="{y + 13}" class="value">{escape(text)}</text>'
        )
    return _svg(width, height, title, body)


def nice_ticks(high: float, count: int = 5) -> list[float]:
    """Round tick values from 0 to at least ``high``.

    >>> nice_ticks(100)
    [0.0, 20.0, 40.0, 60.0, 80.0, 100.0]
    >>> nice_ticks(0.0003)
    [0.0, 0.0001, 0.0002, 0.0003]
    """
    if high <= 0:
        return [0.0, 1.0]
    raw = high / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    n = math.ceil(high / step - 1e-9)
    return [round(float(i * step), 12) for i in range(n + 1)]


def _tick_label(value: float) -> str:
    return f"{value:g}" if abs(value) >= 1e-3 or value == 0 else f"{value:.1e}"


@dataclass(frozen=True)
class Point:
    x: float
    y: float
    label: str
    cls: str = "dot"


def scatter(
    title: str, points: Sequence[Point], *, x_label: str, y_label: str, y_top: float = 100.0
) -> Markup:
    """Points on labelled axes (x from 0 to a round number above the largest x, y from 0 to
    ``y_top``), each with its label beside it and as a tooltip."""
    left, right, top, bottom = 56, 150, 30, 44
    plot_w, plot_h = WIDTH - left - right, 240
    width, height = WIDTH, top + plot_h + bottom
    xs = nice_ticks(max([p.x for p in points] + [0.0]))
    ys = nice_ticks(y_top)
    x_max, y_max = xs[-1], ys[-1]

    def px(x: float) -> float:
        return left + plot_w * x / x_max

    def py(y: float) -> float:
        return top + plot_h - plot_h * y / y_max

    body = [f'<text x="0" y="16" class="title">{escape(title)}</text>']
    for t in xs:
        body.append(
            f'<line x1="{px(t):.1f}" y1="{top}" x2="{px(t):.1f}" y2="{top + plot_h}" class="grid"/>'
            f'<text x="{px(t):.1f}" y="{top + plot_h + 16}" text-anchor="middle">'
            f"{_tick_label(t)}</text>"
        )
    for t in ys:
        body.append(
            f'<line x1="{left}" y1="{py(t):.1f}" x2="{left + plot_w}" y2="{py(t):.1f}" '
            'class="grid"/>'
            f'<text x="{left - 6}" y="{py(t) + 4:.1f}" text-anchor="end">{_tick_label(t)}</text>'
        )
    body.append(
        f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" '
        'class="axis"/>'
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" class="axis"/>'
        f'<text x="{left + plot_w / 2:.1f}" y="{height - 6}" text-anchor="middle" '
        f'class="axis-label">{escape(x_label)}</text>'
        f'<text x="14" y="{top + plot_h / 2:.1f}" text-anchor="middle" class="axis-label" '
        f'transform="rotate(-90 14 {top + plot_h / 2:.1f})">{escape(y_label)}</text>'
    )
    for p in points:
        cx, cy = px(p.x), py(p.y)
        body.append(
            f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="5" class="{escape(p.cls)}">'
            f"<title>{escape(p.label)}: {_tick_label(p.x)}, {p.y:.1f}</title></circle>"
            f'<text x="{cx + 8:.1f}" y="{cy + 4:.1f}" class="point-label">'
            f"{escape(p.label[:20])}</text>"
        )
    return _svg(width, height, title, body)


def lanes(
    title: str, lanes_: Sequence[tuple[str, Sequence[tuple[float, str]]]], *, x_label: str
) -> Markup:
    """A strip chart: one horizontal lane per ``(name, [(x, tooltip), ...])`` on a shared,
    labelled x axis (for example billed tokens of the right and of the wrong answers)."""
    right, top, lane_h = 24, 30, 34
    left = max([text_width(f"{name} ({len(pts)})") for name, pts in lanes_] + [40.0]) + 14
    plot_w = WIDTH - left - right
    xs = nice_ticks(max([x for _, pts in lanes_ for x, _ in pts] + [0.0]))
    x_max = xs[-1]
    height = top + lane_h * len(lanes_) + 40
    base = top + lane_h * len(lanes_)

    def px(x: float) -> float:
        return left + plot_w * x / x_max

    body = [f'<text x="0" y="16" class="title">{escape(title)}</text>']
    for t in xs:
        body.append(
            f'<line x1="{px(t):.1f}" y1="{top}" x2="{px(t):.1f}" y2="{base}" class="grid"/>'
            f'<text x="{px(t):.1f}" y="{base + 16}" text-anchor="middle">{_tick_label(t)}</text>'
        )
    for i, (name, pts) in enumerate(lanes_):
        y = top + lane_h * i + lane_h / 2
        body.append(
            f'<text x="{left - 8:.1f}" y="{y + 4:.1f}" text-anchor="end">{escape(name)} '
            f"({len(pts)})</text>"
        )
        cls = "ok" if i == 0 else "bad"
        for x, tip in pts:
            body.append(
                f'<circle cx="{px(x):.1f}" cy="{y:.1f}" r="4" class="{cls}">'
                f"<title>{escape(tip)}</title></circle>"
            )
    body.append(
        f'<line x1="{left}" y1="{base}" x2="{left + plot_w}" y2="{base}" class="axis"/>'
        f'<text x="{left + plot_w / 2:.1f}" y="{height - 4}" text-anchor="middle" '
        f'class="axis-label">{escape(x_label)}</text>'
    )
    return _svg(WIDTH, height, title, body)


def heat_colour(value: float | None) -> str:
    """The fill of a heat-map cell: grey for n/a, red (0 %) through yellow to green (100 %).

    >>> heat_colour(None), heat_colour(0), heat_colour(100)
    ('#eeeeee', 'hsl(0,70%,78%)', 'hsl(120,70%,78%)')
    """
    if value is None:
        return "#eeeeee"
    return f"hsl({round(1.2 * max(0.0, min(100.0, value)))},70%,78%)"


def heatmap(
    title: str,
    rows: Sequence[str],
    columns: Sequence[str],
    cells: dict[tuple[str, str], tuple[float | None, int]],
) -> Markup:
    """A grid of EX: one row per ``rows`` entry, one column per ``columns`` entry; each cell
    ``(EX, n)`` shows the EX (or ``n/a``) over its question count. Column names are written at
    an angle so narrow columns keep readable labels."""
    cell_w, cell_h = 52, 30
    label_w = max([text_width(r) for r in rows] + [60.0]) + 12
    head = 30 + max([text_width(c) for c in columns] + [20.0]) * 0.72 + 10
    width = max(
        [label_w + cell_w * (j + 0.5) + text_width(c) * 0.72 + 8 for j, c in enumerate(columns)]
        + [label_w + cell_w * len(columns) + 8]
    )
    height = head + cell_h * len(rows) + 8
    body = [f'<text x="0" y="16" class="title">{escape(title)}</text>']
    for j, col in enumerate(columns):
        x = label_w + cell_w * j + cell_w / 2
        body.append(
            f'<text x="{x:.1f}" y="{head - 6:.1f}" transform="rotate(-45 {x:.1f} '
            f'{head - 6:.1f})">{escape(col)}</text>'
        )
    for i, row in enumerate(rows):
        y = head + cell_h * i
        body.append(
            f'<text x="{label_w - 8:.1f}" y="{y + 19:.1f}" text-anchor="end">{escape(row)}</text>'
        )
        for j, col in enumerate(columns):
            value, n = cells.get((row, col), (None, 0))
            x = label_w + cell_w * j
            shown = "—" if n == 0 else _num(value, "")
            body.append(
                f'<rect x="{x:.1f}" y="{y:.1f}" width="{cell_w - 2}" height="{cell_h - 2}" '
                f'fill="{heat_colour(value if n else None)}"><title>{escape(row)}, '
                f"{escape(col)}: {shown} (n={n})</title></rect>"
                f'<text x="{x + cell_w / 2 - 1:.1f}" y="{y + 18:.1f}" text-anchor="middle" '
                f'class="cell">{shown}</text>'
            )
    return _svg(width, height, title, body)


def interval(value: float | None, ci: Sequence[float] | None, *, width: int = 120) -> Markup:
    """A small bar of a share (0-100) with its 95 % interval as a whisker, for a table cell."""
    body = [f'<rect x="0" y="5" width="{width}" height="10" class="track"/>']
    if value is not None:
        body.append(
            f'<rect x="0" y="5" width="{width * max(0.0, min(100.0, value)) / 100:.1f}" '
            'height="10" class="bar"/>'
        )
    if ci is not None and len(ci) == 2:
        x1, x2 = (width * max(0.0, min(100.0, float(v))) / 100 for v in ci)
        body.append(
            f'<line x1="{x1:.1f}" y1="10" x2="{x2:.1f}" y2="10" class="whisker"/>'
            f'<line x1="{x1:.1f}" y1="3" x2="{x1:.1f}" y2="17" class="whisker"/>'
            f'<line x1="{x2:.1f}" y1="3" x2="{x2:.1f}" y2="17" class="whisker"/>'
        )
    label = "n/a" if value is None else f"{value:.1f}%"
    if ci is not None and len(ci) == 2:
        label += f" (95% interval {float(ci[0]):.1f}–{float(ci[1]):.1f})"
    return _svg(width, 20, label, body, cls="spark")
