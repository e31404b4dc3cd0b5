"""Dynamic checks of gold SQL on every state: it runs, returns rows, keeps its shape and has no
ties at a LIMIT boundary."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg

from pytest_heron import compare
from pytest_heron.dataset.questions import GoldQuestion
from pytest_heron.sandbox.execute import pin_session
from pytest_heron.sandbox.statement import parse_sql


@dataclass
class Run:
    ok: bool
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    types: tuple[int, ...] = ()
    error: str = ""


def run(dsn: str, sql: str, timeout_s: float = 60.0) -> Run:
    """Execute read-only with pinned settings; never raises for SQL errors."""
    try:
        with psycopg.connect(dsn, autocommit=False, connect_timeout=10) as conn:
            pin_session(conn, timeout_s)
            cur = conn.execute(sql)
            rows = cur.fetchall()
            types = tuple(d.type_code for d in cur.description or [])
            conn.rollback()
            return Run(True, rows, types)
    except psycopg.Error as exc:
        return Run(False, error=(exc.diag.message_primary or str(exc)).strip())


def limit_ties(dsn: str, sql: str) -> str | None:
    """If gold has LIMIT, whether the rows just inside and just outside the limit tie on the
    ORDER BY keys (then the result depends on the plan, not the data)."""
    tree = parse_sql(sql)
    limit = tree.args.get("limit")
    if limit is None or tree.args.get("order") is None:
        return None
    keys = compare.order_keys(sql)
    try:
        n = int(limit.expression.name)
    except (AttributeError, ValueError):
        return None
    unlimited = tree.copy()
    unlimited.set("limit", None)
    unlimited.set("offset", None)
    got = run(dsn, unlimited.sql(dialect="postgres"))
    if not got.ok or len(got.rows) <= n or not keys:
        return None
    inside, outside = got.rows[n - 1], got.rows[n]
    if all(compare.compare([(inside[k],)], [(outside[k],)]).equal for k in keys):
        return f"rows {n} and {n + 1} tie on the ORDER BY keys: the LIMIT cuts a tie"
    return None


def state_problems(q: GoldQuestion, dsns: Sequence[str]) -> dict[str, str]:
    """Problems found by running gold on every state."""
    problems: dict[str, str] = {}
    runs = [run(d, q.gold_sql) for d in dsns]
    for i, r in enumerate(runs):
        if not r.ok:
            problems["executes"] = f"state {i + 1}: {r.error}"
            return problems
    if q.empty_probe:
        if any(r.rows for r in runs):
            problems["empty"] = "an empty probe returned rows"
    elif not all(r.rows for r in runs):
        problems["rows"] = "gold returned no rows on " + ", ".join(
            f"state {i + 1}" for i, r in enumerate(runs) if not r.rows
        )
    if len({r.types for r in runs}) > 1:
        problems["stable"] = "column types differ between states"
    for d in dsns:
        tie: str | None = limit_ties(d, q.gold_sql)
        if tie:
            problems["limit_ties"] = tie
            break
    return problems
