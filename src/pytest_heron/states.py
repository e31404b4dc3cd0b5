"""Seeded database states: one database per ``(scale, seed, data version)``, built once.

A state's database is named ``heron_<scale>_<seed>_<data version>``. It is built under another
name and renamed when complete, then stamped with a manifest (JSON in ``COMMENT ON DATABASE``);
a database with the right name and a matching stamp is reused as it is. A server-wide advisory
lock per state name keeps two processes (xdist controllers, parallel CI jobs, ``heron seed``)
from building the same state at once: the second waits and then reuses the first one's work.
"""

from __future__ import annotations

import contextlib
import json
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass

import psycopg
from psycopg import sql

from pytest_heron.backends import Server
from pytest_heron.generate import load_bundle
from pytest_heron.generate.load import seed_database

READER_PASSWORD = "heron_reader"  # SELECT-only on public benchmark data; see DECISIONS.md
MANIFEST_FORMAT = 1
Progress = Callable[[str], None]


@dataclass(frozen=True)
class State:
    """A ready database state."""

    scale: str
    seed: int
    database: str
    admin_dsn: str
    reader_dsn: str
    manifest: dict[str, object]


def state_name(scale: str, seed: int) -> str:
    return f"heron_{scale}_{seed}_{load_bundle().data_version}"


def _lock_key(name: str) -> int:
    return zlib.crc32(name.encode()) - 2**31  # fits a signed int4 key pair's second half


def _read_manifest(conn: psycopg.Connection[tuple[object, ...]], name: str) -> dict[str, object]:
    row = conn.execute(
        "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = %s",
        (name,),
    ).fetchone()
    if row is None or not row[0]:
        return {}
    try:
        doc = json.loads(str(row[0]))
    except ValueError:
        return {}
    return doc if isinstance(doc, dict) else {}


def _valid(manifest: dict[str, object], name: str) -> bool:
    return (
        manifest.get("format") == MANIFEST_FORMAT
        and manifest.get("database") == name
        and manifest.get("data_version") == load_bundle().data_version
    )


def _drop(conn: psycopg.Connection[tuple[object, ...]], name: str) -> None:
    conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def reader_role(database: str) -> str:
    """The SELECT-only role of one state database (one role per state, so a prediction can read
    only the state it is scored on)."""
    return f"heron_reader_{zlib.crc32(database.encode()):08x}"


def _ensure_reader(conn: psycopg.Connection[tuple[object, ...]], role: str) -> None:
    exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone()
    if not exists:
        with contextlib.suppress(psycopg.errors.DuplicateObject):  # another process was first
            conn.execute(
                sql.SQL(
                    "CREATE ROLE {} LOGIN PASSWORD {} NOSUPERUSER NOCREATEDB NOCREATEROLE"
                ).format(sql.Identifier(role), sql.Literal(READER_PASSWORD))
            )
    conn.execute(
        sql.SQL("ALTER ROLE {} SET default_transaction_read_only = on").format(sql.Identifier(role))
    )


def _grant_reader(server: Server, database: str) -> None:
    """Set up the state's reader (idempotent): it may connect to this database only and read
    the benchmark schemas only."""
    role = reader_role(database)
    with psycopg.connect(server.admin_dsn, autocommit=True) as conn:
        _ensure_reader(conn, role)
        db = sql.Identifier(database)
        conn.execute(sql.SQL("REVOKE CONNECT, TEMPORARY ON DATABASE {} FROM PUBLIC").format(db))
        conn.execute(sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(db, sql.Identifier(role)))
    with psycopg.connect(server.dsn(database), autocommit=True) as conn:
        conn.execute(sql.SQL("REVOKE CREATE ON SCHEMA public FROM PUBLIC"))
        for schema in [m.name for m in load_bundle().modules]:
            conn.execute(
                sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(
                    sql.Identifier(schema), sql.Identifier(role)
                )
            )
            conn.execute(
                sql.SQL("GRANT SELECT ON ALL TABLES IN SCHEMA {} TO {}").format(
                    sql.Identifier(schema), sql.Identifier(role)
                )
            )


# Functions a prediction has no business calling: sleeping and locking (stalling the run or
# other sessions), changing settings or roles, signalling other backends, reading server files,
# and dumping whole tables or schemas as XML. Revoked from PUBLIC in every state database, so the
# reader role cannot call them; the admin role (a superuser) is unaffected.
DANGEROUS_FUNCTIONS = (
    "pg_sleep",
    "pg_sleep_for",
    "pg_sleep_until",
    "set_config",
    "pg_terminate_backend",
    "pg_cancel_backend",
    "pg_reload_conf",
    "pg_rotate_logfile",
    "pg_notify",
    "pg_advisory_lock",
    "pg_advisory_lock_shared",
    "pg_advisory_xact_lock",
    "pg_advisory_xact_lock_shared",
    "pg_try_advisory_lock",
    "pg_try_advisory_lock_shared",
    "pg_try_advisory_xact_lock",
    "pg_try_advisory_xact_lock_shared",
    "pg_read_file",
    "pg_read_binary_file",
    "pg_ls_dir",
    "pg_stat_file",
    "lo_import",
    "lo_export",
    "query_to_xml",
    "table_to_xml",
    "cursor_to_xml",
    "schema_to_xml",
    "database_to_xml",
    "query_to_xml_and_xmlschema",
    "table_to_xml_and_xmlschema",
    "schema_to_xml_and_xmlschema",
    "database_to_xml_and_xmlschema",
    "dblink",
    "dblink_exec",
)


