"""The sandbox on a real PostgreSQL: the statement guard, read-only execution, limits."""

from __future__ import annotations

import pytest

from pytest_heron import sandbox

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


def test_reader_cannot_write_even_past_the_guard(tiny_state) -> None:  # type: ignore[no-untyped-def]
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
