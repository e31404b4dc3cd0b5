"""Seed one PostgreSQL database: DDL, COPY of every table, then keys, indexes and ANALYZE, then
foreign keys."""

from __future__ import annotations

import contextlib
import ctypes
import gc
import multiprocessing
import os
import re
import signal
import stat
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache
from multiprocessing.util import Finalize
from typing import Any

import psycopg
from psycopg import sql

from pytest_heron.core.errors import ConfigError, SpecError
from pytest_heron.dataset import split_statements
from pytest_heron.generate import citus, copybinary
from pytest_heron.generate.columns import Generator
from pytest_heron.generate.copytext import encode
from pytest_heron.generate.spec import Bundle, load_bundle

CHUNK_ROWS = 50_000
# Load the standard layout with binary COPY (False: text COPY everywhere; for comparisons).
BINARY_COPY = True
Progress = Callable[[str], None]


@dataclass(frozen=True)
class SeedResult:
    tables: int
    schemas: int
    rows: int
    row_counts: dict[str, int]
    seconds: float
    phases: dict[str, float]


@cache
def _generator(scale: str, seed: int) -> Generator:
    return Generator(load_bundle(), scale, seed)


_LOADERS: dict[tuple[int, str], psycopg.Connection[Any]] = {}


def _connect(dsn: str) -> psycopg.Connection[Any]:
    """An autocommit connection for seeding. Its commits do not wait for the WAL flush: a
    seed is hundreds of small DDL transactions, and waiting for the disk at each one left
    the cores idle. This is safe: a crash can lose only the latest transactions, never
    corrupt, and the state's manifest, committed synchronously at the very end, flushes
    everything before it."""
    conn = psycopg.connect(dsn, autocommit=True, client_encoding="utf8")  # not PGCLIENTENCODING
    conn.execute("SET synchronous_commit = off")
    conn.execute("SET client_min_messages = warning")
    return conn


def _loader(dsn: str) -> psycopg.Connection[Any]:
    """This process's loading connection to ``dsn``, opened once: a load has hundreds of
    tasks, and a new server backend for each costs about as much as generating a chunk."""
    key = (os.getpid(), dsn)
    conn = _LOADERS.get(key)
    if conn is None or conn.closed:
        conn = _connect(dsn)
        conn.execute("SET TimeZone = 'UTC'")  # timestamps are sent without an offset
        _LOADERS[key] = conn
        # Pool workers leave through multiprocessing's exit path, which skips atexit but runs
        # these finalizers: close the connection cleanly instead of dropping the socket.
        Finalize(conn, conn.close, exitpriority=10)
    return conn


def _close_loaders() -> None:
    for key in [k for k in _LOADERS if k[0] == os.getpid()]:
        _LOADERS.pop(key).close()


PR_SET_PDEATHSIG = 1


def _inherited_sessions() -> list[psycopg.Connection[Any]]:
    """The open psycopg connections this process holds whose socket is still a socket (in a
    forked worker: the parent's sessions, until :func:`_worker_init` lets go of them)."""
    found = []
    for obj in gc.get_objects():
        if isinstance(obj, psycopg.Connection) and not obj.closed:
            with contextlib.suppress(psycopg.Error, OSError):
                if stat.S_ISSOCK(os.fstat(obj.pgconn.socket).st_mode):
                    found.append(obj)
    return found


def _live_inherited() -> int:
    """How many of the parent's sessions a worker still holds (0 after :func:`_worker_init`)."""
    return len(_inherited_sessions())


# Set in a seeding worker by :func:`_worker_init`: the event the parent sets once every table
# exists (its keys dropped), so a worker can generate its first rows while the schema is built.
_SCHEMA_READY: Any = None
# How many chunks a worker generates ahead while it waits for the schema (bounds its memory).
AHEAD_CHUNKS = 8


