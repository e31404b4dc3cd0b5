"""Run SQL written by a system under test without letting it change or stall anything.

Layers (none trusted alone): a sqlglot guard that accepts exactly one read-only query; a role
that can only SELECT, and only in the state it is scored on (``heron_reader_<hash>``, whose
transactions are read-only by default); an
explicitly read-only transaction; a server ``statement_timeout`` plus a client-side deadline that
cancels the query; a server-side cursor fetched in chunks with a row cap; a fresh connection per
query with pinned session settings.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

import psycopg

from pytest_heron.sandbox.statement import check_statement

MAX_ROWS = 200_000
MAX_BYTES = 64 * 1024 * 1024  # text and bytes fetched, summed over the result
FETCH_CHUNK = 5_000


@dataclass
class ExecResult:
    """The outcome of one query: rows, or an error kind and message."""

    columns: list[str] = field(default_factory=list)
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    error_kind: str | None = None
    error: str | None = None
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error_kind is None


def pin_session(conn: psycopg.Connection[Any], timeout_s: float) -> None:
    """Make the open transaction read-only with the benchmark's pinned settings and a
    statement timeout (settings are LOCAL: they end with the transaction)."""
    conn.read_only = True
    conn.execute(f"SET LOCAL statement_timeout = {max(1, int(timeout_s * 1000))}")
    conn.execute("SET LOCAL TimeZone = 'UTC'")
    conn.execute("SET LOCAL DateStyle = 'ISO, YMD'")
    conn.execute("SET LOCAL IntervalStyle = 'postgres'")
    conn.execute("SET LOCAL jit = off")
    conn.execute("SET LOCAL extra_float_digits = 1")
    conn.execute("SET LOCAL search_path = public")


def execute(
    dsn: str,
    sql_text: str,
    *,
    timeout_s: float,
    max_rows: int = MAX_ROWS,
    max_bytes: int = MAX_BYTES,
    guard: bool = True,
) -> ExecResult:
    """Run one query read-only on ``dsn`` and fetch its rows (never raises for SQL problems)."""
    started = time.perf_counter()
    if guard:
        reason = check_statement(sql_text)
        if reason:
            return ExecResult(error_kind="rejected", error=reason)
    text = sql_text.strip().rstrip(";").strip()
    try:
        conn = psycopg.connect(dsn, autocommit=False, connect_timeout=10)
    except psycopg.Error as exc:
        return ExecResult(error_kind="db_error", error=f"could not connect: {exc}".strip())
    timer = threading.Timer(timeout_s + 2.0, conn.cancel)
    try:
        with conn:
            pin_session(conn, timeout_s)
            timer.start()
            with conn.cursor(name="heron_query") as cur:
                cur.execute(text)
                columns = [d.name for d in cur.description or []]
                rows: list[tuple[Any, ...]] = []
                size = 0
                while True:
                    chunk = cur.fetchmany(FETCH_CHUNK)
                    if not chunk:
                        break
                    rows.extend(chunk)
                    size += sum(len(v) for row in chunk for v in row if isinstance(v, (str, bytes)))
                    if size > max_bytes:
                        return ExecResult(
                            columns=columns,
                            error_kind="result_too_large",
                            error=f"the result holds more than {max_bytes:,} bytes of text",
                            seconds=time.perf_counter() - started,
                        )
                    if len(rows) > max_rows:
                        return ExecResult(
                            columns=columns,
                            error_kind="result_too_large",
                            error=f"the result has more than {max_rows:,} rows",
                            seconds=time.perf_counter() - started,
                        )
            conn.rollback()
        return ExecResult(columns, rows, seconds=time.perf_counter() - started)
    except psycopg.errors.QueryCanceled:
        return ExecResult(
            error_kind="timeout",
            error=f"the query ran longer than {timeout_s:g}s and was cancelled",
            seconds=time.perf_counter() - started,
        )
    except psycopg.Error as exc:
        message = (exc.diag.message_primary or str(exc)).strip()
        return ExecResult(
            error_kind="db_error", error=message[:1000], seconds=time.perf_counter() - started
        )
    finally:
        timer.cancel()
        conn.close()


def execution_ms(dsn: str, sql_text: str, *, timeout_s: float) -> float | None:
    """Server-side execution time of one (already accepted) query, from EXPLAIN ANALYZE with
    timing of nodes off, in the same pinned, read-only session settings; None if it fails."""
    text = sql_text.strip().rstrip(";").strip()
    try:
        with psycopg.connect(dsn, autocommit=False, connect_timeout=10) as conn:
            pin_session(conn, timeout_s)
            row = conn.execute("EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON) " + text).fetchone()
            conn.rollback()
    except psycopg.Error:
        return None
    if not row:
        return None
    plan = row[0][0] if isinstance(row[0], list) else row[0]
    return float(plan["Execution Time"])
