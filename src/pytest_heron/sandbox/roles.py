"""The database roles a state is read through, and what they may do.

Each state database has two kinds of login role besides the admin:

- the **scoring role** ``heron_reader_<hash>`` (one per state): predictions are executed as it.
  Its password is derived from a secret only the harness holds (:func:`role_password`) and is
  never handed to a system under test. Every run resets it (:func:`prepare_scoring_role`):
  ``ALTER ROLE ... RESET ALL`` in every database, the password set again, then the settings
  heron wants (read-only transactions, ``temp_file_limit``, timeouts), so nothing done through
  its DSN persists into a later run.
- the **adapter role** ``heron_adapter_<hash>_<run>`` (one per run, first state only): the DSN
  the system under test gets. It is created with a random password that lives only in the
  harness's memory, can SELECT the benchmark schemas of that one state, and is dropped when the
  run ends (:func:`release_adapters`). A run that dies before dropping it leaves a role nobody
  can use across runs for long: the next run drops every adapter role whose run is no longer
  alive (a live run holds an advisory lock keyed by its role, in a database readers cannot
  connect to).

Every function takes connection strings (the server's admin DSN to a maintenance database,
the state's admin DSN) and schema names; nothing here knows how the state was built.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import hmac
import secrets
import time
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from pytest_heron.sandbox.per_session import lock_down_per_session

# The per-role settings heron applies after RESET ALL. temp_file_limit bounds what one query may
# spill to disk (a prediction's sort or hash of a cross join); gold runs as the admin, unbounded.
TEMP_FILE_LIMIT = "2GB"
SCORING_SETTINGS: tuple[tuple[str, str], ...] = (
    ("default_transaction_read_only", "on"),
    ("temp_file_limit", TEMP_FILE_LIMIT),
    ("statement_timeout", "300s"),  # a backstop: the executor sets its own, shorter, per query
    ("lock_timeout", "10s"),
    ("idle_in_transaction_session_timeout", "60s"),
    ("idle_session_timeout", "600s"),
)
# An adapter explores the schema with its own queries and may hold a connection for the whole
# run, so no idle-session limit; its statements are bounded the same way.
ADAPTER_SETTINGS: tuple[tuple[str, str], ...] = (
    ("default_transaction_read_only", "on"),
    ("temp_file_limit", TEMP_FILE_LIMIT),
    ("statement_timeout", "300s"),
    ("lock_timeout", "10s"),
    ("idle_in_transaction_session_timeout", "300s"),
)
ROLE_ATTRIBUTES = (
    "LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT NOREPLICATION NOBYPASSRLS"
    " CONNECTION LIMIT -1 VALID UNTIL 'infinity'"
)
ADAPTER_PREFIX = "heron_adapter_"
LEASE_LOCK = 4243  # advisory lock class of adapter-role leases (4242 guards state builds)

# Functions a prediction has no business calling: sleeping and locking (stalling the run or
# other sessions), changing settings or roles, signalling other backends, reading server files,
# writing the WAL from a read-only transaction (pg_logical_emit_message wrote 598 MB in 1.2 s),
# and dumping whole tables or schemas as XML. Revoked from PUBLIC in every state database heron
# owns, so the scoring and adapter roles cannot call them; the admin role is unaffected.
# tests/data/reader_functions.tsv lists what PUBLIC can still execute, reviewed.
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
    "pg_listening_channels",
    "pg_advisory_lock",
    "pg_advisory_lock_shared",
    "pg_advisory_xact_lock",
    "pg_advisory_xact_lock_shared",
    "pg_try_advisory_lock",
    "pg_try_advisory_lock_shared",
    "pg_try_advisory_xact_lock",
    "pg_try_advisory_xact_lock_shared",
    "pg_advisory_unlock",
    "pg_advisory_unlock_shared",
    "pg_advisory_unlock_all",
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
    "pg_logical_emit_message",
    "pg_current_xact_id",
    "txid_current",
    "pg_export_snapshot",
    "pg_stat_force_next_flush",
    "pg_stat_clear_snapshot",
    # large objects: written outside the benchmark schemas by a session that turned
    # default_transaction_read_only off (an adapter's own connection)
    "lo_creat",
    "lo_create",
    "lo_from_bytea",
    "lo_put",
    "lowrite",
    "lo_truncate",
    "lo_truncate64",
    "lo_unlink",
    # functions that run an SQL string of their own, past the statement guard
    "ts_stat",
    "ts_rewrite(tsquery,text)",
    "query_to_xmlschema",
    "cursor_to_xmlschema",
    "table_to_xmlschema",
    "schema_to_xmlschema",
    "database_to_xmlschema",
    # the text of the running statement: lets SQL tell the timing run from the scoring run
    "current_query",
    # superuser-only old signatures; revoked so the list is not a question
    "pg_read_file_old",
    "pg_rotate_logfile_old",
)

Conn = psycopg.Connection[tuple[Any, ...]]


def scoring_role(database: str) -> str:
    """The scoring (SELECT-only) role of one state database."""
    return f"heron_reader_{zlib.crc32(database.encode()):08x}"


def role_password(admin_dsn: str, role: str, key: str | None = None) -> str:
    """The scoring role's password: an HMAC of its name under a secret only the harness holds
    (the admin password, else ``key``), so every harness process derives the same one without
    storing it, and a system under test (which never sees the admin DSN) cannot."""
    secret = key or str(conninfo_to_dict(admin_dsn).get("password") or "")
    if not secret:
        raise ValueError("role_password needs the admin password or a harness key")
    return hmac.new(secret.encode(), role.encode(), hashlib.sha256).hexdigest()


def _ident(name: str) -> sql.Identifier:
    return sql.Identifier(name)


def _apply(conn: Conn, role: str, password: str, settings: Iterable[tuple[str, str]]) -> None:
    """Reset ``role`` to exactly what heron wants: attributes, password, settings (in every
    database a setting may have been attached to), and no membership in other roles."""
    r = _ident(role)
    conn.execute(
        sql.SQL("ALTER ROLE {} WITH " + ROLE_ATTRIBUTES + " PASSWORD {}").format(
            r, sql.Literal(password)
        )
    )
    conn.execute(sql.SQL("ALTER ROLE {} RESET ALL").format(r))
    per_db = conn.execute(
        "SELECT d.datname FROM pg_db_role_setting s JOIN pg_database d ON d.oid = s.setdatabase"
        " JOIN pg_roles r ON r.oid = s.setrole WHERE r.rolname = %s ORDER BY 1",
        (role,),
    ).fetchall()
    for (datname,) in per_db:
        conn.execute(
            sql.SQL("ALTER ROLE {} IN DATABASE {} RESET ALL").format(r, _ident(str(datname)))
        )
    for name, value in settings:
        try:
            with conn.transaction():
                conn.execute(
                    sql.SQL("ALTER ROLE {} SET {} = {}").format(r, _ident(name), sql.Literal(value))
                )
        except psycopg.errors.InsufficientPrivilege:
            # temp_file_limit is a superuser setting: an admin that is not one (--heron-dsn)
            # cannot attach it. The other settings still apply.
            continue
    for (group,) in conn.execute(
        "SELECT g.rolname FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid"
        " JOIN pg_roles u ON u.oid = m.member WHERE u.rolname = %s ORDER BY 1",
        (role,),
    ).fetchall():
        conn.execute(sql.SQL("REVOKE {} FROM {}").format(_ident(str(group)), r))


def _create(conn: Conn, role: str, password: str) -> None:
    exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone()
    if not exists:
        # another process was first (DuplicateObject), or is creating it this instant (the
        # second CREATE waits on the first's index entry, then fails with UniqueViolation)
        with contextlib.suppress(psycopg.errors.DuplicateObject, psycopg.errors.UniqueViolation):
            conn.execute(
                sql.SQL("CREATE ROLE {} " + ROLE_ATTRIBUTES + " PASSWORD {}").format(
                    _ident(role), sql.Literal(password)
                )
            )


_REVOKE_PUBLIC = sql.SQL("REVOKE CONNECT, TEMPORARY ON DATABASE {} FROM PUBLIC")


def _catalog_update(conn: psycopg.Connection[Any], stmt: sql.SQL | sql.Composed) -> None:
    """Run a statement that changes a catalog row other sessions may change too (a GRANT or
    REVOKE on a database's or a schema's ACL, ``DROP OWNED BY``, ``DROP ROLE IF EXISTS``). Two
    sessions changing the same row at once make one of them fail with "tuple concurrently
    updated" (another pytest process granting its own role, say), and two ``GRANT ... ON ALL
    TABLES`` at once can deadlock on the tables' ``pg_class`` rows (the server aborts one):
    that one tries again (the statements are idempotent, and an aborted one changed nothing)."""
    for attempt in range(8):
        try:
            conn.execute(stmt)
            return
        except psycopg.errors.DeadlockDetected:
            if attempt == 7:
                raise
        except psycopg.errors.InternalError_ as exc:
            if "concurrently updated" not in str(exc) or attempt == 7:
                raise
        time.sleep(0.02 * 2**attempt)


def _grant_read(
    server_dsn: str, state_dsn: str, database: str, role: str, schemas: Sequence[str]
) -> None:
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        _catalog_update(
            conn,
            sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(_ident(database), _ident(role)),
        )
    if not schemas:
        return
    names = sql.SQL(", ").join(_ident(schema) for schema in schemas)
    with psycopg.connect(state_dsn, autocommit=True) as conn:
        # Two statements for every schema, in one round trip (each once per state per run).
        _catalog_update(
            conn,
            sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(names, _ident(role))
            + sql.SQL("; ")
            + sql.SQL("GRANT SELECT ON ALL TABLES IN SCHEMA {} TO {}").format(names, _ident(role)),
        )


def close_database(server_dsn: str, state_dsn: str, database: str) -> None:
    """Only roles granted CONNECT (and the owner) may connect to ``database``; nobody but the
    owner may create objects in its ``public`` schema or make temporary tables there."""
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        _catalog_update(conn, _REVOKE_PUBLIC.format(_ident(database)))
    with psycopg.connect(state_dsn, autocommit=True) as conn:
        _catalog_update(conn, sql.SQL("REVOKE CREATE ON SCHEMA public FROM PUBLIC"))


def close_maintenance_databases(server_dsn: str) -> None:
    """On a server heron started, nobody but the admin connects to ``postgres`` or
    ``template1`` (where the harness takes its locks)."""
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        for name in ("postgres", "template1"):
            _catalog_update(conn, _REVOKE_PUBLIC.format(_ident(name)))


def prepare_scoring_role(
    server_dsn: str,
    state_dsn: str,
    database: str,
    schemas: Sequence[str],
    *,
    key: str | None = None,
) -> tuple[str, str]:
    """Create or reset the state's scoring role; return ``(role, password)``."""
    role = scoring_role(database)
    password = role_password(server_dsn, role, key)
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        _create(conn, role, password)
        _apply(conn, role, password, SCORING_SETTINGS)
    _grant_read(server_dsn, state_dsn, database, role, schemas)
    return role, password


