"""The shared statement cases (tests/data/guard_cases.json), read for the Python tests.

Each case has the SQL (``sql``, or ``sql_repeat``: pieces and how often each is repeated),
``python``: what pytest_heron.sandbox.check_statement decides (``accepted`` or the kind of
rejection), and ``js`` where the browser runner's guard (assets/guard.js) decides otherwise,
with a ``note`` saying why. The JavaScript guard must also give, word for word, the reason of
the Python guard's PostgreSQL half (``check_with_postgres``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pytest_heron.sandbox import check_statement
from pytest_heron.sandbox.statement import check_with_postgres

CASE_FILE = Path(__file__).parent / "data" / "guard_cases.json"
CASES: list[dict[str, Any]] = json.loads(CASE_FILE.read_text(encoding="utf-8"))["cases"]

KINDS = [
    ("exactly one statement", "statements"),
    ("only a SELECT", "not_a_query"),
    ("could change data", "writes"),
    ("NUL byte", "nul"),
    ("characters long", "length"),
    ("not valid Unicode", "encoding"),
    ("does not tokenize", "tokenize"),
    ("does not parse", "parse"),
    ("could not be parsed", "parse"),
    ("nested too deeply", "nesting"),
    ("too complex", "nesting"),
    ("not text", "type"),
]


def kind_of(reason: str | None) -> str:
    """``accepted`` for None, else the kind of a rejection reason."""
    if reason is None:
        return "accepted"
    for text, kind in KINDS:
        if text in reason:
            return kind
    raise AssertionError(f"a reason of no known kind: {reason}")


def python_kind(sql: str) -> str:
    return kind_of(check_statement(sql))


def case_sql(case: dict[str, Any]) -> str:
    if "sql" in case:
        return str(case["sql"])
    parts = case["sql_repeat"]
    return "".join(str(parts[k]) * int(parts[k + 1]) for k in range(0, len(parts), 2))


def js_expected(case: dict[str, Any]) -> str:
    return str(case.get("js", case["python"]))


STACK_REASON = "the SQL is nested too deeply to parse"


def js_reason(case: dict[str, Any]) -> str | None:
    """The reason the JavaScript guard gives: the Python guard's PostgreSQL half's, except where
    the JavaScript engine's stack runs out inside the parser (the case says ``nesting``)."""
    sql = case_sql(case)
    reason = check_with_postgres(sql)
    if reason is None and js_expected(case) == "nesting":
        return STACK_REASON
    return reason


def mismatches(verdicts: list[dict[str, Any] | None]) -> dict[int, Any]:
    """The cases whose JavaScript verdict (one per case, in order) is not the expected one:
    the kind the case file gives and the reason :func:`js_reason` gives."""
    assert len(verdicts) == len(CASES)
    wrong = {}
    for k, (case, verdict) in enumerate(zip(CASES, verdicts, strict=True)):
        got = None if verdict is None else str(verdict["reason"])
        kind = "accepted" if verdict is None else verdict["kind"]
        if kind != js_expected(case) or kind != kind_of(got) or got != js_reason(case):
            wrong[k] = (case_sql(case)[:80], verdict, js_reason(case))
    return wrong
