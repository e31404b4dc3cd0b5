"""Per-table SHA-256 over a canonical, ordered dump of a seeded database.

Each table is dumped with ``COPY (SELECT * FROM t ORDER BY <primary key>) TO STDOUT`` under
pinned session settings (UTC, ISO dates, fixed float digits), so equal data gives equal hashes
whatever the machine, the physical row order or the number of processes that loaded it.

:func:`outside_objects` covers the rest of the database: every object a state as heron seeds it
does not have (a table, view, function, type, schema, trigger, policy, rule, extension ... in
any schema, ``public`` included), each as a line of its own, so that anything added to a state
makes its total differ and is named. A state as heron seeds it has none, so its total is the
total of its tables alone (the one pinned in tests/golden/).
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


def _dump(conn: psycopg.Connection[tuple[object, ...]], schema: str, table: str) -> tuple[int, str]:
    """Rows and SHA-256 of one table's canonical dump (see the module docstring)."""
    order = sql.SQL(", ").join(sql.Identifier(c) for c in _order_columns(conn, schema, table))
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
    return rows, digest.hexdigest()


def _connect(dsn: str) -> psycopg.Connection[tuple[object, ...]]:
    # UTF-8 whatever PGCLIENTENCODING says: the hash is over the bytes the server sends.
    conn = psycopg.connect(dsn, autocommit=True, client_encoding="utf8")
    for stmt in SETTINGS:
        conn.execute(stmt)
    return conn


def table_checksums(dsn: str, schemas: Sequence[str]) -> Iterator[tuple[str, int, str]]:
    """``(schema.table, rows, sha256)`` for every table of ``schemas``, in name order."""
    with _connect(dsn) as conn:
        for schema, table in _tables(conn, schemas):
            rows, sha = _dump(conn, schema, table)
            yield f"{schema}.{table}", rows, sha


# A user schema: not the catalogs, not a session's temporary schemas.
_USER = (
    "{n} NOT IN ('pg_catalog', 'information_schema', 'pg_toast')"
    " AND {n} NOT LIKE 'pg\\_temp\\_%%' AND {n} NOT LIKE 'pg\\_toast\\_temp\\_%%'"
)
_REL = "n.nspname || '.' || c.relname"
# (kind, query of (name, definition) for objects a seeded state does not have); %(heron)s is
# the list of heron's schemas. Tables outside heron's schemas are listed apart (their data is
# hashed); inside them every table is one of the per-table lines already.
OUTSIDE: tuple[tuple[str, str], ...] = (
    (
        "schema",
        "SELECT n.nspname, n.nspname FROM pg_namespace n WHERE "
        + _USER.format(n="n.nspname")
        + " AND n.nspname <> ALL(%(heron)s) AND n.nspname <> 'public'",
    ),
    (
        "relation",
        f"SELECT c.relkind::text || ' ' || {_REL}, coalesce(CASE WHEN c.relkind IN ('v', 'm')"
        " THEN pg_get_viewdef(c.oid) WHEN c.relkind IN ('i', 'I') THEN pg_get_indexdef(c.oid)"
        " END, '') FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE "
        + _USER.format(n="n.nspname")
        + " AND c.relkind NOT IN ('r', 'p', 't') AND (n.nspname <> ALL(%(heron)s)"
        " OR c.relkind IN ('v', 'm', 'f', 'c'))",
    ),
    (
        "function",
        "SELECT p.oid::regprocedure::text, CASE WHEN p.prokind = 'a' THEN 'aggregate'"
        " ELSE pg_get_functiondef(p.oid) END FROM pg_proc p"
        " JOIN pg_namespace n ON n.oid = p.pronamespace WHERE " + _USER.format(n="n.nspname"),
    ),
    (
        "type",
        "SELECT t.oid::regtype::text, t.typtype::text FROM pg_type t"
        " JOIN pg_namespace n ON n.oid = t.typnamespace WHERE "
        + _USER.format(n="n.nspname")
        + " AND t.typrelid = 0 AND NOT (t.typcategory = 'A' AND t.typelem <> 0)",
    ),
    (
        "trigger",
        "SELECT t.tgname || ' on ' || t.tgrelid::regclass::text, pg_get_triggerdef(t.oid)"
        " FROM pg_trigger t WHERE NOT t.tgisinternal",
    ),
    (
        "policy",
        "SELECT p.polname || ' on ' || p.polrelid::regclass::text,"
        " coalesce(pg_get_expr(p.polqual, p.polrelid), '') FROM pg_policy p",
    ),
    (
        "rule",
        "SELECT r.rulename || ' on ' || r.ev_class::regclass::text, pg_get_ruledef(r.oid)"
        " FROM pg_rewrite r JOIN pg_class c ON c.oid = r.ev_class"
        " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE "
        + _USER.format(n="n.nspname")
        + " AND NOT (r.rulename = '_RETURN' AND c.relkind IN ('v', 'm'))",
    ),
    ("event trigger", "SELECT e.evtname, e.evtevent FROM pg_event_trigger e"),
    (
        "extension",
        "SELECT x.extname, x.extversion FROM pg_extension x WHERE x.extname <> 'plpgsql'",
    ),
    ("publication", "SELECT p.pubname, p.pubname FROM pg_publication p"),
)


