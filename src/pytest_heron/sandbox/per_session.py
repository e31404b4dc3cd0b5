"""What varies per connection, per server start or with the server's statistics, taken away.

``pg_backend_pid()`` differs on every connection, ``pg_postmaster_start_time()`` on every server
start (in CI every verification starts its own server), ``pg_stat_activity.backend_start`` and
every ``pg_stat_get_*`` with what other sessions did. An answer gated on one of them is a coin
no repeat on the same server need see. The scoring and adapter roles lose them: EXECUTE on the
functions and SELECT on the views built on them are revoked from PUBLIC in every state database
heron owns (:func:`lock_down_per_session`, run by ``roles.lock_down``), and the volatility check
names them (:mod:`pytest_heron.scoring.volatility` reads :func:`per_session_functions`).

The list is the catalog's, by a rule (DECISIONS.md, "issue 40"), so it follows the server's
version: a function of ``pg_catalog`` that no extension installs, callable from SQL, and

- **statistics**: described ``statistics: ...`` in ``pg_description`` (PostgreSQL's own label
  for the cumulative statistics functions: ``pg_stat_get_*``, ``pg_backend_pid``), whatever its
  arguments; or
- **session**: stable, with no arguments: its value cannot come from the query's data, only
  from the session, the transaction, the settings or the server (``inet_client_addr``,
  ``pg_conf_load_time``, ``pg_postmaster_start_time``, ``pg_show_all_settings``, ...).
  Volatile ones need no rule: the volatility check names every volatile function.

Kept (:data:`KEPT`), with the reason: the clock (``now``, ``statement_timestamp``,
``transaction_timestamp``), which the volatility check names as the clock; the empty
``json[b]_build_array()`` and ``json[b]_build_object()``, constants; the names of the session
(``version()``, ``current_schema()``, ``current_user``, the encodings, ...), the same on every
connection of a role to a state, which client libraries ask for when they connect (SQLAlchemy
runs ``select pg_catalog.version()``); and every function a view of ``information_schema``
calls (``pg_my_temp_schema()``), since a view runs its functions with the privileges of the
role that reads it, and adapters explore the schema through those views.

Views: every view of ``pg_catalog`` whose definition calls one of the revoked functions, or
reads such a view (``pg_stat_activity``, ``pg_stat_user_tables``, ``pg_settings``, ...). The
definitions are parsed (``pg_get_viewdef``, the rewrite rule as SQL): ``pg_depend`` does not
record the dependencies of objects initdb creates, so it would show none of these.

Function ACLs live in each database's own ``pg_proc``: a REVOKE here changes nothing in the
server's other databases (the maintenance databases, other states, another run's), and nothing
of the data (the state's checksum and data version are those of its tables). The admin role is
a superuser on a server heron starts, which privileges do not bind.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from pytest_heron.sandbox.uses import sql_uses

KEPT = (
    # the clock: the volatility check names it as the clock
    "now",
    "statement_timestamp",
    "transaction_timestamp",
    # constants (stable only because the variadic forms take "any")
    "json_build_array",
    "json_build_object",
    "jsonb_build_array",
    "jsonb_build_object",
    # the names of the session, the same on every connection of a role to a state, which
    # client libraries ask for on connect (SQLAlchemy: version(), current_schema())
    "version",
    "current_schema",
    "current_user",
    "session_user",
    "system_user",
    "getpgusername",
    "current_database",
    "pg_client_encoding",
    "getdatabaseencoding",
)
_NOT_SQL_TYPES = (
    "trigger",
    "event_trigger",
    "internal",
    "language_handler",
    "fdw_handler",
    "index_am_handler",
    "table_am_handler",
    "tsm_handler",
)

RULE_QUERY = """
SELECT p.oid::regprocedure::text, p.proname,
       CASE WHEN obj_description(p.oid, 'pg_proc') LIKE 'statistics:%%'
            THEN 'statistics' ELSE 'session' END
FROM pg_proc p
WHERE p.pronamespace = 'pg_catalog'::regnamespace
  AND p.prokind = 'f'
  AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass
                  AND d.objid = p.oid AND d.deptype = 'e')
  AND p.prorettype::regtype::text <> ALL(%(not_sql)s)
  AND NOT EXISTS (SELECT 1 FROM unnest(p.proargtypes) t WHERE t::regtype::text = ANY(%(not_sql)s))
  AND (obj_description(p.oid, 'pg_proc') LIKE 'statistics:%%'
       OR (p.provolatile = 's' AND p.pronargs = 0))
  AND NOT p.proname = ANY(%(kept)s)
