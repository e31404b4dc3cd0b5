"""Run SQL written by a system under test without letting it change or stall anything.

Layers (none trusted alone): a sqlglot guard that accepts exactly one read-only query; a role
that can only SELECT, and only in the state it is scored on (``heron_reader_<hash>``, whose
transactions are read-only by default); an
explicitly read-only transaction; a server ``statement_timeout`` plus a client-side deadline that
cancels the query; a cursor fetched in small, adaptive chunks under caps on rows, cells and the
memory the decoded values take; a fresh connection per query with pinned session settings.

Memory: before a fetched chunk is decoded into Python objects, the worst case of its decoded
size is worked out from each value's length on the wire and its column type
(:func:`worst_cell_bytes`); only what fits in what is left of ``max_bytes`` is decoded. After
decoding, every value is counted with a cheap, deterministic estimate of its size
(:func:`value_bytes`). So the Python memory a result holds stays under ``max_bytes`` whatever the
column types (arrays, jsonb and numbers count like text does).

Never raises: any failure, expected or not, is an :class:`ExecResult` with an error kind.
"""

from __future__ import annotations

import contextlib
import datetime
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import psycopg

from pytest_heron.core.errors import ErrorKind
from pytest_heron.sandbox.statement import check_statement

MAX_ROWS = 200_000
MAX_CELLS = 2_000_000  # rows x columns
MAX_BYTES = 256 * 1024 * 1024  # estimated size of the decoded values (see value_bytes)
FETCH_CHUNK = 5_000  # most rows one FETCH asks for
FIRST_FETCH = 100  # rows the first FETCH asks for; later ones are sized from the budget
CURSOR = "heron_query"


@dataclass
class ExecResult:
    """The outcome of one query: rows, or an error kind and message."""

    columns: list[str] = field(default_factory=list)
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    error_kind: ErrorKind | None = None
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


# --- size of values -------------------------------------------------------------------------

SLOT = 8  # the pointer a list or tuple holds per item
_FIXED: dict[type, int] = {
    type(None): 0,  # singletons cost only their slot
    bool: 0,
    float: 24,
    datetime.date: 32,
    datetime.datetime: 48,
    datetime.time: 40,
    datetime.timedelta: 40,
    uuid.UUID: 100,  # the object and the int it holds
}