REVIEW_QUERY = """
SELECT p.oid::regprocedure::text FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE has_function_privilege(%s, p.oid, 'EXECUTE')
  AND (p.provolatile = 'v' OR p.prosecdef
       OR n.nspname NOT IN ('pg_catalog', 'information_schema'))
ORDER BY 1
"""  # what a role may execute beyond plain immutable/stable builtins


def lock_down(state_dsn: str) -> None:
    """Revoke the dangerous functions from PUBLIC in one database, and what varies per
    connection or server (:mod:`.per_session`); idempotent."""
    with psycopg.connect(state_dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT p.oid::regprocedure::text FROM pg_proc p"
            " WHERE p.proname = ANY(%s) OR p.oid::regprocedure::text = ANY(%s) ORDER BY 1",
            (
                [f for f in DANGEROUS_FUNCTIONS if "(" not in f],
                [f for f in DANGEROUS_FUNCTIONS if "(" in f],
            ),
        ).fetchall()
        if rows:  # one statement for every function: one round trip, not one per function
            signatures = ", ".join(str(signature) for (signature,) in rows)
            conn.execute(f"REVOKE EXECUTE ON FUNCTION {signatures} FROM PUBLIC")
        lock_down_per_session(conn)


# Functions of the citus extension a reading role still needs: the executor calls them as the
# querying role (intermediate results of subqueries and CTEs, repartition joins, distributed
# transaction ids, EXPLAIN ANALYZE) and the planner's aggregates use them.
CITUS_READ_FUNCTIONS = (
    "assign_distributed_transaction_id",
    "citus_backend_gpid",
    "citus_calculate_gpid",
    "citus_executor_name",
    "citus_extradata_container",
    "citus_is_coordinator",
    "citus_json_concatenate",
    "citus_json_concatenate_final",
    "citus_jsonb_concatenate",
    "citus_jsonb_concatenate_final",
    "column_name_to_column",
    "column_to_column_name",
    "coord_combine_agg",
    "coord_combine_agg_ffunc",
    "coord_combine_agg_sfunc",
    "fetch_intermediate_results",
    "get_current_transaction_id",
    "read_intermediate_result",
    "read_intermediate_results",
    "worker_hash",
    "worker_last_saved_explain_analyze",
    "worker_partial_agg",
    "worker_partial_agg_ffunc",
    "worker_partial_agg_sfunc",
    "worker_partition_query_result",
    "worker_save_query_explain_analyze",
)