def _worker_init(parent: int, schema_ready: Any = None) -> None:
    """Start of a forked seeding worker: hold none of the parent's database sessions, and exit
    as soon as the parent is gone. ``schema_ready`` (an event, or None) is what
    :func:`_copy_range` waits on before its COPY.

    Forked workers used to keep the parent's admin session (and the state's build lock) open
    after the parent was killed, so every later build waited on that lock forever. Each
    inherited session's socket is replaced by /dev/null in this process (``dup2``): the
    parent's session is untouched (closing it here would send a Terminate on the shared
    socket), and the fd number stays taken, so nothing written to it later reaches another
    socket. On Linux the kernel kills a worker whose parent dies (PR_SET_PDEATHSIG); elsewhere,
    and as a backstop, a thread watches the parent's pid."""
    global _SCHEMA_READY
    _SCHEMA_READY = schema_ready
    null = os.open(os.devnull, os.O_RDWR)
    for conn in _inherited_sessions():
        os.dup2(null, conn.pgconn.socket)
    os.close(null)
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):  # pragma: no cover - no prctl: the thread remains
            pass
    if os.getppid() != parent:  # the parent died before the line above
        os._exit(1)

    def watch() -> None:
        while True:
            time.sleep(1.0)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=watch, name="heron-parent-watch", daemon=True).start()


def _pool(jobs: int, schema_ready: Any = None) -> ProcessPoolExecutor:
    """The seeding workers, forked (they share the parent's warm generator; spawned ones
    spent ~5 s each importing and building it) and made safe by :func:`_worker_init`.
    ``schema_ready``: an event of the fork context, see :func:`_worker_init`."""
    return ProcessPoolExecutor(
        max_workers=jobs,
        mp_context=multiprocessing.get_context("fork"),
        initializer=_worker_init,
        initargs=(os.getpid(), schema_ready),
    )


def _column_types(
    conn: psycopg.Connection[Any], target: sql.Composable, names: list[str]
) -> list[str]:
    """The catalog type name (``pg_type.typname``) of each of ``names`` in the table, in order."""
    found = dict(
        conn.execute(
            sql.SQL(
                "SELECT a.attname, t.typname FROM pg_attribute a"
                " JOIN pg_type t ON t.oid = a.atttypid"
                " WHERE a.attrelid = {}::regclass AND a.attnum > 0 AND NOT a.attisdropped"
            ).format(sql.Literal(target.as_string(conn)))
        ).fetchall()
    )
    return [str(found.get(name, "")) for name in names]


def _copy_range(
    dsn: str,
    scale: str,
    seed: int,
    fq: str,
    start: int,
    stop: int,
    freeze: bool = False,
    after: tuple[str, ...] = (),
    binary: bool = False,
    create: tuple[str, ...] = (),
) -> int:
    """Generate rows ``[start, stop)`` of a table and COPY them in (runs in any process).

    With ``freeze`` (a whole table, ``start == 0``): the table is made in the transaction that
    loads it with ``COPY ... FREEZE``: created there by the ``create`` statements, or, without
    them, an existing empty table truncated. The rows are written frozen and all-visible, so
    the index builds, ANALYZE and the foreign-key checks that read them next never rewrite the
    pages to set hint bits; and on a server with ``wal_level=minimal`` (the embedded one) the
    new file is not WAL-logged at all, only synced at commit.

    With ``binary``, the rows go in binary COPY format (:mod:`.copybinary`; the server parses
    it several times faster than text) when every column's kind and catalog type has a binary
    encoding, and as text otherwise."""
    gen = _generator(scale, seed)
    spec = gen.bundle.table(fq)
    cols = sql.SQL(", ").join(sql.Identifier(c) for c in spec.column_names)
    target = sql.Identifier(spec.module, spec.name)
    conn = _loader(dsn)
    ranges = [(lo, min(stop, lo + CHUNK_ROWS)) for lo in range(start, stop, CHUNK_ROWS)]
    # While the parent still builds the schema, generate ahead (a few chunks at most).
    ahead = []
    if _SCHEMA_READY is not None and not _SCHEMA_READY.is_set():
        for lo, hi in ranges[:AHEAD_CHUNKS]:
            ahead.append(gen.chunk(fq, lo, hi))
            if _SCHEMA_READY.is_set():
                break
        _SCHEMA_READY.wait()
    first = ahead[0] if ahead else gen.chunk(fq, *ranges[0]) if ranges else []
    with contextlib.ExitStack() as stack:
        if freeze:
            stack.enter_context(conn.transaction())
            if create:
                for part in create:
                    conn.execute(part)
            else:
                conn.execute(sql.SQL("TRUNCATE {}").format(target))
        types: list[str] | None = None
        if binary and first:
            types = _column_types(conn, target, list(spec.column_names))
            if not copybinary.supported([c.kind for c in first], types):
                types = None
        options = ["FORMAT binary"] if types is not None else []
        if freeze:
            options.append("FREEZE")
        stmt = sql.SQL("COPY {} ({}) FROM STDIN").format(target, cols)
        if options:
            stmt = sql.SQL("{} ({})").format(stmt, sql.SQL(", ".join(options)))
        with conn.cursor() as cur, cur.copy(stmt) as copy:
            if types is not None:
                copy.write(copybinary.HEADER)
            for i, (lo, hi) in enumerate(ranges):
                if i < len(ahead):
                    chunk, ahead[i] = ahead[i], []  # let go of it once sent
                else:
                    chunk = first if i == 0 else gen.chunk(fq, lo, hi)
                if types is not None:
                    copy.write(copybinary.encode(chunk, types))
                else:
                    copy.write(encode(chunk))
            if types is not None:
                copy.write(copybinary.TRAILER)
    # The rows just committed are counted in this backend's pending statistics, which reach
    # the shared ones within a second or so of the backend going idle. If they arrived after
    # this table's ANALYZE, they would count as changes since it and autovacuum would analyze
    # every such table again a minute after the seed (155 of 211 tables at small did). Flushed
    # now, before the reply to this call, they come before any ANALYZE of the table.
    conn.execute("SELECT pg_stat_force_next_flush()")
    if after:  # this table's keys, indexes and ANALYZE, while its pages are still cached
        conn.execute("SET max_parallel_maintenance_workers = 0")
        conn.execute("SET maintenance_work_mem = '256MB'")
        for follow in after:
            conn.execute(follow)
    return stop - start


