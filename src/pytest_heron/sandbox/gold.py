"""Gold run for scoring: its rows, and how its top-level ORDER BY cuts them.

Every path that scores an answer against gold (the plugin, ``verify-submission``, the audit)
runs gold through :func:`execute_gold`, so each one honours gold's ORDER BY the same way and no
gold is refused for it (:mod:`pytest_heron.compare.order` explains the three steps).  Gold is
trusted SQL: it runs without the guard.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from pytest_heron import compare
from pytest_heron.compare import Comparison
from pytest_heron.sandbox.execute import MAX_ROWS, ExecResult, execute


@dataclass(frozen=True)
class GoldResult:
    """Gold's result and the order an answer must keep.

    ``result.rows`` are the output rows only (hidden key columns already dropped).  ``order``
    and ``ties`` are the comparator's arguments of the same names (:func:`compare.compare`):
    ``order`` None for an unordered gold, else the sort keys that are output columns;
    ``ties`` the tie groups when some key is not an output column, else None.  ``note`` says
    how the order was recovered when it took more than the SQL ("" otherwise).
    """

    result: ExecResult
    order: tuple[int, ...] | None
    ties: list[int] | None = None
    note: str = ""

    @property
    def ok(self) -> bool:
        return self.result.ok

    @property
    def rows(self) -> list[tuple[object, ...]]:
        return self.result.rows

    def compare(self, rows: list[tuple[object, ...]], *, superset: bool = False) -> Comparison:
        """:func:`compare.compare` of ``rows`` against these gold rows, in this order."""
        return compare.compare(
            self.result.rows, rows, order=self.order, ties=self.ties, superset=superset
        )


def execute_gold(
    dsn: str, sql_text: str, *, timeout_s: float, max_rows: int = MAX_ROWS
) -> GoldResult:
    """Run gold on ``dsn`` and work out its order (never raises).

    Keys the SQL maps come free; a name left over is looked up among the result's column names;
    keys still left over cost one more run of gold with them appended as hidden columns, whose
    rows (the same multiset, or the order is enforced on the whole sequence as a last resort)
    give the tie groups."""
    got = execute(dsn, sql_text, timeout_s=timeout_s, guard=False, max_rows=max_rows)
    plan = compare.order_plan(sql_text)
    if not got.ok or plan.items is None:
        return GoldResult(got, None if got.ok else plan.keys)
    if not plan.parsed:
        return GoldResult(got, (), note="the ORDER BY could not be read: the row order is enforced")
    slots = plan.resolve(got.columns)
    visible = tuple(s for s in slots if s is not None)
    if len(visible) == len(slots):
        return GoldResult(got, visible)
    outside = [k for k, s in enumerate(slots) if s is None]
    fallback = GoldResult(
        got, (), note="keys outside the output could not be recovered: the row order is enforced"
    )
    hidden_sql = compare.hidden_order_sql(sql_text, outside)
    if hidden_sql is None:
        return fallback
    wide = execute(dsn, hidden_sql, timeout_s=timeout_s, guard=False, max_rows=max_rows)
    width = len(got.columns)
    if not wide.ok or len(wide.columns) != width + len(outside):
        return fallback
    rows = [tuple(r[:width]) for r in wide.rows]
    if not compare.compare(got.rows, rows).equal:
        return fallback  # the rewritten query is not the same query: trust neither its order
    key_columns: list[int] = []
    hidden = iter(range(width, width + len(outside)))
    for s in slots:
        key_columns.append(next(hidden) if s is None else s)
    ties = compare.tie_groups(wide.rows, key_columns)
    return GoldResult(
        replace(got, rows=rows, seconds=got.seconds),
        visible,
        ties,
        note=f"{len(outside)} ORDER BY key(s) outside the output cut the tie groups",
    )