CITUS_REVOKE_QUERY = """
SELECT p.oid::regprocedure::text FROM pg_proc p
JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'citus'
WHERE p.provolatile = 'v' AND p.prokind <> 'a' AND p.prorettype <> 'trigger'::regtype
  AND NOT p.proname = ANY(%s) AND has_function_privilege('public', p.oid, 'EXECUTE')
ORDER BY 1
"""


def lock_down_citus(node_dsn: str) -> list[str]:
    """On one node of a Citus cluster (the state database there): the revocations of
    :func:`lock_down`, and EXECUTE revoked from PUBLIC on every volatile function of the citus
    extension but :data:`CITUS_READ_FUNCTIONS` (``run_command_on_workers``, ``citus_add_node``,
    ``master_*``, ``create_distributed_table``, ...). Idempotent; returns what it revoked now."""
    lock_down(node_dsn)
    with psycopg.connect(node_dsn, autocommit=True) as conn:
        # Citus would propagate a REVOKE on a distributed object; each node is done here.
        conn.execute("SET citus.enable_ddl_propagation = off")
        rows = conn.execute(CITUS_REVOKE_QUERY, (list(CITUS_READ_FUNCTIONS),)).fetchall()
        for (signature,) in rows:
            conn.execute(f"REVOKE EXECUTE ON ROUTINE {signature} FROM PUBLIC")
    return [str(r[0]) for r in rows]