_FK = re.compile(
    r"^ALTER TABLE (?P<table>[\w.]+) ADD CONSTRAINT (?P<name>\w+) FOREIGN KEY .*;$", re.S
)


def _is_index(stmt: str) -> bool:
    return stmt.upper().startswith(("CREATE INDEX", "CREATE UNIQUE INDEX"))


def _section2(bundle: Bundle, layout: str = "standard") -> list[str]:
    """Section 2 of every module's DDL (after ``-- @constraints``), one statement each, with
    the indexes and foreign keys rewritten for the ``citus`` layout."""
    distributed = citus.placement(bundle).distributed if layout == "citus" else ()
    out = []
    for module in bundle.modules:
        for raw in split_statements(module.ddl_constraints):
            stmt = " ".join(raw.split()) + ";"
            if distributed and _is_index(stmt):
                stmt = citus.rewrite_index(stmt, distributed)
            elif distributed and _FK.match(stmt):
                stmt = citus.rewrite_fk(stmt, distributed)
            out.append(stmt)
    return out


def _constraint_statements(
    bundle: Bundle, layout: str = "standard"
) -> tuple[list[str], list[tuple[str, str]], list[str]]:
    """Section 2 of every module, split into indexes, foreign keys (as NOT VALID additions with
    their VALIDATE statements) and anything else."""
    indexes: list[str] = []
    fks: list[tuple[str, str]] = []
    other: list[str] = []
    for stmt in _section2(bundle, layout):
        fk = _FK.match(stmt)
        if _is_index(stmt):
            indexes.append(stmt)
        elif fk:
            fks.append(
                (
                    stmt[:-1] + " NOT VALID;",
                    f"ALTER TABLE {fk['table']} VALIDATE CONSTRAINT {fk['name']};",
                )
            )
        else:
            other.append(stmt)
    return indexes, fks, other


