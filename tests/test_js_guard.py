"""The JavaScript guard (src/pytest_heron/browser/assets/guard.js) against the Python one.

tests/data/guard_cases.json records what each guard decides; here the Python side is held to
it, and the JavaScript guard is checked to accept every gold query and, on mutated gold queries,
never to accept a statement the Python guard rejects for anything but its syntax.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from node_js import JsServer
from pytest_heron.dataset.questions import load_questions
from pytest_heron.sandbox import check_statement

CASE_FILE = Path(__file__).parent / "data" / "guard_cases.json"
CASES: list[dict[str, Any]] = json.loads(CASE_FILE.read_text(encoding="utf-8"))["cases"]
SYNTAX_ONLY = {"parse", "tokenize", "nesting"}
"""Rejections about the text's syntax: PostgreSQL refuses such a statement too."""

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


def python_kind(sql: str) -> str:
    reason = check_statement(sql)
    if reason is None:
        return "accepted"
    for text, kind in KINDS:
        if text in reason:
            return kind
    raise AssertionError(f"a reason of no known kind: {reason}")


def case_sql(case: dict[str, Any]) -> str:
    if "sql" in case:
        return str(case["sql"])
    parts = case["sql_repeat"]
    return "".join(str(parts[k]) * int(parts[k + 1]) for k in range(0, len(parts), 2))


@pytest.fixture(scope="module")
def js() -> Iterator[JsServer]:
    server = JsServer()
    yield server
    server.close()


@pytest.mark.parametrize("case", CASES, ids=range(len(CASES)))
def test_the_python_guard_decides_as_the_case_file_says(case: dict[str, Any]) -> None:
    assert python_kind(case_sql(case)) == case["python"]


@pytest.mark.parametrize("case", CASES, ids=range(len(CASES)))
def test_the_js_guard_is_never_more_lenient(case: dict[str, Any]) -> None:
    js_kind = case.get("js", case["python"])
    if js_kind == "accepted":
        assert case["python"] == "accepted" or case["python"] in SYNTAX_ONLY, case
    if "js" in case:
        assert "note" in case, "a case where the guards differ says why"


def test_the_js_guard_accepts_every_gold_query(js: JsServer) -> None:
    refused = {q.id: js.guard(q.gold_sql) for q in load_questions()}
    assert {k: v for k, v in refused.items() if v is not None} == {}
    assert len(refused) == 100


GOLD = [q.gold_sql for q in load_questions()]
PIECES = ["'", '"', "$$", "$a$", "/*", "*/", "--", ";", "(", ")", "[", "]", "\\", "E'", "\n", "\r"]
PIECES += ["DELETE FROM t", "; DROP TABLE t", " INTO t ", " FOR UPDATE", "::", "SET x = 1"]


@settings(
    max_examples=300, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(
    st.sampled_from(GOLD),
    st.lists(
        st.tuples(st.integers(0, 10_000), st.integers(0, 40), st.sampled_from(PIECES)),
        min_size=1,
        max_size=4,
    ),
)
def test_mutated_gold_queries_the_js_guard_accepts_pass_python_bar_syntax(
    js: JsServer, gold: str, edits: list[tuple[int, int, str]]
) -> None:
    sql = gold
    for at, cut, piece in edits:
        i = at % (len(sql) + 1)
        sql = sql[:i] + piece + sql[i + cut :]
    if js.guard(sql) is None:
        assert python_kind(sql) in {"accepted", *SYNTAX_ONLY}, sql
