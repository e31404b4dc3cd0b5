"""The browser runner's guard (src/pytest_heron/browser/assets/guard.js) against the Python one.

Both parse with libpg_query for PostgreSQL 16 (pglast in Python, the vendored libpg-query
WebAssembly build in JavaScript, here run by Node). tests/data/guard_cases.json records what
each guard decides; on every case, every gold query and mutated gold queries, the JavaScript
guard gives exactly the verdict and the words of the Python guard's PostgreSQL half
(``check_with_postgres``). The full Python guard also asks sqlglot; a case where that alone
makes the verdicts differ says so.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from guard_cases import CASES, case_sql, mismatches, python_kind
from node_js import JsServer
from pytest_heron.dataset import load_questions
from pytest_heron.sandbox import statement
from pytest_heron.sandbox.statement import check_with_postgres


@pytest.fixture(scope="module")
def js() -> Iterator[JsServer]:
    server = JsServer(parser=True)
    yield server
    server.close()


def reason(verdict: dict[str, Any] | None) -> str | None:
    return None if verdict is None else str(verdict["reason"])


@pytest.mark.parametrize("case", CASES, ids=range(len(CASES)))
def test_the_python_guard_decides_as_the_case_file_says(case: dict[str, Any]) -> None:
    assert python_kind(case_sql(case)) == case["python"]


def test_where_the_guards_differ_only_sqlglot_refuses_and_the_case_says_why() -> None:
    differing = [case for case in CASES if "js" in case]
    assert len(differing) == 4
    for case in differing:
        assert case["js"] == "accepted" != case["python"] and "sqlglot" in case["note"], case
        assert check_with_postgres(case_sql(case)) is None


def test_the_js_guard_decides_as_the_case_file_says_in_the_words_of_postgres(
    js: JsServer,
) -> None:
    assert mismatches([js.guard(case_sql(case)) for case in CASES]) == {}
    assert len(CASES) >= 150


def test_the_guards_look_for_the_same_write_and_lock_clauses(js: JsServer) -> None:
    assert js.guard_rules()["writes"] == statement._PG_WRITES


def test_the_js_guard_accepts_every_gold_query(js: JsServer) -> None:
    refused = {q.id: js.guard(q.gold_sql) for q in load_questions()}
    assert {k: v for k, v in refused.items() if v is not None} == {}
    assert len(refused) == 100


GOLD = [q.gold_sql for q in load_questions()]
PIECES = ["'", '"', "$$", "$a$", "/*", "*/", "--", ";", "(", ")", "[", "]", "\\", "E'", "\n", "\r"]
PIECES += ["DELETE FROM t", "; DROP TABLE t", " INTO t ", " FOR UPDATE", "::", "SET x = 1", "é"]


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
def test_on_mutated_gold_queries_the_js_guard_gives_the_postgres_verdict(
    js: JsServer, gold: str, edits: list[tuple[int, int, str]]
) -> None:
    sql = gold
    for at, cut, piece in edits:
        i = at % (len(sql) + 1)
        sql = sql[:i] + piece + sql[i + cut :]
    assert reason(js.guard(sql)) == check_with_postgres(sql), sql