def ddl_script(layout: str = "standard", *, distribute: bool = True) -> str:
    """The schema of ``layout`` as one psql script without data, for review or to build an
    empty copy by hand; ``heron ddl`` prints it.

    For ``citus``: the tables, then the keys Citus would refuse dropped, the distribution calls
    (left out with ``distribute=False``), a marker where ``heron seed`` loads the data, then the
    keys with ``tenant_id``, the indexes and the rewritten foreign keys. The keys are read from
    the DDL text; ``seed_database`` reads the same keys from the catalog (a test compares them).
    """
    if layout not in citus.LAYOUTS:
        raise ConfigError(f"unknown layout {layout!r}; known: {', '.join(citus.LAYOUTS)}")
    bundle = load_bundle()
    head = f"-- heron schema, layout {layout}, data version {bundle.data_version}\n"
    if layout == "standard":
        return head + bundle.ddl + "\n".join(["", "-- @constraints", *_section2(bundle), ""])
    place = citus.placement(bundle)
    keys = [
        (drop, add, citus.rewrite_key(add, place.distributed))
        for drop, add in citus.key_statements(citus.declared_keys(bundle.ddl))
    ]
    lines = [
        head + f"-- {len(place.distributed)} tables distributed by tenant_id (co-located),"
        f" {len(place.reference)} reference tables",
        "",
        "-- 1. Tables, with the keys of the standard layout",
        bundle.ddl,
        "-- 2. Keys without tenant_id on distributed tables (Citus refuses them); re-added in 5",
        *[drop for drop, add, new in keys if new != add],
        "",
        "-- 3. Distribution (needs the citus extension; Citus 12.1+ for PostgreSQL 16)",
        *(citus.distribution_statements(place) if distribute else ["-- (left out)"]),
        "",
        "-- 4. heron seed --layout citus loads the data here (COPY into the empty tables)",
        "",
        "-- 5. Keys with tenant_id, indexes, foreign keys",
        *[new for drop, add, new in keys if new != add],
        *_section2(bundle, layout),
        "",
    ]
    return "\n".join(lines)


def _drop_keys(conn: psycopg.Connection[Any], schemas: list[str]) -> list[tuple[str, str, str]]:
    """Drop the primary keys and unique constraints of ``schemas``; return what was dropped,
    as ``(schema.table, constraint name, definition)`` sorted."""
    rows = conn.execute(
        """SELECT n.nspname, c.relname, k.conname, pg_get_constraintdef(k.oid), k.contype
           FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid
           JOIN pg_namespace n ON n.oid = c.relnamespace
           WHERE k.contype IN ('p', 'u') AND n.nspname = ANY(%s)
           ORDER BY 1, 2, k.contype, 3""",
        (schemas,),
    ).fetchall()
    dropped = []
    for schema, table, name, definition, _ in rows:
        target = sql.Identifier(schema, table).as_string(conn)
        conn.execute(f"ALTER TABLE {target} DROP CONSTRAINT {sql.Identifier(name).as_string(conn)}")
        dropped.append((f"{schema}.{table}", str(name), str(definition)))
    return sorted(dropped)


def _key_statements(bundle: Bundle, layout: str) -> dict[str, list[str]]:
    """Per table, the statements that add its primary key and unique constraints, read from
    the DDL text (so the load can be planned before the tables exist); for the ``citus``
    layout, rewritten with ``tenant_id``. :func:`seed_database` checks them against the keys
    it drops from the catalog."""
    distributed = citus.placement(bundle).distributed if layout == "citus" else ()
    out: dict[str, list[str]] = {}
    for _, add in citus.key_statements(citus.declared_keys(bundle.ddl)):
        stmt = add.rstrip(";")
        if distributed:
            stmt = citus.rewrite_key(stmt, distributed)
        out.setdefault(_target(stmt)[0], []).append(stmt)
    return out


_TARGET = re.compile(r"^(ALTER TABLE|ANALYZE|CREATE (?:UNIQUE )?INDEX \w+ ON) ([\w.\"]+)")


def _target(stmt: str) -> tuple[str, bool]:
    """The table a statement works on, and whether it excludes other statements on that table
    (ALTER TABLE and ANALYZE do; CREATE INDEX statements can share a table)."""
    m = _TARGET.match(stmt)
    if not m:
        return "", True
    return m.group(2).replace('"', ""), not m.group(1).startswith("CREATE")


def _by_cost(statements: list[str], rows: dict[str, int]) -> list[str]:
    """Statements on the largest tables first (longest-processing-time-first scheduling keeps
    the lanes finishing together); ties keep their order."""
    return sorted(statements, key=lambda stmt: -rows.get(_target(stmt)[0], 0))


