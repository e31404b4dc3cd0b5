"""Dynamic checks of gold SQL on every state: it runs, returns rows, keeps its columns and has no
ties at a LIMIT boundary.

Gold runs through the benchmark's one executor (:func:`pytest_heron.sandbox.execute`, without the
statement guard: gold is trusted), so the audit sees gold exactly as scoring does: the same pinned
read-only session, cancel timer and row cap (a gold result over the cap fails here as it would
fail scoring).
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlglot import exp

from pytest_heron import compare
from pytest_heron.dataset import GoldQuestion
from pytest_heron.sandbox import MAX_ROWS, ExecResult, GoldResult, execute, execute_gold, parse_sql

TIMEOUT_S = 60.0  # statement timeout of every audit query


def run_gold(dsn: str, sql: str, *, max_rows: int = MAX_ROWS) -> ExecResult:
    """``sql`` (gold or a mutant of it) on ``dsn`` with the audit's limits; never raises for SQL
    errors."""
    return execute(dsn, sql, timeout_s=TIMEOUT_S, guard=False, max_rows=max_rows)


def run_gold_ordered(dsn: str, sql: str, *, max_rows: int = MAX_ROWS) -> GoldResult:
    """:func:`run_gold` as scoring runs gold: with the order its ORDER BY asks of an answer
    (keys outside the output recovered as tie groups: :func:`pytest_heron.sandbox.execute_gold`).
    """
    return execute_gold(dsn, sql, timeout_s=TIMEOUT_S, max_rows=max_rows)


def limit_ties(dsn: str, sql: str) -> str | None:
    """If gold has LIMIT, whether the rows just inside and just outside the limit tie on the
    ORDER BY keys (then the result depends on the plan, not the data)."""
    tree = parse_sql(sql)
    limit = tree.args.get("limit")
    if limit is None or tree.args.get("order") is None:
        return None
    try:
        n = int(limit.expression.name)
    except (AttributeError, ValueError):
        return None
    # the first n + 1 rows without OFFSET: rows n and n + 1 have the same ORDER BY keys under
    # every order the query allows, so this is the unlimited query's boundary
    widened = tree.copy()
    widened.set("limit", exp.Limit(expression=exp.Literal.number(n + 1)))
    widened.set("offset", None)
    got = run_gold_ordered(dsn, widened.sql(dialect="postgres"), max_rows=n + 1)
    if not got.ok or len(got.rows) <= n:
        return None
    if got.ties is not None:  # some keys are not output columns: their tie groups tell
        tied = got.ties[n - 1] == got.ties[n]
    elif not got.order:
        return None
    else:
        inside, outside = got.rows[n - 1], got.rows[n]
        tied = all(compare.compare([(inside[k],)], [(outside[k],)]).equal for k in got.order)
    if tied:
        return f"rows {n} and {n + 1} tie on the ORDER BY keys: the LIMIT cuts a tie"
    return None


def state_problems(
    q: GoldQuestion, dsns: Sequence[str], runs: Sequence[ExecResult] | None = None
) -> dict[str, str]:
    """Problems found by running gold on every state (``runs``: gold's results there, when the
    caller has them already)."""
    problems: dict[str, str] = {}
    runs = [run_gold(d, q.gold_sql) for d in dsns] if runs is None else runs
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
    if len({tuple(r.columns) for r in runs}) > 1:
        problems["stable"] = "the result columns differ between states"
    for d in dsns:
        tie: str | None = limit_ties(d, q.gold_sql)
        if tie:
            problems["limit_ties"] = tie
            break
    return problems
