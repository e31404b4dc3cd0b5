"""Set-Recall@k of the table-retrieval baselines (``heron recall``): per question, the share of
its gold tables among a ranker's top k, averaged over questions."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pytest_heron.core.types import RETRIEVALS
from pytest_heron.dataset import GoldQuestion
from pytest_heron.scoring.context import context_recall, recall_at_k
from pytest_heron.scoring.outcome import Outcome
from pytest_heron.systems import EmbeddingRanker, Ranker

DEFAULT_KS = (5, 10, 20)


def rank_questions(
    r: Ranker, questions: Sequence[GoldQuestion], progress: Callable[[int], None] | None = None
) -> dict[str, list[str]]:
    """Question id to full ranking (``progress``: texts embedded per batch, embedding only)."""
    if isinstance(r, EmbeddingRanker):
        rankings = r.rank_many([q.question for q in questions], progress)
    else:
        rankings = [r.rank(q.question) for q in questions]
    return {q.id: ranked for q, ranked in zip(questions, rankings, strict=True)}


def recall_table(
    questions: Sequence[GoldQuestion], rankings: Mapping[str, Sequence[str]], ks: Sequence[int]
) -> list[dict[str, Any]]:
    """Set-Recall@k (percent) overall (row ``all``) and per retrieval class, in RETRIEVALS
    order; a class without questions is left out."""
    rows = []
    for label in ("all", *RETRIEVALS):
        group = [q for q in questions if label in ("all", q.retrieval)]
        if not group:
            continue
        row: dict[str, Any] = {"retrieval": label, "n": len(group)}
        for k in ks:
            pairs = [(q.gold_tables, rankings[q.id][:k]) for q in group]
            row[f"at_{k}"] = context_recall(pairs)
        rows.append(row)
    return rows


Reported = tuple[Sequence[str] | None, Sequence[str] | None]  # (tables_ranked, in context)


def reported_table(
    questions: Sequence[GoldQuestion], reported: Mapping[str, Reported], ks: Sequence[int]
) -> list[dict[str, Any]]:
    """:func:`recall_table` for what an adapter reported (``heron recall --adapter``): per
    question :func:`~pytest_heron.scoring.context.recall_at_k` (the top k of its ranking, or
    an unranked set at its own size); a question it answered with no tables (or failed) counts
    0, a question without gold tables does not count; every cell None when it reported no
    tables at all (the whole schema in context)."""
    return _class_rows(
        [(q.gold_tables, q.retrieval, reported.get(q.id, (None, None))) for q in questions], ks
    )


def outcome_table(outcomes: Sequence[Outcome], ks: Sequence[int]) -> list[dict[str, Any]]:
    """:func:`reported_table` over a run's outcomes (a retrieval run's table by class)."""
    return _class_rows(
        [(o.gold_tables, o.retrieval, (o.tables_ranked, o.tables_in_context)) for o in outcomes],
        ks,
    )


def _class_rows(
    items: Sequence[tuple[Sequence[str], str, Reported]], ks: Sequence[int]
) -> list[dict[str, Any]]:
    anything = any(r != (None, None) for _, _, r in items)
    rows = []
    for label in ("all", *RETRIEVALS):
        group = [item for item in items if label in ("all", item[1])]
        if not group:
            continue
        row: dict[str, Any] = {"retrieval": label, "n": len(group)}
        for k in ks:
            shares = [
                recall_at_k(gold, ranked, context, k) or 0.0
                for gold, _, (ranked, context) in group
                if gold
            ]
            row[f"at_{k}"] = (
                round(100.0 * sum(shares) / len(shares), 4) if anything and shares else None
            )
        rows.append(row)
    return rows


def _cell(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}"


def markdown(rows: Sequence[Mapping[str, Any]], ks: Sequence[int]) -> str:
    """The recall rows as a Markdown table, one decimal."""
    head = "| retrieval | n | " + " | ".join(f"Set-Recall@{k}" for k in ks) + " |"
    rule = "|---|---:|" + "---:|" * len(ks)
    lines = [head, rule]
    for row in rows:
        cells = " | ".join(_cell(row[f"at_{k}"]) for k in ks)
        lines.append(f"| {row['retrieval']} | {row['n']} | {cells} |")
    return "\n".join(lines)


def side_by_side(tables: Mapping[str, Sequence[Mapping[str, Any]]], ks: Sequence[int]) -> str:
    """Several methods' recall rows (``{method: recall_table(...)}``, the same classes each) as
    one Markdown table, one row per class and ``ks`` columns per method: docs/retrieval.md's
    table, which ``scripts/retrieval_table.py`` writes.

    >>> rows = [{"retrieval": "all", "n": 2, "at_5": 50.0}]
    >>> print(side_by_side({"bm25": rows, "embedding": rows}, (5,)))
    | retrieval (n) | bm25 @5 | embedding @5 |
    |---|---:|---:|
    | all (2) | 50.0 | 50.0 |
    """
    head = ["retrieval (n)"]
    for method in tables:
        head += [f"{method} @{ks[0]}", *(f"@{k}" for k in ks[1:])]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    first = next(iter(tables.values()))
    for i, row in enumerate(first):
        cells = [f"{row['retrieval']} ({row['n']})"]
        for rows in tables.values():
            assert rows[i]["retrieval"] == row["retrieval"], "the methods' classes differ"
            cells += [_cell(rows[i][f"at_{k}"]) for k in ks]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
