"""Volatile answers: SQL whose rows may change from one run, connection or server to the next.

An answer like ``CASE WHEN random() < 0.5 THEN <gold> ELSE 0 END`` is right on some runs and
wrong on others, so one run per state makes the verdict a coin flip that a submitter can retry
until it lands. Three defences, each leading to a wrong answer with a reason that starts
"volatile result" and names what it found:

- :func:`volatile_calls` decides on PostgreSQL's parse tree (:mod:`pytest_heron.sandbox.uses`)
  and the server's catalog (:class:`Catalog`, read once per database by
  :func:`server_catalog`). It names every call, after the parser's name resolution (quoted and
  ``U&`` identifiers, schema-qualified names), of a function the catalog marks volatile
  (``pg_proc.provolatile = 'v'``: ``random``, ``clock_timestamp``, ...); of a function that
  reads the clock (``now()``, ``current_date`` and kin: stable within a statement, not between
  runs); of a function whose value depends on the connection, the server or its statistics
  (:mod:`pytest_heron.sandbox.per_session`: ``pg_backend_pid``, ``pg_postmaster_start_time``,
  ...); every string literal holding a date/time word read from the clock (``'now'``,
  ``'today'``, ``'tomorrow'``, ``'yesterday'``); every ``TABLESAMPLE`` (the sample depends on
  where rows lie on disk, not on the data, ``REPEATABLE`` or not); and all of these reached
  through a view or an SQL function the query reads, whose definition is judged the same way
  ("calls random() through view s.v"). It is pure given the catalog, and is the one check the
  plugin, the verifier and the static audit use.
- the scoring and adapter roles cannot run the per-connection functions at all, nor read the
  views built on them (``pg_stat_activity``); such an answer fails, and is named here as well.
- the scorer runs every answer that matched gold on a state a second time there, on a fresh
  connection, and compares the two results (:func:`pytest_heron.scoring.score._run_on_states`);
  the timing runs serve as the repeats on the first state. This catches volatility neither the
  tree nor the catalog shows (a date/time text built at run time: ``('n' || 'ow')::date``).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field

from pytest_heron.sandbox import Name, Uses, sql_uses

VOLATILE = "volatile result"
# stable within one statement, different on the next run: the clock
CLOCK_FUNCTIONS = ("now", "statement_timestamp", "transaction_timestamp")
# used when the server's own catalog cannot be read (and by the static audit, without one)
FALLBACK_VOLATILE = (
    "random",
    "random_normal",
    "setseed",
    "clock_timestamp",
    "timeofday",
    "gen_random_uuid",
    "array_sample",
    "array_shuffle",
    "nextval",
    "currval",
    "lastval",
    "pg_backend_pid",
    "pg_postmaster_start_time",
    "pg_conf_load_time",
)
SEARCH_PATH = ("pg_catalog", "public")  # what an unqualified name resolves in (pin_session)

# what a function's kind adds to "calls f()"
_WHY = {
    "volatile": "",
    "clock": ", which reads the clock",
    "statistics": ", which reads the server's statistics",
    "session": ", whose value depends on the connection or the server",
}
MAX_SHOWN = 4  # findings a reason names; the rest are counted


@dataclass(frozen=True)
class Catalog:
    """What the volatility check needs of one database's catalog.

    ``functions``: name -> schema -> kind (``volatile``, ``clock``, ``statistics``,
    ``session``), for the functions that make a result vary (any overload of the name);
    ``bodies``: (schema, name) -> the bodies of its SQL-language overloads; ``views``:
    (schema, name) -> the view's definition (``pg_get_viewdef``)."""

    functions: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    bodies: Mapping[tuple[str, str], tuple[str, ...]] = field(default_factory=dict)
    views: Mapping[tuple[str, str], str] = field(default_factory=dict)


