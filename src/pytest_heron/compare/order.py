"""Which output columns the gold query's top-level ORDER BY sorts on (SQL analysis only)."""

from __future__ import annotations

from functools import lru_cache

import sqlglot
from sqlglot import exp
from sqlglot.optimizer.normalize_identifiers import normalize_identifiers


def order_keys(gold_sql: str) -> tuple[int, ...] | None:
    """Which output columns of the gold query (0-based) its top-level ORDER BY sorts on.

    ``None``: no top-level ORDER BY (compare as multisets).  ``()``: ordered, but at least one key
    could not be mapped to an output column (or the SQL does not parse, or the output columns are
    not known, as with ``SELECT *``), so the whole row order is enforced.  Only the ORDER BY of
    the outermost SELECT or set operation counts, never one inside a CTE or subquery.  Keys map by
    1-based ordinal, by output name (alias or column name), or by an expression equal to a
    projection's expression.  Never raises.
    """
    try:
        return _order_keys(gold_sql)
    except Exception:
        return ()


def _order_keys(sql: str) -> tuple[int, ...] | None:
    tree = sqlglot.parse_one(sql, read="postgres")
    if not isinstance(tree, exp.Query):
        return ()
    tree = normalize_identifiers(tree, dialect="postgres")
    node: exp.Query = tree
    while True:
        ordering = node.args.get("order")
        if isinstance(ordering, exp.Order):
            break
        inner = node.this if isinstance(node, exp.Subquery) else None
        if isinstance(inner, exp.Query):
            node = inner
            continue
        return None

    head: object = node  # the leftmost SELECT names the output columns
    while not isinstance(head, exp.Select):
        head = getattr(head, "this", None)
        if head is None or isinstance(head, str):
            return ()
    projections = list(head.expressions)
    for p in projections:
        if isinstance(p, exp.Star) or (isinstance(p, exp.Column) and isinstance(p.this, exp.Star)):
            return ()

    keys: list[int] = []
    for item in ordering.expressions:
        target = item.this if isinstance(item, exp.Ordered) else item
        index = _map_order_key(target, projections)
        if index is None:
            return ()
        keys.append(index)
    return tuple(keys)


def _map_order_key(target: exp.Expression, projections: list[exp.Expression]) -> int | None:
    if isinstance(target, exp.Literal):
        if target.is_string:
            return None
        try:
            ordinal = int(str(target.this))
        except ValueError:
            return None
        return ordinal - 1 if 1 <= ordinal <= len(projections) else None

    def bare(p: exp.Expression) -> exp.Expression:
        return p.this if isinstance(p, exp.Alias) else p

    if isinstance(target, exp.Column) and not target.table:
        for k, p in enumerate(projections):
            if isinstance(p, exp.Alias) and p.alias == target.name:
                return k
            if isinstance(p, exp.Column) and p.name == target.name:
                return k
    for k, p in enumerate(projections):
        if bare(p) == target:
            return k
    if isinstance(target, exp.Column) and not isinstance(target.this, exp.Star):
        for k, p in enumerate(projections):
            inner = bare(p)
            if (
                isinstance(inner, exp.Column)
                and inner.name == target.name
                and (not inner.table or not target.table or inner.table == target.table)
            ):
                return k
    return None


@lru_cache(maxsize=4096)
def unmapped_order(gold_sql: str) -> str | None:
    """Why the top-level ORDER BY of ``gold_sql`` cannot be mapped to output columns, or None
    (no top-level ORDER BY, every key maps, or the SQL does not parse: the audit reports that).
    Such gold would enforce the whole row order, tied rows included, so question files refuse it.
    """
    try:
        if _order_keys(gold_sql) != ():  # the usual path: one parse
            return None
        tree = sqlglot.parse_one(gold_sql, read="postgres")
        if not isinstance(tree, exp.Query):
            return None
    except Exception:
        return None
    head: object = tree
    while not isinstance(head, exp.Select):
        head = getattr(head, "this", None)
        if head is None or isinstance(head, str):
            return "its top-level ORDER BY cannot be mapped to output columns"
    if any(
        isinstance(p, exp.Star) or (isinstance(p, exp.Column) and isinstance(p.this, exp.Star))
        for p in head.expressions
    ):
        return (
            "its top-level ORDER BY sorts a SELECT * (the output columns are not named, so the "
            "keys cannot be mapped to them): name the output columns"
        )
    return (
        "a top-level ORDER BY key is not an output column: add it to the select list (or drop "
        "the ORDER BY if the order does not matter)"
    )
