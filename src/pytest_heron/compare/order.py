"""Gold's top-level ORDER BY: which output columns it sorts on, and how to recover the keys that
are not output columns (SQL analysis and pure computation only; running gold is the sandbox's).

Three steps decide how an ordered gold result is compared, and no gold is refused for them:

1. from the SQL alone (:func:`order_plan`): a key given by ordinal, by output name, or by an
   expression equal to a projection maps to that output column;
2. from gold's result (:meth:`OrderPlan.resolve`): an unqualified name left over is looked up
   among the column names of gold's cursor description, which is how ``SELECT * ... ORDER BY b``
   and ``SELECT count(*) ... ORDER BY count`` find their columns;
3. the keys still left over are expressions over the input rows (``ORDER BY placed_at`` with
   ``placed_at`` outside the select list): gold runs once more with them appended as hidden
   columns (:func:`hidden_order_sql`), its rows are cut into tie groups on every key
   (:func:`tie_groups`), and the hidden columns are dropped before the comparison.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import sqlglot
from sqlglot import exp
from sqlglot.optimizer.normalize_identifiers import normalize_identifiers

from pytest_heron.compare.values import value_key

HIDDEN_PREFIX = "heron_tie_"  # the aliases of the hidden key columns: heron_tie_1, heron_tie_2, ...


@dataclass(frozen=True)
class OrderItem:
    """One key of gold's top-level ORDER BY.

    ``index``: the output column (0-based) the SQL alone maps it to, else None.  ``name``: for an
    unqualified column reference, its name as PostgreSQL folds it, to look up among gold's output
    column names; else None.
    """

    index: int | None
    name: str | None


@dataclass(frozen=True)
class OrderPlan:
    """Gold's top-level ORDER BY as :func:`order_plan` reads it.

    ``items is None``: no top-level ORDER BY (rows compare as multisets).  ``parsed`` is False
    when the SQL does not parse as a query: then the whole row sequence is enforced.
    """

    items: tuple[OrderItem, ...] | None
    parsed: bool = True

    @property
    def keys(self) -> tuple[int, ...] | None:
        """The output columns when the SQL alone maps every key; ``()`` when it does not."""
        if self.items is None:
            return None
        if not self.parsed or any(it.index is None for it in self.items):
            return ()
        return tuple(it.index for it in self.items if it.index is not None)

    def resolve(self, columns: Sequence[str]) -> tuple[int | None, ...]:
        """Per key, its output column among gold's ``columns`` (the cursor description's names),
        or None when it is not an output column (it needs a hidden column).  A name maps only
        when exactly one output column carries it (PostgreSQL refuses an ambiguous one)."""
        out: list[int | None] = []
        for it in self.items or ():
            if it.index is not None:
                out.append(it.index if it.index < len(columns) else None)
            elif it.name is not None and list(columns).count(it.name) == 1:
                out.append(list(columns).index(it.name))
            else:
                out.append(None)
        return tuple(out)


def order_keys(gold_sql: str) -> tuple[int, ...] | None:
    """Which output columns of the gold query (0-based) its top-level ORDER BY sorts on.

    ``None``: no top-level ORDER BY (compare as multisets).  ``()``: ordered, but at least one key
    could not be mapped to an output column from the SQL alone (or the SQL does not parse, or the
    output columns are not known, as with ``SELECT *``): callers that run gold resolve those keys
    through :func:`order_plan` instead; the comparator reads ``()`` as the exact row sequence.
    Only the ORDER BY of the outermost SELECT or set operation counts, never one inside a CTE or
    subquery.  Keys map by 1-based ordinal, by output name (alias or column name), or by an
    expression equal to a projection's expression.  Never raises.
    """
    return order_plan(gold_sql).keys


@lru_cache(maxsize=4096)
def order_plan(gold_sql: str) -> OrderPlan:
    """The keys of gold's top-level ORDER BY, each mapped from the SQL alone where it can be.
    Never raises: SQL that does not parse gives ``OrderPlan((), parsed=False)``."""
    try:
        return _plan(gold_sql)
    except Exception:
        return OrderPlan((), parsed=False)


def _top(tree: object) -> tuple[exp.Query, exp.Order] | None:
    """The outermost query that carries an ORDER BY (through parentheses), with that ORDER BY."""
    node = tree
    while isinstance(node, exp.Query):
        ordering = node.args.get("order")
        if isinstance(ordering, exp.Order):
            return node, ordering
        inner = node.this if isinstance(node, exp.Subquery) else None
        if not isinstance(inner, exp.Query):
            return None
        node = inner
    return None


def _head(node: exp.Query) -> exp.Select | None:
    """The leftmost SELECT, which names the output columns."""
    head: object = node
    while not isinstance(head, exp.Select):
        head = getattr(head, "this", None)
        if head is None or isinstance(head, str):
            return None
    return head


def _is_star(p: exp.Expression) -> bool:
    return isinstance(p, exp.Star) or (isinstance(p, exp.Column) and isinstance(p.this, exp.Star))


def _plan(sql: str) -> OrderPlan:
    tree = sqlglot.parse_one(sql, read="postgres")
    if not isinstance(tree, exp.Query):
        return OrderPlan((), parsed=False)
    tree = normalize_identifiers(tree, dialect="postgres")
    top = _top(tree)
    if top is None:
        return OrderPlan(None)
    node, ordering = top
    head = _head(node)
    projections = [] if head is None else list(head.expressions)
    star = any(_is_star(p) for p in projections)
    items: list[OrderItem] = []
    for item in ordering.expressions:
        target = item.this if isinstance(item, exp.Ordered) else item
        name = (
            target.name
            if isinstance(target, exp.Column) and not target.table and target.name
            else None
        )
        if star or head is None:
            index = _ordinal(target, None)  # an ordinal counts output columns, stars expanded
        else:
            index = _map_order_key(target, projections)
        items.append(OrderItem(index, name))
    return OrderPlan(tuple(items))


def _ordinal(target: exp.Expression, width: int | None) -> int | None:
    if not isinstance(target, exp.Literal) or target.is_string:
        return None
    try:
        ordinal = int(str(target.this))
    except ValueError:
        return None
    return ordinal - 1 if ordinal >= 1 and (width is None or ordinal <= width) else None


def _map_order_key(target: exp.Expression, projections: list[exp.Expression]) -> int | None:
    if isinstance(target, exp.Literal):
        return _ordinal(target, len(projections))

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


def hidden_order_sql(gold_sql: str, keys: Sequence[int]) -> str | None:
    """``gold_sql`` with the ORDER BY keys at positions ``keys`` (0-based, in the ORDER BY)
    appended to its select list as hidden columns ``heron_tie_1``, ... in that order, or None
    when they cannot be (the ORDER BY belongs to a set operation, whose keys can only be output
    columns, or the SQL does not parse).  The query is otherwise unchanged: the same rows in the
    same order, each one wider by ``len(keys)`` columns.  Never raises."""
    try:
        tree = sqlglot.parse_one(gold_sql, read="postgres")
        top = _top(tree)
        if top is None or not isinstance(top[0], exp.Select):
            return None
        node, ordering = top
        for n, k in enumerate(keys, start=1):
            item = ordering.expressions[k]
            target = item.this if isinstance(item, exp.Ordered) else item
            if isinstance(target, exp.Literal):
                return None  # an ordinal names an output column: never hidden
            node.append("expressions", exp.alias_(target.copy(), f"{HIDDEN_PREFIX}{n}"))
        return tree.sql(dialect="postgres")
    except Exception:
        return None


def tie_groups(rows: Sequence[Sequence[object]], columns: Sequence[int]) -> list[int]:
    """Per row, the number of its run of consecutive rows equal on ``columns`` (0, 1, ...).

    Values compare by the comparator's canonical keys (:func:`~.values.value_key`), so NULLs tie
    with NULLs and NaNs with NaNs, as they do in PostgreSQL's sort.

    >>> tie_groups([(1, "a"), (1, "b"), (2, "c"), (1, "d")], [0])
    [0, 0, 1, 2]
    """
    out: list[int] = []
    run = -1
    previous: tuple[object, ...] | None = None
    for row in rows:
        key = tuple(value_key(row[c]) for c in columns)
        if key != previous:
            run += 1
            previous = key
        out.append(run)
    return out