ORDER BY 1
"""

VIEWS_QUERY = """
SELECT n.nspname, c.relname, pg_get_viewdef(c.oid)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind = 'v' AND n.nspname IN ('pg_catalog', 'information_schema')
ORDER BY 1, 2
"""


def _catalog_names(names: Iterable[tuple[str, ...]]) -> set[str]:
    """The unqualified or ``pg_catalog``-qualified names among ``names``, unqualified."""
    return {n[-1] for n in names if len(n) == 1 or n[0] == "pg_catalog"}


@dataclass(frozen=True)
class ViewUses:
    """What one view's definition calls and reads (``pg_catalog`` or unqualified names)."""

    calls: frozenset[str]
    reads: frozenset[str]


@functools.lru_cache(maxsize=1024)
def view_uses(definition: str) -> ViewUses:
    """:class:`ViewUses` of one definition (kept per process: every state of a server has the
    same system views, and ``lock_down`` runs on every ``ensure_state``)."""
    uses = sql_uses(definition)
    if uses is None:
        return ViewUses(frozenset(), frozenset())
    return ViewUses(
        frozenset(_catalog_names(uses.calls)), frozenset(_catalog_names(uses.relations))
    )


def tainted_views(
    views: Mapping[str, ViewUses], functions: Iterable[str], relations: Iterable[str] = ()
) -> list[str]:
    """The views that call one of ``functions`` or read one of ``relations`` or of the views
    found so (to a fixed point), sorted.

    >>> v = {k: view_uses(d) for k, d in {"a": "SELECT f()", "b": "SELECT * FROM a"}.items()}
    >>> tainted_views(v | {"c": view_uses("SELECT g()")}, ["f"])
    ['a', 'b']
    """
    bad_functions = set(functions)
    bad = set(relations)
    changed = True
    while changed:
        changed = False
        for name in sorted(views):
            if name not in bad and (views[name].calls & bad_functions or views[name].reads & bad):
                bad.add(name)
                changed = True
    return sorted(v for v in bad if v in views)


def _views(conn: psycopg.Connection[Any]) -> dict[tuple[str, str], ViewUses]:
    """What every view of ``pg_catalog`` and ``information_schema`` calls and reads."""
    return {
        (str(schema), str(name)): view_uses(str(definition))
        for schema, name, definition in conn.execute(VIEWS_QUERY).fetchall()
    }


def per_session_functions(
    conn: psycopg.Connection[Any], views: Mapping[tuple[str, str], ViewUses] | None = None
) -> list[tuple[str, str, str]]:
    """``(signature, name, why)`` of the functions the rule takes away (why: ``statistics`` or
    ``session``), less those a view of ``information_schema`` calls; sorted by signature."""
    rows = conn.execute(RULE_QUERY, {"not_sql": list(_NOT_SQL_TYPES), "kept": list(KEPT)})
    found = [(str(sig), str(name), str(why)) for sig, name, why in rows.fetchall()]
    needed: set[str] = set()
    for (schema, _name), uses in (_views(conn) if views is None else views).items():
        if schema == "information_schema":
            needed.update(uses.calls)
    return [row for row in found if row[1] not in needed]


def per_session_views(
    conn: psycopg.Connection[Any],
    functions: Iterable[str],
    views: Mapping[tuple[str, str], ViewUses] | None = None,
) -> list[str]:
    """The ``pg_catalog`` views built on ``functions`` (names), directly or through others."""
    known = _views(conn) if views is None else views
    return tainted_views({n: u for (s, n), u in known.items() if s == "pg_catalog"}, functions)


def lock_down_per_session(conn: psycopg.Connection[Any]) -> tuple[list[str], list[str]]:
    """Revoke from PUBLIC EXECUTE on the per-session functions and SELECT on the views built on
    them, in the database ``conn`` is connected to (idempotent); return both lists."""
    known = _views(conn)
    functions = per_session_functions(conn, known)
    views = per_session_views(conn, [name for _sig, name, _why in functions], known)
    if functions:
        signatures = ", ".join(sig for sig, _name, _why in functions)
        conn.execute(f"REVOKE EXECUTE ON FUNCTION {signatures} FROM PUBLIC")
    if views:
        names = sql.SQL(", ").join(sql.Identifier("pg_catalog", v) for v in views)
        conn.execute(sql.SQL("REVOKE SELECT ON {} FROM PUBLIC").format(names))
    return [sig for sig, _name, _why in functions], views