# -- adapter roles --------------------------------------------------------------------------


@dataclass
class _Lease:
    server_dsn: str
    state_dsn: str
    conn: Conn


_LEASES: dict[str, _Lease] = {}


def _lease_key(role: str) -> int:
    return zlib.crc32(role.encode()) - 2**31


def _drop_role(server_dsn: str, state_dsn: str | None, role: str) -> None:
    """Drop an adapter role with its privileges (in its state database and on shared objects).

    ``DROP OWNED BY`` takes the role out of the ACLs of the state's database, schemas and
    tables, rows another run's grants may change at the same moment: it tries again like those
    (:func:`_catalog_update`). A role already dropped (by another process) is not an error."""
    # one pass when they are the same (a citus state's roles are managed through it)
    for dsn in dict.fromkeys(d for d in (state_dsn, server_dsn) if d):
        with (
            contextlib.suppress(psycopg.OperationalError, psycopg.errors.UndefinedObject),
            psycopg.connect(dsn, autocommit=True) as conn,
        ):
            _catalog_update(conn, sql.SQL("DROP OWNED BY {}").format(_ident(role)))
            if dsn == server_dsn:
                _catalog_update(conn, sql.SQL("DROP ROLE IF EXISTS {}").format(_ident(role)))


def drop_stale_adapters(server_dsn: str) -> list[str]:
    """Drop adapter roles whose run is over (nobody holds their lease); return their names.

    The lease of a stale role is held while it is dropped, so two runs starting at once do not
    both drop it (the second finds the lease taken and leaves the role to the first)."""
    dropped = []
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT rolname, shobj_description(oid, 'pg_authid') FROM pg_roles"
            " WHERE starts_with(rolname, %s) ORDER BY 1",
            (ADAPTER_PREFIX,),
        ).fetchall()
        for name, comment in rows:
            role = str(name)
            if role in _LEASES:
                continue
            got = conn.execute(
                "SELECT pg_try_advisory_lock(%s, %s)", (LEASE_LOCK, _lease_key(role))
            ).fetchone()
            if not (got and got[0]):
                continue  # its run is alive, or another run is dropping it now
            try:
                there = "SELECT 1 FROM pg_roles WHERE rolname = %s"
                if not conn.execute(there, (role,)).fetchone():
                    continue  # another run dropped it between the listing and the lease
                database = str(comment or "")
                state = make_conninfo(server_dsn, dbname=database) if database else None
                if (
                    database
                    and not conn.execute(
                        "SELECT 1 FROM pg_database WHERE datname = %s", (database,)
                    ).fetchone()
                ):
                    state = None
                _drop_role(server_dsn, state, role)
                dropped.append(role)
            finally:
                conn.execute("SELECT pg_advisory_unlock(%s, %s)", (LEASE_LOCK, _lease_key(role)))
    return dropped