def value_bytes(value: Any) -> int | None:
    """A deterministic estimate of the memory ``value`` (one decoded cell, or a row) holds, in
    bytes, modelled on 64-bit CPython; None when it holds a type the estimate does not know
    (the caller then counts that cell's worst case). Iterative, so deep nesting cannot recurse.

    >>> value_bytes("abc"), value_bytes(7), value_bytes([1, 2.5, None])
    (52, 32, 139)
    """
    total = 0
    stack = [value]
    while stack:
        v = stack.pop()
        t = type(v)
        if t is str:
            total += 49 + len(v) if v.isascii() else 76 + 4 * len(v)
        elif t is int:
            total += 28 + 4 * max(1, -(-v.bit_length() // 30))
        elif t is list:
            total += 56 + (SLOT + 1) * len(v)  # append over-allocates ~1/8
            stack.extend(v)
        elif t is tuple:
            total += 40 + SLOT * len(v)
            stack.extend(v)
        elif t is dict:
            total += 64 if not v else max(184, 64 + 40 * len(v))
            stack.extend(v.keys())
            stack.extend(v.values())
        elif t is bytes:
            total += 33 + len(v)
        elif t is Decimal:
            total += sys.getsizeof(v)  # libmpdec reports its coefficient too
        else:
            fixed = _FIXED.get(t)
            if fixed is None:
                return None
            total += fixed
    return total


# Worst case of a decoded cell from its length on the wire (text format), its slot in the row
# included. Fixed-size types cost a constant (also what they are counted as once decoded); text
# can need 4 bytes a character (one astral character makes CPython store the whole string in
# UCS-4); arrays, records and types not listed reach ~56 bytes per wire byte (``{1,1,...}`` as
# numeric[] is a 104-byte Decimal per two characters), json ~45 (``{"":{"":{}}}``: a
# one-key dict is 184 bytes).
_FIXED_OIDS: dict[int, int] = {
    16: SLOT,  # bool
    20: SLOT + 40,  # int8
    21: SLOT + 32,  # int2
    23: SLOT + 32,  # int4
    26: SLOT + 32,  # oid
    700: SLOT + 24,  # float4
    701: SLOT + 24,  # float8
    1082: SLOT + 32,  # date
    1083: SLOT + 40,  # time
    1114: SLOT + 48,  # timestamp
    1184: SLOT + 48,  # timestamptz
    1186: SLOT + 40,  # interval
    1266: SLOT + 40,  # timetz
    2950: SLOT + 100,  # uuid
}
_TEXT_OIDS = frozenset({18, 19, 25, 705, 1042, 1043})
_TEXT_COST = (76, 4.0)
_COSTS: dict[int, tuple[int, float]] = {
    17: (33, 0.5),  # bytea, hex on the wire
    1700: (112, 1.0),  # numeric
    114: (64, 50.0),  # json
    3802: (64, 50.0),  # jsonb
}
_OTHER_COST = (128, 60.0)


def worst_cell_bytes(oid: int, wire_len: int) -> int:
    """The most memory one decoded value of type ``oid`` with ``wire_len`` bytes on the wire
    can take (its slot in the row included)."""
    fixed = _FIXED_OIDS.get(oid)
    if fixed is not None:
        return fixed
    base, per = _TEXT_COST if oid in _TEXT_OIDS else _COSTS.get(oid, _OTHER_COST)
    return SLOT + base + int(per * wire_len)


def _row_base(ncols: int) -> int:
    return SLOT + 40 + SLOT * ncols  # the row's slot in the list, the tuple and its slots


def _wire_costs(res: Any, oids: list[int]) -> list[int | list[int]]:
    """Per column: the worst decoded size of every cell of the fetched result, from its wire
    length (one int for a fixed-size column)."""
    n = res.ntuples
    get = res.get_value
    out: list[int | list[int]] = []
    for j, oid in enumerate(oids):
        fixed = _FIXED_OIDS.get(oid)
        if fixed is not None:
            out.append(fixed)
            continue
        base, per = _TEXT_COST if oid in _TEXT_OIDS else _COSTS.get(oid, _OTHER_COST)
        base += SLOT
        out.append(
            [base if (v := get(i, j)) is None else base + int(per * len(v)) for i in range(n)]
        )
    return out


def _row_totals(costs: list[int | list[int]], n: int) -> list[int]:
    base = _row_base(len(costs)) + sum(c for c in costs if isinstance(c, int))
    totals = [base] * n
    for c in costs:
        if not isinstance(c, int):
            totals = [a + b for a, b in zip(totals, c, strict=True)]
    return totals


def _cell_bytes(v: Any) -> int:
    size = value_bytes(v)
    return -1 if size is None else SLOT + size


def _column_bytes(values: list[Any], oid: int, worst: list[int]) -> int:
    """Estimated memory of one decoded column (cells of a type the estimate does not know
    count as their worst case)."""
    if oid == 1700:  # a Decimal is never larger than its wire cost (104 bytes + the digits)
        return sum(worst)
    if oid in _TEXT_OIDS:
        present = [v for v in values if v is not None]
        if all(type(v) is str for v in present) and all(map(str.isascii, present)):
            return SLOT * len(values) + 49 * len(present) + sum(map(len, present))
    sizes = map(_cell_bytes, values)
    return sum(s if s >= 0 else w for s, w in zip(sizes, worst, strict=True))


def _decoded_bytes(
    chunk: list[tuple[Any, ...]], oids: list[int], costs: list[int | list[int]]
) -> int:
    """Estimated memory of decoded rows, column by column."""
    total = _row_base(len(oids)) * len(chunk)
    for j, (oid, cost) in enumerate(zip(oids, costs, strict=True)):
        if isinstance(cost, int):  # fixed-size: counted as its (exact) worst case
            total += cost * len(chunk)
        else:
            total += _column_bytes([r[j] for r in chunk], oid, cost)
    return total


# --- running a query ------------------------------------------------------------------------


class _TooLarge(Exception):
    pass


def _fetch_all(
    conn: psycopg.Connection[Any], max_rows: int, max_cells: int, max_bytes: int
) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Rows of the open cursor, decoded chunk by chunk within the caps (raises _TooLarge)."""
    cur = conn.cursor()
    columns: list[str] = []
    oids: list[int] = []
    rows: list[tuple[Any, ...]] = []
    used = 0  # estimated bytes of the decoded rows so far
    want = FIRST_FETCH
    while True:
        cur.execute(f"FETCH FORWARD {want} FROM {CURSOR}")
        res = cur.pgresult
        if res is None:
            break
        if not columns:
            columns = [d.name for d in cur.description or []]
            oids = [res.ftype(j) for j in range(res.nfields)]
        n = res.ntuples
        if n == 0:
            break
        if len(rows) + n > max_rows:
            raise _TooLarge(f"the result has more than {max_rows:,} rows")
        if (len(rows) + n) * len(oids) > max_cells:
            raise _TooLarge(
                f"the result has more than {max_cells:,} cells (rows x columns,"
                f" {len(oids)} columns)"
            )
        costs = _wire_costs(res, oids)
        worst = _row_totals(costs, n)
        if used + sum(worst) <= max_bytes:
            chunk = cur.fetchall()
            used += _decoded_bytes(chunk, oids, costs)
            rows.extend(chunk)
        else:  # decode one row at a time, each only if its worst case still fits
            for i, cap in enumerate(worst):
                if used + cap > max_bytes:
                    raise _TooLarge(_bytes_message(max_bytes))
                row = cur.fetchone()
                assert row is not None
                one = [c if isinstance(c, int) else [c[i]] for c in costs]
                used += _decoded_bytes([row], oids, one)
                rows.append(row)
        if used > max_bytes:
            raise _TooLarge(_bytes_message(max_bytes))
        if n < want:
            break
        left = max_bytes - used
        want = max(1, min(FETCH_CHUNK, max_rows + 1 - len(rows), left // (2 * max(worst))))
    return columns, rows


def _bytes_message(max_bytes: int) -> str:
    return f"the result's values take more than {max_bytes:,} bytes of memory (estimated)"


def _db_error(exc: psycopg.Error) -> str:
    diag = getattr(exc, "diag", None)
    primary = diag.message_primary if diag is not None else None
    return (primary or str(exc) or type(exc).__name__).strip()[:1000]


def _is_decoding(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    for _ in range(5):
        if seen is None:
            return False
        if isinstance(seen, UnicodeError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _unexpected(exc: Exception, started: float) -> ExecResult:
    """Any exception nobody planned for, as a result: decoding problems are the prediction's
    fault (``rejected``), anything else a ``db_error``; both keep the message."""
    text = f"{type(exc).__name__}: {exc}".strip()[:1000]
    if _is_decoding(exc):
        return ExecResult(
            error_kind=ErrorKind.REJECTED,
            error=f"the SQL or its result could not be encoded or decoded: {text}",
            seconds=time.perf_counter() - started,
        )
    return ExecResult(
        error_kind=ErrorKind.DB_ERROR,
        error=f"unexpected error while running the query: {text}",
        seconds=time.perf_counter() - started,
    )


def execute(
    dsn: str,
    sql_text: str,
    *,
    timeout_s: float,
    max_rows: int = MAX_ROWS,
    max_bytes: int = MAX_BYTES,
    max_cells: int = MAX_CELLS,
    guard: bool = True,
) -> ExecResult:
    """Run one query read-only on ``dsn`` and fetch its rows (never raises)."""
    started = time.perf_counter()
    try:
        return _execute(dsn, sql_text, timeout_s, max_rows, max_bytes, max_cells, guard, started)
    except Exception as exc:
        return _unexpected(exc, started)


def _execute(
    dsn: str,
    sql_text: str,
    timeout_s: float,
    max_rows: int,
    max_bytes: int,
    max_cells: int,
    guard: bool,
    started: float,
) -> ExecResult:
    if guard:
        reason = check_statement(sql_text)
        if reason:
            return ExecResult(error_kind=ErrorKind.REJECTED, error=reason)
    text = sql_text.strip().rstrip(";").strip()
    try:
        conn = psycopg.connect(dsn, autocommit=False, connect_timeout=10)
    except psycopg.Error as exc:
        return ExecResult(error_kind=ErrorKind.DB_ERROR, error=f"could not connect: {exc}".strip())
    timer = threading.Timer(timeout_s + 2.0, _cancel, args=(conn,))
    try:
        with conn:
            pin_session(conn, timeout_s)
            timer.start()
            conn.execute(f"DECLARE {CURSOR} NO SCROLL CURSOR FOR {text}")
            try:
                columns, rows = _fetch_all(conn, max_rows, max_cells, max_bytes)
            except _TooLarge as exc:
                return ExecResult(
                    error_kind=ErrorKind.RESULT_TOO_LARGE,
                    error=str(exc),
                    seconds=time.perf_counter() - started,
                )
            conn.rollback()
        return ExecResult(columns, rows, seconds=time.perf_counter() - started)
    except psycopg.errors.QueryCanceled:
        return ExecResult(
            error_kind=ErrorKind.TIMEOUT,
            error=f"the query ran longer than {timeout_s:g}s and was cancelled",
            seconds=time.perf_counter() - started,
        )
    except psycopg.Error as exc:
        if _is_decoding(exc):
            return _unexpected(exc, started)
        return ExecResult(
            error_kind=ErrorKind.DB_ERROR,
            error=_db_error(exc),
            seconds=time.perf_counter() - started,
        )
    finally:
        timer.cancel()
        conn.close()


def _cancel(conn: psycopg.Connection[Any]) -> None:
    with contextlib.suppress(Exception):  # the connection may be closing already
        conn.cancel()


def execution_ms(dsn: str, sql_text: str, *, timeout_s: float) -> float | None:
    """Server-side execution time of one (already accepted) query, from EXPLAIN ANALYZE with
    timing of nodes off, in the same pinned, read-only session settings; None if it fails
    (for any reason: it never raises)."""
    try:
        text = sql_text.strip().rstrip(";").strip()
        with psycopg.connect(dsn, autocommit=False, connect_timeout=10) as conn:
            pin_session(conn, timeout_s)
            row = conn.execute("EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON) " + text).fetchone()
            conn.rollback()
        if not row:
            return None
        plan = row[0][0] if isinstance(row[0], list) else row[0]
        return float(plan["Execution Time"])
    except Exception:
        return None