def _fallback() -> Catalog:
    kinds = dict.fromkeys(FALLBACK_VOLATILE, "volatile")
    kinds.update(dict.fromkeys(("pg_backend_pid",), "statistics"))
    kinds.update(dict.fromkeys(("pg_postmaster_start_time", "pg_conf_load_time"), "session"))
    kinds.update(dict.fromkeys(CLOCK_FUNCTIONS, "clock"))
    return Catalog(functions={name: {"pg_catalog": kind} for name, kind in kinds.items()})


FALLBACK = _fallback()


def _candidates(name: Name) -> list[tuple[str, str]]:
    """The (schema, name) pairs a written name may resolve to."""
    if len(name) == 1:
        return [(schema, name[0]) for schema in SEARCH_PATH]
    return [(name[-2], name[-1])]


@functools.lru_cache(maxsize=1024)
def _definition_uses(text: str) -> Uses | None:
    """:func:`sql_uses` of a view's or function's definition, kept: the same few are read by
    every answer that reaches them."""
    return sql_uses(text)


class _Judge:
    """One verdict's walk: definitions already judged are not judged again (nor looped on)."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self.seen: set[tuple[str, str, str]] = set()
        self.found: list[str] = []

    def add(self, text: str) -> None:
        if text not in self.found:
            self.found.append(text)

    def definition(self, kind: str, key: tuple[str, str], text: str, via: str) -> None:
        """Judge a view's or an SQL function's definition; it adds its first finding only
        (one view of twenty statistics calls is one reason, not twenty)."""
        if (kind, *key) in self.seen:
            return
        self.seen.add((kind, *key))
        uses = _definition_uses(text)
        if uses is None:
            return
        what = f"{kind} {key[0]}.{key[1]}" + ("()" if kind == "function" else "")
        inner = _Judge(self.catalog)
        inner.seen = self.seen
        inner.uses(uses, f"{via}, then {what}" if via else f" through {what}")
        if inner.found:
            self.add(inner.found[0])

    def uses(self, uses: Uses, via: str = "") -> None:
        for name in uses.calls:
            for schema, fname in _candidates(name):
                kind = self.catalog.functions.get(fname, {}).get(schema)
                if kind is not None:
                    shown = fname if schema == "pg_catalog" else f"{schema}.{fname}"
                    self.add(f"calls {shown}(){via}{_WHY[kind]}")
                for body in self.catalog.bodies.get((schema, fname), ()):
                    self.definition("function", (schema, fname), body, via)
        for word in uses.clock:
            self.add(f"reads the clock with {word}{via}")
        for literal in uses.clock_literals:
            self.add(f"reads the clock with the literal {_quoted(literal)}{via}")
        for method in uses.samples:
            self.add(f"samples rows with TABLESAMPLE {method.upper()}{via}")
        for rel in uses.relations:
            for key in _candidates(rel):
                view = self.catalog.views.get(key)
                if view is not None:
                    self.definition("view", key, view, via)


def _quoted(text: str) -> str:
    short = text if len(text) <= 40 else text[:37] + "..."
    return "'" + short.replace("'", "''") + "'"


def volatile_calls(sql: str, catalog: Catalog = FALLBACK) -> list[str]:
    """What makes ``sql`` volatile, as phrases in the parse tree's order (empty: nothing the
    tree and ``catalog`` show; SQL PostgreSQL does not parse is not judged here, the guard
    refuses it).

    >>> volatile_calls("SELECT CASE WHEN random() < 0.5 THEN 1 END")
    ['calls random()']
    >>> volatile_calls('SELECT 1 AS a$$, U&"\\\\0072andom"() AS r, 1 AS b$$')
    ['calls random()']
    >>> volatile_calls("SELECT 'now'::date, current_date -- random()\\n WHERE 'random()' > ''")
    ['reads the clock with current_date', "reads the clock with the literal 'now'"]
    >>> volatile_calls("SELECT random_id, system_name FROM t TABLESAMPLE SYSTEM (5)")
    ['samples rows with TABLESAMPLE SYSTEM']
    >>> views = {("s", "v"): "SELECT pg_catalog.random() AS r"}
    >>> volatile_calls("SELECT r FROM s.v", Catalog(FALLBACK.functions, {}, views))
    ['calls random() through view s.v']
    """
    uses = sql_uses(sql)
    if uses is None:
        return []
    judge = _Judge(catalog)
    judge.uses(uses)
    return judge.found


def volatile_reason(sql: str, catalog: Catalog = FALLBACK) -> str | None:
    """The reason a prediction is wrong for its SQL alone, or None.

    >>> volatile_reason("SELECT 1") is None, volatile_reason("SELECT random()")
    (True, 'volatile result: calls random(), so its rows can change between runs')
    """
    found = volatile_calls(sql, catalog)
    if not found:
        return None
    shown = "; ".join(found[:MAX_SHOWN])
    more = f" (and {len(found) - MAX_SHOWN} more)" if len(found) > MAX_SHOWN else ""
    return f"{VOLATILE}: {shown}{more}, so its rows can change between runs"


FUNCTIONS_QUERY = """
SELECT n.nspname, p.proname, p.provolatile,
       CASE WHEN l.lanname = 'sql' THEN coalesce(pg_get_function_sqlbody(p.oid), p.prosrc) END