def outside_objects(dsn: str, schemas: Sequence[str]) -> list[tuple[str, int, str]]:
    """``(kind name, rows, sha256)`` for every object of the database that a state as heron
    seeds it does not have (see the module docstring), in kind then name order: a table outside
    ``schemas`` with its rows and the hash of its data, anything else with 0 rows and the hash
    of its definition. Empty for a state as heron seeds it.
    """
    out: list[tuple[str, int, str]] = []
    with _connect(dsn) as conn:
        conn.execute("SET search_path = ''")  # names schema-qualified, whatever the path says
        rows = conn.execute(
            "SELECT n.nspname, c.relname FROM pg_class c JOIN pg_namespace n"
            " ON n.oid = c.relnamespace WHERE c.relkind IN ('r', 'p') AND "
            + _USER.format(n="n.nspname")
            + " AND n.nspname <> ALL(%(heron)s) ORDER BY 1, 2",
            {"heron": list(schemas)},
        ).fetchall()
        for schema, table in rows:
            count, sha = _dump(conn, str(schema), str(table))
            out.append((f"table {schema}.{table}", count, sha))
        for kind, query in OUTSIDE:
            found = conn.execute(query, {"heron": list(schemas)}).fetchall()
            for name, definition in sorted((str(n), str(d)) for n, d in found):
                if kind == "relation":
                    code, _, name = name.partition(" ")
                    label = _KINDS.get(code, f"relation ({code})")
                else:
                    label = kind
                sha = hashlib.sha256(f"{label}\0{name}\0{definition}".encode()).hexdigest()
                out.append((f"{label} {name}", 0, sha))
    return out


_KINDS = {
    "S": "sequence",
    "v": "view",
    "m": "materialized view",
    "i": "index",
    "I": "index",
    "f": "foreign table",
    "c": "type",
}


def total_line(lines: Sequence[tuple[str, int, str]]) -> tuple[str, int, str]:
    """The ``total`` line: all rows, and a hash over the per-table lines."""
    digest = hashlib.sha256()
    for name, rows, sha in lines:
        digest.update(f"{name}\t{rows}\t{sha}\n".encode())
    return "total", sum(r for _, r, _ in lines), digest.hexdigest()


def state_report(dsn: str, schemas: Sequence[str]) -> tuple[list[str], str | None]:
    """What ``heron checksum`` prints: a line per table of ``schemas``, a line per object
    outside them (:func:`outside_objects`) and the ``total`` line; and the note naming those
    objects (None when there are none, as in a state as heron seeds it)."""
    lines = list(table_checksums(dsn, schemas))
    outside = outside_objects(dsn, schemas)
    every = [*lines, *outside]
    text = [f"{name}\t{rows}\t{sha}" for name, rows, sha in [*every, total_line(every)]]
    if not outside:
        return text, None
    shown = ", ".join(n for n, _, _ in outside[:20])
    more = f" and {len(outside) - 20} more" if len(outside) > 20 else ""
    return text, (
        f"heron checksum: {len(outside)} object(s) that a state as heron seeds it does not "
        f"have, so the total differs: {shown}{more}"
    )