def create_adapter_role(
    server_dsn: str, state_dsn: str, database: str, schemas: Sequence[str]
) -> tuple[str, str]:
    """A fresh login role for the system under test, able to SELECT the benchmark schemas of
    ``database`` and connect nowhere else; return ``(role, password)``. It lives until
    :func:`release_adapters` (or the end of this process)."""
    drop_stale_adapters(server_dsn)
    role = f"{ADAPTER_PREFIX}{zlib.crc32(database.encode()):08x}_{secrets.token_hex(4)}"
    password = secrets.token_urlsafe(32)
    lease = psycopg.connect(server_dsn, autocommit=True)
    lease.execute("SELECT pg_advisory_lock(%s, %s)", (LEASE_LOCK, _lease_key(role)))
    _LEASES[role] = _Lease(server_dsn, state_dsn, lease)
    try:
        with psycopg.connect(server_dsn, autocommit=True) as conn:
            _create(conn, role, password)
            _apply(conn, role, password, ADAPTER_SETTINGS)
            conn.execute(
                sql.SQL("COMMENT ON ROLE {} IS {}").format(_ident(role), sql.Literal(database))
            )
        _grant_read(server_dsn, state_dsn, database, role, schemas)
    except BaseException:
        release_adapters([role])
        raise
    return role, password


def release_adapters(roles: Iterable[str] | None = None) -> None:
    """Drop this process's adapter roles (all of them by default) and end their leases."""
    for role in list(_LEASES) if roles is None else list(roles):
        lease = _LEASES.pop(role, None)
        if lease is None:
            continue
        with contextlib.suppress(psycopg.Error):
            _drop_role(lease.server_dsn, lease.state_dsn, role)
        lease.conn.close()


atexit.register(release_adapters)
