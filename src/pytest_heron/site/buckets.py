"""EX per bucket of questions for each board row, from its per-question verdicts: pure.

A board row has only ``{question id: right on every state}``; the question set gives each
question's tags, and :func:`~pytest_heron.scoring.metrics.breakdown` the same buckets a run's
breakdown has. The crossed shape × retrieval grid is grouped here the same way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from markupsafe import Markup

from pytest_heron.dataset import GoldQuestion
from pytest_heron.scoring import Outcome, ex_multistate
from pytest_heron.scoring import breakdown as metrics_breakdown
from pytest_heron.site import charts
from pytest_heron.site.inputs import BoardRow


def row_label(r: BoardRow) -> str:
    return f"{r.tool} {r.tool_version or ''}".strip()


def heat_maps(rows: Sequence[BoardRow], questions: Mapping[str, GoldQuestion]) -> list[Markup]:
    """One heat map per axis (shape, retrieval, shape × retrieval, trap, join width): a row per
    board row with per-question verdicts, a column per bucket, cells of multi-state EX."""
    with_verdicts = [r for r in rows if r.correct]
    if not with_verdicts or not questions:
        return []
    labels = [row_label(r) for r in with_verdicts]
    per_row: list[list[Outcome]] = []
    for r in with_verdicts:
        assert r.correct is not None
        per_row.append(
            [
                Outcome.blank(questions[q], correct=ok, correct_by_state={"0": ok})
                for q, ok in sorted(r.correct.items())
                if q in questions
            ]
        )
    out: list[Markup] = []
    axes = ("shape", "retrieval", "shape × retrieval", "trap", "join_width")
    for axis in axes:
        cells: dict[tuple[str, str], tuple[float | None, int]] = {}
        columns: set[str] = set()
        for name_, outcomes in zip(labels, per_row, strict=True):
            if axis == "shape × retrieval":
                groups: dict[str, list[Outcome]] = {}
                for o in outcomes:
                    groups.setdefault(f"{o.shape}/{o.retrieval}", []).append(o)
                buckets = {k: (ex_multistate(v), len(v)) for k, v in groups.items()}
            else:
                bd = metrics_breakdown(outcomes, 0)[axis]
                buckets = {k: (b.ex_multistate, b.n) for k, b in bd.items()}
            for name, value in buckets.items():
                cells[(name_, name)] = value
                columns.add(name)
        out.append(
            charts.heatmap(
                f"multi-state EX by {axis.replace('_', ' ')}", labels, sorted(columns), cells
            )
        )
    return out
