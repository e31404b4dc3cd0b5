"""Seed one PostgreSQL database: the schemas; then per table, in one loader, its CREATE TABLE
and COPY in one transaction, its keys, indexes and ANALYZE; foreign keys as soon as both their
tables are done (:class:`.lanes.EarlyForeignKeys`), the rest after the load."""

from __future__ import annotations

import contextlib
import ctypes
import gc
import multiprocessing
import os
import signal
import stat
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from functools import cache
from multiprocessing.util import Finalize
from typing import Any

import psycopg
from psycopg import sql

from pytest_heron.core.errors import ConfigError, SpecError
from pytest_heron.generate import citus, copybinary
from pytest_heron.generate.columns import Generator
from pytest_heron.generate.copytext import encode
from pytest_heron.generate.ddl import (
    constraint_statements,
    drop_keys,
    key_statements,
    table_ddl,
)
from pytest_heron.generate.lanes import (
    GROUP,
    EarlyForeignKeys,
    by_cost,
    connect,
    create_tables,
    parallel,
    referenced,
    target,
)
from pytest_heron.generate.spec import load_bundle

CHUNK_ROWS = 50_000
# A table others refer to with at most 1/SMALL_PARENT of the largest table's rows loads first.
SMALL_PARENT = 20
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


def _loader(dsn: str) -> psycopg.Connection[Any]:
    """This process's loading connection to ``dsn``, opened once: a load has hundreds of
    tasks, and a new server backend for each costs about as much as generating a chunk."""
    key = (os.getpid(), dsn)
    conn = _LOADERS.get(key)
    if conn is None or conn.closed:
        conn = connect(dsn)
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
            if create:  # one round trip: a table's CREATE, its COMMENTs, its key drops
                conn.execute(";\n".join(create))
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
    indexes, foreign_keys, other = constraint_statements(bundle, layout)
    if freeze and jobs > 1:
        # Small tables that others refer to load first (they are quick), so that the foreign
        # keys of the large tables, loaded first too, can go in during the load.
        small = max(counts.values(), default=0) // SMALL_PARENT
        parents = {referenced(add) for add, _ in foreign_keys}
        tasks.sort(key=lambda t: 0 if t[0] in parents and counts[t[0]] <= small else 1)
    drops, keys = key_statements(bundle, layout)
    # Keys, unique constraints and indexes are built in bulk after the load (much faster than
    # maintaining them row by row during COPY), then ANALYZE. With whole-table tasks, each
    # table's own come right after its COPY in the same worker: no lane waits for the last
    # table's load, and the rows are read back while cached. The rest (tables without rows,
    # or the Citus layout) run in lanes after the load, largest tables first.
    builds = [GROUP.join(k) for k in keys.values()] + indexes
    after: dict[str, tuple[str, ...]] = {}
    if freeze and not other:
        by_table: dict[str, list[str]] = {}
        for stmt in builds:
            by_table.setdefault(target(stmt)[0], []).append(stmt)
        for fq, _, _ in tasks:
            after[fq] = (*by_table.pop(fq, ()), f"ANALYZE {fq}")
        builds = [stmt for stmts in by_table.values() for stmt in stmts]

    # The standard layout creates each loaded table in the transaction that loads it (no
    # TRUNCATE, no key built on the empty table and dropped before the load): its CREATE
    # TABLE and COMMENTs, then its declared keys dropped; the keys come back after the COPY.
    made = table_ddl(bundle) if freeze else None
    create: dict[str, tuple[str, ...]] = {}
    if made is not None:
        create = {fq: (*made[1][fq], *drops.get(fq, ())) for fq, _, _ in tasks}

    def build_schema() -> None:
        """The tables without their keys (and, for Citus, distributed); with ``made``, the
        schemas and only the tables no task creates."""
        if made is not None:
            with connect(dsn) as conn, conn.transaction():
                conn.execute(";\n".join(made[0]))
                for fq, stmts in made[1].items():
                    if fq not in create:
                        conn.execute(";\n".join((*stmts, *drops.get(fq, ()))))
            say(
                f"schema: {len(bundle.modules)} schemas, each table made as it is loaded;"
                f" loading {total:,} rows"
            )
            return
        create_tables(dsn, bundle, 2 * jobs)
        with connect(dsn) as conn, conn.transaction():
            dropped = drop_keys(conn, [m.name for m in bundle.modules])
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
            # Whole tables, keyed by their task: their foreign keys can go in during the load.
            early = EarlyForeignKeys(dsn, foreign_keys) if after else None
            if early is not None:
                for f, task in zip(futures, tasks, strict=True):
                    f.add_done_callback(early.on_done(task[0]))
            try:
                for f, task in zip(futures, tasks, strict=True):
                    report(f.result(), task[0])
            finally:
                if early is not None:
                    foreign_keys = early.finish()
    loaded_at = time.perf_counter()
    say("constraints, indexes and statistics")
    with connect(dsn) as conn:
        for stmt in other:
            conn.execute(stmt)
        # ANALYZE needs only the rows, so it comes last in the same queue and fills the lanes
        # while the largest tables' indexes finish.
        analyze = by_cost([f"ANALYZE {fq}" for fq in counts if fq not in after], counts)
        parallel(dsn, by_cost(builds, counts) + analyze, 2 * jobs)
        # Adding a foreign key NOT VALID is instant (one transaction for all of them);
        # validations of different tables do not conflict, so they run in parallel (pg_restore
        # does the same).
        with conn.transaction():
            for stmt, _ in foreign_keys:
                conn.execute(stmt)
        parallel(dsn, by_cost([validate for _, validate in foreign_keys], counts), 2 * jobs)
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