class _Schedule:
    """Which statement a free lane runs next: the first in order whose table is not held by a
    conflicting statement already running (ALTER TABLE and ANALYZE hold their table alone;
    CREATE INDEX statements can share one). Pure bookkeeping; the lanes lock around it."""

    def __init__(self, statements: list[str]) -> None:
        # Each statement's table is read once here, not on every look through the queue.
        self.pending = [(stmt, *_target(stmt)) for stmt in statements]
        self.running: dict[str, list[bool]] = {}

    def take(self) -> tuple[str, str, bool] | None:
        """The next runnable statement with its table and exclusivity, or None if every
        pending one is blocked for now."""
        for i, (stmt, table, exclusive) in enumerate(self.pending):
            held = self.running.setdefault(table, [])
            if not held or not (exclusive or any(held)):
                del self.pending[i]
                held.append(exclusive)
                return stmt, table, exclusive
        return None

    def finish(self, table: str, exclusive: bool) -> None:
        self.running[table].remove(exclusive)


# Joins the statements one lane runs together on one table (a table's keys): a newline never
# occurs inside our one-line statements.
_GROUP = ";\n"


def _parallel(dsn: str, statements: list[str], lanes: int) -> None:
    """Run statements on up to ``lanes`` connections, each lane taking the next statement from
    a shared :class:`_Schedule`, so lanes never queue on each other's table locks."""
    schedule = _Schedule(statements)
    ready = threading.Condition()

    def take() -> tuple[str, str, bool] | None:
        with ready:
            while schedule.pending:
                got = schedule.take()
                if got is not None:
                    return got
                ready.wait()
            return None

    def run() -> None:
        with _connect(dsn) as conn:
            # Several lanes share the cores: each statement in one process, with room to sort.
            conn.execute("SET max_parallel_maintenance_workers = 0")
            conn.execute("SET maintenance_work_mem = '256MB'")
            while (got := take()) is not None:
                stmt, table, exclusive = got
                try:
                    # one statement per execute: Citus forwards a statement to the workers as a
                    # prepared statement, which cannot hold several commands
                    for part in stmt.split(_GROUP):
                        conn.execute(part)
                finally:
                    with ready:
                        schedule.finish(table, exclusive)
                        ready.notify_all()

    count = max(1, min(lanes, len(statements)))
    with ThreadPoolExecutor(max_workers=count) as pool:
        for future in [pool.submit(run) for _ in range(count)]:
            future.result()


def _create_tables(dsn: str, bundle: Bundle, lanes: int) -> None:
    """Create every module's schema and tables, modules in parallel (their tables refer to
    each other only through the foreign keys, which come after the load)."""

    def create(ddl: str) -> None:
        with _connect(dsn) as conn, conn.transaction():
            conn.execute(ddl)

    with ThreadPoolExecutor(max_workers=max(1, lanes)) as pool:
        for future in [pool.submit(create, m.ddl_tables) for m in bundle.modules]:
            future.result()


_DDL_TABLE = re.compile(r"^(?:CREATE TABLE|COMMENT ON (?:TABLE|COLUMN)) (\w+\.\w+)[\s.(]")
_DDL_SCHEMA = re.compile(r"^(?:CREATE SCHEMA|COMMENT ON SCHEMA) \w+\b")


def _table_ddl(bundle: Bundle) -> tuple[list[str], dict[str, list[str]]] | None:
    """Section 1 of every module split into the statements that make the schemas and, per
    table, those that make it (its CREATE TABLE and COMMENTs), in order; None if a statement
    is neither (then the tables are made up front, as one script per module)."""
    schemas: list[str] = []
    tables: dict[str, list[str]] = {}
    for module in bundle.modules:
        for stmt in split_statements(module.ddl_tables):
            if m := _DDL_TABLE.match(stmt):
                if m.group(1) not in tables and not stmt.startswith("CREATE TABLE"):
                    return None  # a comment before its table
                tables.setdefault(m.group(1), []).append(stmt)
            elif _DDL_SCHEMA.match(stmt):
                schemas.append(stmt)
            else:
                return None
    return schemas, tables


def _tasks(gen: Generator, per_task: int) -> list[tuple[str, int, int]]:
    tasks = []
    for fq, n in gen.row_counts().items():
        for lo in range(0, n, per_task):
            tasks.append((fq, lo, min(n, lo + per_task)))
    # Largest first, so parallel workers finish together; ties broken by name for stability.
    return sorted(tasks, key=lambda t: (-(t[2] - t[1]), t[0], t[1]))


