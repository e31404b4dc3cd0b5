"""Exact match: the prediction's SQL text equals gold's once both are normalised by sqlglot (a
figure beside EX; Soft-F1, the row-level partial credit, is a comparator mode:
:func:`pytest_heron.compare.soft_f1`). Pure functions, no I/O."""

from __future__ import annotations


def exact_match(gold_sql: str, pred_sql: str | None) -> bool:
    """String match after sqlglot normalisation (shown beside EX to show how it under-counts)."""
    import sqlglot

    if not pred_sql:
        return False

    def norm(sql: str) -> str:
        try:
            return str(
                sqlglot.parse_one(sql, read="postgres").sql(dialect="postgres", normalize=True)
            )
        except Exception:
            return " ".join(sql.split()).rstrip(";").lower()

    return norm(gold_sql) == norm(pred_sql)
