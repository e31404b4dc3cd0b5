"""The sandbox on a real PostgreSQL: the statement guard, read-only execution, limits."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_heron import sandbox
from pytest_heron.dataset import load_questions

ACCEPTED = [
    "SELECT 1",
    "SELECT 1;",
    "  select 1 ;  ",
    "WITH t AS (SELECT 1 AS x) SELECT x FROM t",
    "SELECT 1 UNION ALL SELECT 2",
    "VALUES (1), (2)",
    "(SELECT 1)",
]
REJECTED = [
    ("", "exactly one statement"),
    ("SELECT 1; SELECT 2", "exactly one statement"),
    ("DELETE FROM core.tenants", "only a SELECT"),
    ("UPDATE core.tenants SET name = 'x'", "only a SELECT"),
    ("DROP TABLE core.tenants", "only a SELECT"),
    ("WITH d AS (DELETE FROM core.tenants RETURNING *) SELECT * FROM d", "could change data"),
    ("SELECT * INTO new_table FROM core.tenants", "could change data"),
    ("COMMIT; SELECT 1", "exactly one statement"),
    ("SET ROLE postgres", "only a SELECT"),
    ("SELECT 1\x00", "NUL byte"),
]


@pytest.mark.parametrize("sql", ACCEPTED)
def test_guard_accepts_single_queries(sql: str) -> None:
    assert sandbox.check_statement(sql) is None


@pytest.mark.parametrize(("sql", "why"), REJECTED)
def test_guard_rejects_with_a_reason(sql: str, why: str) -> None:
    reason = sandbox.check_statement(sql)
    assert reason is not None and why in reason


def test_prediction_runs_as_reader_and_reads(tiny_state) -> None:  # type: ignore[no-untyped-def]
    got = sandbox.execute(tiny_state.reader_dsn, "SELECT count(*) FROM core.tenants", timeout_s=10)
    assert got.ok and got.rows[0][0] > 0


def test_reader_cannot_write_even_past_the_guard(state_copy) -> None:  # type: ignore[no-untyped-def]
    tiny_state = state_copy  # were the write to pass, it would change a private copy only
    got = sandbox.execute(
        tiny_state.reader_dsn, "DELETE FROM core.tenants", timeout_s=10, guard=False
    )
    assert got.error_kind == "db_error"
    after = sandbox.execute(tiny_state.admin_dsn, "SELECT count(*) FROM core.tenants", timeout_s=10)
    assert after.rows[0][0] == tiny_state.manifest["row_counts"]["core.tenants"]


def test_timeout_is_its_own_error_kind(tiny_state) -> None:  # type: ignore[no-untyped-def]
    got = sandbox.execute(
        tiny_state.reader_dsn,
        "SELECT count(*) FROM generate_series(1, 100000000) a, generate_series(1, 1000) b",
        timeout_s=0.3,
    )
    assert got.error_kind == "timeout"
    assert "longer than 0.3s" in (got.error or "")


def test_row_cap(tiny_state) -> None:  # type: ignore[no-untyped-def]
    got = sandbox.execute(
        tiny_state.reader_dsn, "SELECT * FROM generate_series(1, 1000)", timeout_s=10, max_rows=100
    )
    assert got.error_kind == "result_too_large"


def test_sql_error_is_db_error_with_message(tiny_state) -> None:  # type: ignore[no-untyped-def]
    got = sandbox.execute(tiny_state.reader_dsn, "SELECT nope FROM core.tenants", timeout_s=10)
    assert got.error_kind == "db_error" and "nope" in (got.error or "")


# --- the guard never raises ------------------------------------------------------------------

NEVER_RAISE = [
    ("SELECT 'abc", "tokenize"),  # a reply cut off inside a string
    ("SELECT $$abc", "tokenize"),  # ... inside a dollar quote
    ("SELECT $a$ x $b$", "tokenize"),
    ("SELECT 1 /* and then", "tokenize"),  # ... inside a comment
    ('SELECT "abc', "tokenize"),
    ("SELECT " + "(" * 400 + "1" + ")" * 400, "nested too deeply"),
    ("SELECT 1 FROM t WHERE " + "(" * 200 + "a = 1" + ")" * 200, "nested too deeply"),
    ("SELECT " + "ARRAY[" * 20 + "1" + "]" * 20, "too complex"),  # sqlglot backtracks 2^n
    ("SELECT '\ud800'", "U+D800"),
    ("SELECT 1 -- \udfff", "U+DFFF"),
    ("x" * 60_000_000, "60,000,000 characters"),
    ("SELECT 1; /* x */; DELETE FROM core.tenants", "exactly one statement"),
]


@pytest.mark.parametrize(("sql", "why"), NEVER_RAISE, ids=range(len(NEVER_RAISE)))
def test_guard_rejects_what_does_not_parse_instead_of_raising(sql: str, why: str) -> None:
    reason = sandbox.check_statement(sql)
    assert reason is not None and why in reason, reason


@pytest.mark.parametrize("sql", ["SELECT 1; -- done", "SELECT 1; /* x */", "SELECT 1;\n-- end\n"])
def test_a_comment_after_the_final_semicolon_is_one_statement(sql: str) -> None:
    assert sandbox.check_statement(sql) is None


def test_the_length_cap_is_checked_before_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_heron.sandbox import statement

    def no_parse(*args: object, **kwargs: object) -> None:
        raise AssertionError("parsed")

    monkeypatch.setattr(statement.sqlglot, "parse", no_parse)
    reason = sandbox.check_statement("SELECT 1 " + " " * statement.MAX_SQL_CHARS)
    assert reason is not None and f"{statement.MAX_SQL_CHARS:,}" in reason


def test_a_long_real_query_under_the_cap_is_accepted() -> None:
    from pytest_heron.sandbox.statement import MAX_SQL_CHARS

    sql = " UNION ALL ".join(f"SELECT {i} AS n, 'label {i}' AS t" for i in range(2_100))
    assert 80_000 < len(sql) <= MAX_SQL_CHARS
    assert sandbox.check_statement(sql) is None


def test_execute_rejects_unparsable_sql_and_keeps_the_message(tiny_state) -> None:  # type: ignore[no-untyped-def]
    for sql in ("SELECT 'abc", "SELECT '\ud800'", "SELECT " + "(" * 400 + "1" + ")" * 400):
        got = sandbox.execute(tiny_state.reader_dsn, sql, timeout_s=5)
        assert got.error_kind == "rejected" and got.error


def test_trailing_comment_runs_and_returns_the_rows(tiny_state) -> None:  # type: ignore[no-untyped-def]
    for sql in ("SELECT 1 AS one; -- done", "SELECT 1 AS one; /* x */"):
        got = sandbox.execute(tiny_state.reader_dsn, sql, timeout_s=5)
        assert got.ok and got.rows == [(1,)], got.error


def test_unexpected_failures_become_results(tiny_state) -> None:  # type: ignore[no-untyped-def]
    # past the guard, a lone surrogate fails inside psycopg's encoder (not a psycopg.Error)
    got = sandbox.execute(tiny_state.reader_dsn, "SELECT '\ud800'", timeout_s=5, guard=False)
    assert got.error_kind == "rejected" and "encode" in (got.error or "")
    # jsonb nested deeper than json.loads can recurse: the loader raises RecursionError
    deep = "SELECT (repeat('[', 5000) || repeat(']', 5000))::jsonb"
    got = sandbox.execute(tiny_state.reader_dsn, deep, timeout_s=10)
    assert got.error_kind in {"db_error", "rejected"} and got.error
    assert sandbox.execution_ms(tiny_state.reader_dsn, "SELECT '\ud800'", timeout_s=5) is None


# --- fuzzing the guard: arbitrary text, mutated real queries -------------------------------

GOLD = [q.gold_sql for q in load_questions()]
PIECES = ["'", '"', "$$", "$a$", "/*", "*/", "--", ";", "(", ")", "[", "]", "ARRAY[", "\\", "E'"]
PIECES += ["\x00", "\ud800", "\udfff", "\n", "SELECT", "DELETE", "::", "{", "}", "%s", "?"]


def _answer_is_sane(sql: str) -> None:
    reason = sandbox.check_statement(sql)
    assert reason is None or (isinstance(reason, str) and reason)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(alphabet=st.characters(codec=None, categories=None), max_size=400))
def test_arbitrary_text_never_raises(sql: str) -> None:
    _answer_is_sane(sql)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(GOLD),
    st.lists(
        st.tuples(st.integers(0, 10_000), st.integers(0, 40), st.sampled_from(PIECES)),
        min_size=1,
        max_size=4,
    ),
)
def test_mutated_real_queries_never_raise(gold: str, edits: list[tuple[int, int, str]]) -> None:
    """Cut, splice and truncate real gold queries (what a truncated or garbled reply is)."""
    sql = gold
    for at, cut, piece in edits:
        i = at % (len(sql) + 1)
        sql = sql[:i] + piece + sql[i + cut :]
    _answer_is_sane(sql)


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(GOLD), st.integers(0, 100_000))
def test_every_prefix_of_a_real_query_never_raises(gold: str, cut: int) -> None:
    _answer_is_sane(gold[: cut % (len(gold) + 1)])


def test_every_gold_query_is_accepted() -> None:
    assert [q for q in GOLD if sandbox.check_statement(q) is not None] == []