def seed_database(
    dsn: str,
    scale: str,
    seed: int,
    *,
    jobs: int = 1,
    progress: Progress | None = None,
    layout: str = "standard",
    distribute: bool = True,
) -> SeedResult:
    """Build the schema with data for ``(scale, seed)`` in the (empty) database ``dsn``.

    ``layout="citus"`` gives the tenant tables composite keys (see :mod:`.citus`) and, unless
    ``distribute`` is false, distributes the empty tables before loading them (which needs a
    Citus coordinator). ``distribute=False`` is for testing the keys on plain PostgreSQL.
    """
    if layout not in citus.LAYOUTS:
        raise ConfigError(f"unknown layout {layout!r}; known: {', '.join(citus.LAYOUTS)}")
    say = progress or (lambda _msg: None)
    gen = _generator(scale, seed)
    bundle = gen.bundle
    counts = gen.row_counts()
    total = sum(counts.values())
    started = time.perf_counter()
    # The standard layout loads each table whole, frozen, in one task (see _copy_range); a
    # Citus coordinator gets the same rows in slices, without FREEZE.
    freeze = layout == "standard"
    # Binary COPY for the standard layout only: the Citus coordinator's handling of binary
    # COPY was never tried here, so it keeps the text format (DECISIONS.md, 2026-12-02).
    binary = layout == "standard" and BINARY_COPY
    per_task = max(counts.values(), default=1) if freeze else 4 * CHUNK_ROWS
    tasks = _tasks(gen, per_task=max(1, per_task))
    indexes, foreign_keys, other = _constraint_statements(bundle, layout)
    keys = _key_statements(bundle, layout)
    # Keys, unique constraints and indexes are built in bulk after the load (much faster than
    # maintaining them row by row during COPY), then ANALYZE. With whole-table tasks, each
    # table's own come right after its COPY in the same worker: no lane waits for the last
    # table's load, and the rows are read back while cached. The rest (tables without rows,
    # or the Citus layout) run in lanes after the load, largest tables first.
    builds = [_GROUP.join(k) for k in keys.values()] + indexes
    after: dict[str, tuple[str, ...]] = {}
    if freeze and not other:
        by_table: dict[str, list[str]] = {}
        for stmt in builds:
            by_table.setdefault(_target(stmt)[0], []).append(stmt)
        for fq, _, _ in tasks:
            after[fq] = (*by_table.pop(fq, ()), f"ANALYZE {fq}")
        builds = [stmt for stmts in by_table.values() for stmt in stmts]

    # The standard layout creates each loaded table in the transaction that loads it (no
    # TRUNCATE, no key built on the empty table and dropped before the load): its CREATE
    # TABLE and COMMENTs, then its declared keys dropped; the keys come back after the COPY.
    made = _table_ddl(bundle) if freeze else None
    create: dict[str, tuple[str, ...]] = {}
    if made is not None:
        drops: dict[str, list[str]] = {}
        for drop, _ in citus.key_statements(citus.declared_keys(bundle.ddl)):
            drops.setdefault(_target(drop)[0], []).append(drop.rstrip(";"))
        create = {fq: (*made[1][fq], *drops.get(fq, ())) for fq, _, _ in tasks}

    def build_schema() -> None:
        """The tables without their keys (and, for Citus, distributed); with ``made``, the
        schemas and only the tables no task creates."""
        if made is not None:
            with _connect(dsn) as conn, conn.transaction():
                conn.execute(";\n".join(made[0]))
                for fq, stmts in made[1].items():
                    if fq not in create:
                        for stmt in (*stmts, *drops.get(fq, ())):
                            conn.execute(stmt)
            say(
                f"schema: {len(bundle.modules)} schemas, each table made as it is loaded;"
                f" loading {total:,} rows"
            )
            return
        _create_tables(dsn, bundle, 2 * jobs)
        with _connect(dsn) as conn, conn.transaction():
            dropped = _drop_keys(conn, [m.name for m in bundle.modules])
            declared = sorted(citus.declared_keys(bundle.ddl))
            if dropped != declared:  # the load was planned with the declared ones
                extra = sorted(set(dropped) ^ set(declared))[:3]
                raise SpecError(f"the DDL's keys and the catalog's differ, e.g. {extra}")
            if layout == "citus" and distribute:
                # the keys Citus would refuse are dropped: distribute the empty tables
                place = citus.placement(bundle)
                say(
                    f"citus: {len(place.reference)} reference tables,"
                    f" {len(place.distributed)} tables distributed by tenant_id"
                )
                for stmt in citus.distribution_statements(place, citus.shard_count(scale)):
                    conn.execute(stmt)
        say(
            f"schema: {len(counts)} tables in {len(bundle.modules)} schemas; loading {total:,} rows"
        )

    done = 0
    last = 0.0

    def report(n: int, fq: str) -> None:
        nonlocal done, last
        done += n
        now = time.perf_counter()
        if now - last < 1.0 and done < total:
            return
        last = now
        elapsed = max(now - started, 1e-9)
        rate = done / elapsed
        eta = (total - done) / rate if rate > 0 else 0.0
        say(f"loaded {done:,}/{total:,} rows ({rate:,.0f} rows/s, ETA {eta:,.0f}s), done: {fq}")

    if jobs <= 1:
        build_schema()
        try:
            for fq, lo, hi in tasks:
                done_rows = _copy_range(
                    dsn,
                    scale,
                    seed,
                    fq,
                    lo,
                    hi,
                    freeze,
                    after.get(fq, ()),
                    binary,
                    create.get(fq, ()) if lo == 0 else (),
                )
                report(done_rows, fq)
        finally:
            _close_loaders()
    else:
        # The workers start on their first tables (generating ahead) while this process
        # builds the schema; they COPY once it is there.
        schema_ready = multiprocessing.get_context("fork").Event()
        with _pool(jobs, schema_ready) as pool:
            futures = [
                pool.submit(
                    _copy_range,
                    dsn,
                    scale,
                    seed,
                    *t,
                    freeze,
                    after.get(t[0], ()),
                    binary,
                    create.get(t[0], ()) if t[1] == 0 else (),
                )
                for t in tasks
            ]
            try:
                build_schema()
            except BaseException:
                for f in futures:
                    f.cancel()
                raise
            finally:
                # on failure the running tasks find no table and end at once
                schema_ready.set()
            for f, task in zip(futures, tasks, strict=True):
                report(f.result(), task[0])
    loaded_at = time.perf_counter()
    say("constraints, indexes and statistics")
    with _connect(dsn) as conn:
        for stmt in other:
            conn.execute(stmt)
        # ANALYZE needs only the rows, so it comes last in the same queue and fills the lanes
        # while the largest tables' indexes finish.
        analyze = _by_cost([f"ANALYZE {fq}" for fq in counts if fq not in after], counts)
        _parallel(dsn, _by_cost(builds, counts) + analyze, 2 * jobs)
        # Adding a foreign key NOT VALID is instant (one transaction for all of them);
        # validations of different tables do not conflict, so they run in parallel (pg_restore
        # does the same).
        with conn.transaction():
            for stmt, _ in foreign_keys:
                conn.execute(stmt)
        _parallel(dsn, _by_cost([validate for _, validate in foreign_keys], counts), 2 * jobs)
        identity = conn.execute(
            "SELECT table_schema, table_name, column_name FROM information_schema.columns"
            " WHERE is_identity = 'YES' ORDER BY 1, 2, 3"
        ).fetchall()
        with conn.transaction():
            for schema, table, column in identity:
                conn.execute(
                    sql.SQL(
                        "SELECT setval(pg_get_serial_sequence({}, {}),"
                        " COALESCE(max({}), 0) + 1, false) FROM {}"
                    ).format(
                        sql.Literal(f"{schema}.{table}"),
                        sql.Literal(column),
                        sql.Identifier(column),
                        sql.Identifier(schema, table),
                    )
                )
    return SeedResult(
        tables=len(counts),
        schemas=len(bundle.modules),
        rows=total,
        row_counts=counts,
        seconds=time.perf_counter() - started,
        phases={
            "load": loaded_at - started,
            "constraints_and_analyze": time.perf_counter() - loaded_at,
        },
    )