FROM pg_proc p
JOIN pg_namespace n ON n.oid = p.pronamespace
JOIN pg_language l ON l.oid = p.prolang
WHERE (p.provolatile = 'v' OR l.lanname = 'sql') AND n.nspname <> 'pg_toast'
ORDER BY 1, 2, p.oid
"""
VIEWS_QUERY = """
SELECT n.nspname, c.relname, pg_get_viewdef(c.oid)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind = 'v' AND n.nspname <> 'pg_toast'
ORDER BY 1, 2
"""


def body_sql(body: str) -> str:
    """An SQL function's body as statements the parser reads on their own: a string body as
    it is, a standard one (``pg_get_function_sqlbody``) without its ``BEGIN ATOMIC ... END``,
    or ``RETURN expr`` as ``SELECT expr``.

    >>> body_sql("BEGIN ATOMIC\\n SELECT 1;\\n SELECT 2;\\nEND"), body_sql("RETURN random()")
    ('\\n SELECT 1;\\n SELECT 2;\\n', 'SELECT random()')
    """
    text = body.strip()
    head = text[:12].upper()
    if head == "BEGIN ATOMIC" and text[-3:].upper() == "END":
        return text[12:-3]
    if head.startswith("RETURN") and text[6:7].isspace():
        return "SELECT " + text[7:]
    return body


def read_catalog(dsn: str) -> Catalog:
    """The :class:`Catalog` of the database at ``dsn`` (an admin's connection string)."""
    import psycopg

    from pytest_heron.sandbox import per_session_functions

    functions: dict[str, dict[str, str]] = {}
    bodies: dict[tuple[str, str], list[str]] = {}
    with psycopg.connect(dsn, connect_timeout=10) as conn:
        for schema, name, volatility, body in conn.execute(FUNCTIONS_QUERY).fetchall():
            if volatility == "v":
                functions.setdefault(str(name), {})[str(schema)] = "volatile"
            if body is not None:
                bodies.setdefault((str(schema), str(name)), []).append(body_sql(str(body)))
        for _signature, name, why in per_session_functions(conn):
            functions.setdefault(name, {}).setdefault("pg_catalog", why)
        views = {
            (str(schema), str(name)): str(text)
            for schema, name, text in conn.execute(VIEWS_QUERY).fetchall()
        }
    for name in CLOCK_FUNCTIONS:
        functions.setdefault(name, {})["pg_catalog"] = "clock"
    return Catalog(
        functions=functions, bodies={k: tuple(v) for k, v in bodies.items()}, views=views
    )


@functools.lru_cache(maxsize=16)
def server_catalog(dsn: str) -> Catalog:
    """:func:`read_catalog`, once per database and process, or :data:`FALLBACK` when the
    catalog cannot be read. Never raises."""
    try:
        return read_catalog(dsn)
    except Exception:
        return FALLBACK
