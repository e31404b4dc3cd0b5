"""Static checks of gold SQL: no database needed (tables read, volatile functions, duplicates,
where NULL rows of an ordered answer go: :mod:`.nulls`)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

import sqlglot

from pytest_heron.audit.nulls import null_order_problem, nullable_order_keys, schema_nullability
from pytest_heron.dataset import GoldQuestion
from pytest_heron.sandbox import parse_sql, tables_read
from pytest_heron.scoring import volatile_calls


def static_problems(q: GoldQuestion) -> dict[str, str]:
    """Problems found without a database, keyed by check name."""
    problems: dict[str, str] = {}
    try:
        tree = parse_sql(q.gold_sql)
    except sqlglot.errors.ParseError as exc:
        return {"parses": f"gold does not parse: {str(exc).splitlines()[0]}"}
    read = tables_read(q.gold_sql)
    if read != set(q.gold_tables):
        problems["gold_tables"] = (
            f"gold reads {sorted(read)} but gold_tables says {sorted(q.gold_tables)}"
        )
    # the scorer's own check, on the parse tree, with the catalog it falls back on
    volatile = volatile_calls(q.gold_sql)
    if volatile:
        problems["deterministic"] = f"gold is volatile: it {'; '.join(volatile)}"
    top = tree.args.get("limit") or tree.args.get("offset")
    has_order = tree.args.get("order") is not None
    if top is not None and not has_order:
        problems["ordered_limit"] = "LIMIT/OFFSET without a top-level ORDER BY"
    null_order = _null_order(q.question, q.gold_sql)
    if null_order:
        problems["null_order"] = f"{q.id}: {null_order}"
    return problems


@lru_cache(maxsize=1024)
def _null_order(question: str, gold_sql: str) -> str | None:
    """:func:`~.nulls.null_order_problem` against the shipped schema (the audit asks once per
    check of a question: the answer is kept)."""
    return null_order_problem(question, nullable_order_keys(gold_sql, schema_nullability()))


def duplicate_problems(questions: Sequence[GoldQuestion]) -> dict[str, str]:
    """Questions whose normalised text or normalised gold repeats another's."""
    seen_text: dict[str, str] = {}
    seen_sql: dict[str, str] = {}
    problems = {}
    for q in questions:
        text = " ".join(re.sub(r"[^a-z0-9 ]", " ", q.question.lower()).split())
        try:
            gold = parse_sql(q.gold_sql).sql(dialect="postgres", normalize=True)
        except sqlglot.errors.ParseError:
            gold = q.gold_sql
        if text in seen_text:
            problems[q.id] = f"same question as {seen_text[text]}"
        elif gold in seen_sql:
            problems[q.id] = f"same gold SQL as {seen_sql[gold]}"
        seen_text.setdefault(text, q.id)
        seen_sql.setdefault(gold, q.id)
    return problems
