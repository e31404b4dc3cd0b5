"""The report folder: results.json, questions.csv and a self-contained report.html.

The page needs no network: styles are inline and the charts are inline SVG drawn here.
"""

from __future__ import annotations

import csv
import html
import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pytest_heron.results.document import Results, write_results
from pytest_heron.results.files import write_atomic
from pytest_heron.results.terminal import conditions_line, usage_line
from pytest_heron.safe_text import csv_cell, printable
from pytest_heron.scoring import metrics
from pytest_heron.scoring.outcome import FIELDS as OUTCOME_FIELDS
from pytest_heron.scoring.outcome import Outcome

CSV_COLUMNS = (
    *(f for f in OUTCOME_FIELDS if f not in ("usage", "samples")),
    "tokens",
)  # every outcome field but the nested ones, then billed tokens


def _tokens(o: Outcome) -> int:
    """Billed tokens of one question (prompt + completion, as the provider reported them)."""
    return sum(int(v) for k, v in (o.usage or {}).items() if k.endswith("_tokens"))


def _csv_value(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return " ".join(str(v) for v in value)
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True)
    return value


def questions_csv(results: Results) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for o in results.outcomes:
        row = {k: _csv_value(v) for k, v in o.to_json().items()}
        row["tokens"] = _tokens(o) if o.usage else None
        writer.writerow([csv_cell(row.get(c)) for c in CSV_COLUMNS])
    return out.getvalue()


def _bars(
    title: str,
    items: Sequence[tuple[str, float | None, str]],
    *,
    unit: str = "%",
    scale: float = 100.0,
) -> str:
    """A horizontal bar chart as inline SVG: (label, value, note) per bar."""
    height = 26 * len(items) + 34
    parts = [
        f'<svg class="chart" role="img" aria-label="{html.escape(title)}" width="640" '
        f'height="{height}" viewBox="0 0 640 {height}">',
        f'<text x="0" y="16" class="title">{html.escape(title)}</text>',
    ]
    for i, (label, value, note) in enumerate(items):
        y = 30 + 26 * i
        width = 0.0 if value is None else max(0.0, min(1.0, value / scale)) * 360
        shown = "n/a" if value is None else (f"{value:.1f}{unit}" if unit else f"{value:g}")
        parts.append(f'<text x="0" y="{y + 14}">{html.escape(label)}</text>')
        parts.append(f'<rect x="190" y="{y}" width="{width:.1f}" height="18" class="bar"/>')
        parts.append(f'<text x="{196 + width:.1f}" y="{y + 14}">{shown} {html.escape(note)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _scatter(results: Results) -> str:
    """Correctness against billed tokens per question."""
    points = [(_tokens(o), o.correct, o.id) for o in results.outcomes]
    if not any(t for t, _, _ in points):
        return "<p>EX vs tokens: the adapter reported no billed tokens.</p>"
    top = max(t for t, _, _ in points) or 1
    dots = "".join(
        f'<circle cx="{40 + 560 * t / top:.1f}" cy="{40 if ok else 120}" r="4" '
        f'class="{"ok" if ok else "bad"}"><title>{html.escape(qid)}: {t} tokens</title></circle>'
        for t, ok, qid in points
    )
    return (
        '<svg class="chart" role="img" aria-label="EX vs tokens" width="640" height="160" '
        'viewBox="0 0 640 160"><text x="0" y="16" class="title">Correct (top) or wrong '
        f"(bottom) vs billed tokens per question (max {top})</text>{dots}</svg>"
    )


def _card_number(label: str, value: float | None) -> str:
    if value is None:
        return "n/a"
    if label.startswith("cost"):
        return f"{value:.6f}"
    if "tokens" in label:
        return f"{value:.0f}"
    return f"{value:.1f}"


def render(results: Results) -> str:
    c, m = results.conditions, results.metrics
    n = len(results.outcomes)
    headline = [
        ("multi-state EX@1", m.ex_multistate),
        ("EX@1 (first state)", m.ex1),
        ("exact match", m.exact_match),
        ("Soft-F1", m.soft_f1),
        ("VES", m.ves),
        ("R-VES", m.r_ves),
        ("Set-Recall", m.set_recall),
        ("Grade", m.grade),
    ]
    if m.ex_at_k:
        k, value = list(m.ex_at_k.items())[-1]
        headline.insert(2, (f"EX@{k} (ceiling)", value))
    if m.tokens_per_q is not None:
        replayed = bool(m.llm_calls) and (m.replayed_calls or 0) >= (m.llm_calls or 0)
        label = "tokens / question (replayed)" if replayed else "billed tokens / question"
        headline.append((label, m.tokens_per_q))
    if m.cost_usd is not None:
        headline.append(("cost, USD", m.cost_usd))
    cards = "".join(
        f'<div class="card"><div class="num">{_card_number(k, v)}</div>'
        f"<div>{html.escape(k)}</div></div>"
        for k, v in headline
    )
    charts = []
    for axis, buckets in results.breakdown.items():
        items = [(name, b.ex_multistate, f"(n={b.n})") for name, b in buckets.items()]
        if items:
            charts.append(_bars(f"multi-state EX by {axis.replace('_', ' ')}", items))
    kinds = metrics.error_kinds(results.outcomes)
    top = max(kinds.values(), default=1)
    charts.append(
        _bars(
            "errors by kind",
            [(k, float(v), "") for k, v in kinds.items()],
            unit="",
            scale=float(top),
        )
        if kinds
        else "<p>No errors.</p>"
    )
    charts.append(_scatter(results))
    rows = "".join(
        f"<tr><td>{html.escape(o.id)}</td><td>{'yes' if o.correct else 'no'}</td>"
        f"<td>{html.escape(str(o.error_kind or ''))}</td>"
        f"<td><code>{html.escape(printable(o.pred_sql or ''))[:400]}</code></td></tr>"
        for o in results.outcomes
    )
    ci = m.ex_multistate_ci95
    interval = f" (95% interval {ci[0]:.1f}–{ci[1]:.1f}%)" if ci else ""
    name = html.escape(c.adapter)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>heron report: {name}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2rem; color: #222; }}
.cards {{ display: flex; flex-wrap: wrap; gap: 1rem; margin: 1rem 0; }}
.card {{ border: 1px solid #ccc; border-radius: 6px; padding: .6rem 1rem; min-width: 8rem; }}
.num {{ font-size: 1.8rem; font-weight: 600; }}
.chart text {{ font-size: 12px; }} .chart .title {{ font-weight: 600; }}
.bar {{ fill: #3a6ea5; }} .ok {{ fill: #2a9d4b; }} .bad {{ fill: #c0392b; }}
table {{ border-collapse: collapse; }} td {{ border-top: 1px solid #ddd; padding: 2px 6px; }}
</style></head><body>
<h1>pytest-heron: {name}</h1>
<p class="conditions">{html.escape(conditions_line(c))}</p>
<p>Headline: multi-state EX@1 {m.ex_multistate}% over n={n}{interval}.</p>
<div class="cards">{cards}</div>
<p class="usage">{html.escape(usage_line(c, m))}</p>
{"".join(charts)}
<h2>Questions</h2><table><tr><th>id</th><th>correct</th><th>error</th><th>predicted SQL</th></tr>
{rows}</table>
</body></html>
"""


def write_report(folder: Path, results: Results) -> None:
    """results.json, questions.csv and report.html in ``folder`` (each written atomically)."""
    folder.mkdir(parents=True, exist_ok=True)
    write_results(folder / "results.json", results)
    write_atomic(folder / "questions.csv", questions_csv(results))
    write_atomic(folder / "report.html", render(results))
