"""Per-table SHA-256 over a canonical, ordered dump of a seeded database.

Each table is dumped with ``COPY (SELECT * FROM t ORDER BY <primary key>) TO STDOUT`` under
pinned session settings (UTC, ISO dates, fixed float digits), so equal data gives equal hashes
whatever the machine, the physical row order or the number of processes that loaded it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence

import psycopg
from psycopg import sql

SETTINGS = (
    "SET TimeZone = 'UTC'",
    "SET DateStyle = 'ISO, YMD'",
    "SET IntervalStyle = 'postgres'",
    "SET extra_float_digits = 1",
    "SET bytea_output = 'hex'",
)


def _tables(
    conn: psycopg.Connection[tuple[object, ...]], schemas: Sequence[str]
) -> list[tuple[str, str]]:
    rows = conn.execute(
        "SELECT table_schema, table_name FROM information_schema.tables"
        " WHERE table_type = 'BASE TABLE' AND table_schema = ANY(%s) ORDER BY 1, 2",
        (list(schemas),),
    ).fetchall()
    return [(str(s), str(t)) for s, t in rows]


def _order_columns(
    conn: psycopg.Connection[tuple[object, ...]], schema: str, table: str
) -> list[str]:
    rows = conn.execute(
        """SELECT a.attname FROM pg_index i
           JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)
           WHERE i.indrelid = %s::regclass AND i.indisprimary
           ORDER BY array_position(i.indkey, a.attnum)""",
        (f'"{schema}"."{table}"',),
    ).fetchall()
    if rows:
        return [str(r[0]) for r in rows]
    cols = conn.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_schema = %s"
        " AND table_name = %s ORDER BY ordinal_position",
        (schema, table),
    ).fetchall()
    return [str(c[0]) for c in cols]


def table_checksums(dsn: str, schemas: Sequence[str]) -> Iterator[tuple[str, int, str]]:
    """``(schema.table, rows, sha256)`` for every table of ``schemas``, in name order."""
    # UTF-8 whatever PGCLIENTENCODING says: the hash is over the bytes the server sends.
    with psycopg.connect(dsn, autocommit=True, client_encoding="utf8") as conn:
        for stmt in SETTINGS:
            conn.execute(stmt)
        for schema, table in _tables(conn, schemas):
            order = sql.SQL(", ").join(
                sql.Identifier(c) for c in _order_columns(conn, schema, table)
            )
            query = sql.SQL("COPY (SELECT * FROM {} ORDER BY {}) TO STDOUT").format(
                sql.Identifier(schema, table), order
            )
            digest = hashlib.sha256()
            rows = 0
            with conn.cursor() as cur, cur.copy(query) as copy:
                for chunk in copy:
                    data = bytes(chunk)
                    digest.update(data)
                    rows += data.count(b"\n")
            yield f"{schema}.{table}", rows, digest.hexdigest()


def total_line(lines: Sequence[tuple[str, int, str]]) -> tuple[str, int, str]:
    """The ``total`` line: all rows, and a hash over the per-table lines."""
    digest = hashlib.sha256()
    for name, rows, sha in lines:
        digest.update(f"{name}\t{rows}\t{sha}\n".encode())
    return "total", sum(r for _, r, _ in lines), digest.hexdigest()