def lock_down(dsn: str) -> None:
    """Revoke the dangerous functions from PUBLIC in one database (idempotent)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT p.oid::regprocedure::text FROM pg_proc p WHERE p.proname = ANY(%s) ORDER BY 1",
            (list(DANGEROUS_FUNCTIONS),),
        ).fetchall()
        for (signature,) in rows:
            conn.execute(f"REVOKE EXECUTE ON FUNCTION {signature} FROM PUBLIC")


def ensure_state(
    server: Server,
    scale: str,
    seed: int,
    *,
    jobs: int = 1,
    progress: Progress | None = None,
    database: str | None = None,
    replace: bool = False,
) -> State:
    """Return the state for ``(scale, seed)``, building it first if it is missing or stale."""
    say = progress or (lambda _msg: None)
    name = database or state_name(scale, seed)
    building = f"{name}__building"
    with psycopg.connect(server.admin_dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_advisory_lock(4242, %s)", (_lock_key(name),))
        try:
            manifest = _read_manifest(conn, name)
            if replace or not _valid(manifest, name):
                if manifest or replace:
                    say(f"{name}: stamp missing or stale; rebuilding")
                _drop(conn, name)
                _drop(conn, building)
                if database is None:
                    _drop_other_versions(conn, scale, seed, keep=name)
                conn.execute(
                    sql.SQL(
                        "CREATE DATABASE {} TEMPLATE template0 ENCODING 'UTF8' LOCALE 'C'"
                    ).format(sql.Identifier(building))
                )
                say(f"{name}: seeding scale={scale} seed={seed}")
                result = seed_database(
                    server.dsn(building),
                    scale,
                    seed,
                    jobs=jobs,
                    progress=lambda m: say(f"{name}: {m}"),
                )
                conn.execute(
                    sql.SQL("ALTER DATABASE {} RENAME TO {}").format(
                        sql.Identifier(building), sql.Identifier(name)
                    )
                )
                manifest = {
                    "format": MANIFEST_FORMAT,
                    "database": name,
                    "scale": scale,
                    "seed": seed,
                    "data_version": load_bundle().data_version,
                    "tables": result.tables,
                    "schemas": result.schemas,
                    "rows": result.rows,
                    "row_counts": result.row_counts,
                    "seconds": round(result.seconds, 3),
                    "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                }
                conn.execute(
                    sql.SQL("COMMENT ON DATABASE {} IS {}").format(
                        sql.Identifier(name), sql.Literal(json.dumps(manifest, sort_keys=True))
                    )
                )
                say(f"{name}: ready ({result.rows:,} rows in {result.seconds:.1f}s)")
            _grant_reader(server, name)
            lock_down(server.dsn(name))
        finally:
            conn.execute("SELECT pg_advisory_unlock(4242, %s)", (_lock_key(name),))
    return State(
        scale=scale,
        seed=seed,
        database=name,
        admin_dsn=server.dsn(name),
        reader_dsn=server.dsn(name, user=reader_role(name), password=READER_PASSWORD),
        manifest=manifest,
    )


def _drop_other_versions(
    conn: psycopg.Connection[tuple[object, ...]], scale: str, seed: int, keep: str
) -> list[str]:
    """Drop idle states of the same ``(scale, seed)`` built from another data version; return
    the names dropped.

    Another installed version of heron (a second checkout, a pinned project) may be using its
    own state right now, so nothing is forced: a state with a session open is kept (DROP
    DATABASE without FORCE refuses), and half-built states of other versions are left to the
    builder that owns them (it drops its own leftovers before building again)."""
    prefix = f"heron_{scale}_{seed}_"
    rows = conn.execute(
        "SELECT datname FROM pg_database WHERE starts_with(datname, %s) ORDER BY 1", (prefix,)
    ).fetchall()
    dropped = []
    for (other,) in rows:
        rest = str(other)[len(prefix) :]
        if other == keep or "_" in rest.replace("__building", "") or rest.endswith("__building"):
            continue
        try:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(str(other))))
        except psycopg.errors.ObjectInUse:
            continue
        dropped.append(str(other))
    return dropped
