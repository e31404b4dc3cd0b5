"""Running seeding statements on several connections: which table a statement holds, the
order lanes take statements in, and the lanes themselves."""

from __future__ import annotations

import queue
import re
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import psycopg

from pytest_heron.generate.spec import Bundle


def connect(dsn: str) -> psycopg.Connection[Any]:
    """An autocommit connection for seeding. Its commits do not wait for the WAL flush: a
    seed is hundreds of small DDL transactions, and waiting for the disk at each one left
    the cores idle. This is safe: a crash can lose only the latest transactions, never
    corrupt, and the state's manifest, committed synchronously at the very end, flushes
    everything before it."""
    conn = psycopg.connect(dsn, autocommit=True, client_encoding="utf8")  # not PGCLIENTENCODING
    conn.execute("SET synchronous_commit = off")
    conn.execute("SET client_min_messages = warning")
    return conn


_TARGET = re.compile(r"^(ALTER TABLE|ANALYZE|CREATE (?:UNIQUE )?INDEX \w+ ON) ([\w.\"]+)")


def target(stmt: str) -> tuple[str, bool]:
    """The table a statement works on, and whether it excludes other statements on that table
    (ALTER TABLE and ANALYZE do; CREATE INDEX statements can share a table)."""
    m = _TARGET.match(stmt)
    if not m:
        return "", True
    return m.group(2).replace('"', ""), not m.group(1).startswith("CREATE")


def by_cost(statements: list[str], rows: dict[str, int]) -> list[str]:
    """Statements on the largest tables first (longest-processing-time-first scheduling keeps
    the lanes finishing together); ties keep their order."""
    return sorted(statements, key=lambda stmt: -rows.get(target(stmt)[0], 0))


class Schedule:
    """Which statement a free lane runs next: the first in order whose table is not held by a
    conflicting statement already running (ALTER TABLE and ANALYZE hold their table alone;
    CREATE INDEX statements can share one). Pure bookkeeping; the lanes lock around it."""

    def __init__(self, statements: list[str]) -> None:
        # Each statement's table is read once here, not on every look through the queue.
        self.pending = [(stmt, *target(stmt)) for stmt in statements]
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
GROUP = ";\n"


def parallel(dsn: str, statements: list[str], lanes: int) -> None:
    """Run statements on up to ``lanes`` connections, each lane taking the next statement from
    a shared :class:`Schedule`, so lanes never queue on each other's table locks."""
    schedule = Schedule(statements)
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
        with connect(dsn) as conn:
            # Several lanes share the cores: each statement in one process, with room to sort.
            conn.execute("SET max_parallel_maintenance_workers = 0")
            conn.execute("SET maintenance_work_mem = '256MB'")
            while (got := take()) is not None:
                stmt, table, exclusive = got
                try:
                    # one statement per execute: Citus forwards a statement to the workers as a
                    # prepared statement, which cannot hold several commands
                    for part in stmt.split(GROUP):
                        conn.execute(part)
                finally:
                    with ready:
                        schedule.finish(table, exclusive)
                        ready.notify_all()

    count = max(1, min(lanes, len(statements)))
    with ThreadPoolExecutor(max_workers=count) as pool:
        for future in [pool.submit(run) for _ in range(count)]:
            future.result()


def create_tables(dsn: str, bundle: Bundle, lanes: int) -> None:
    """Create every module's schema and tables, modules in parallel (their tables refer to
    each other only through the foreign keys, which come after the load)."""

    def create(ddl: str) -> None:
        with connect(dsn) as conn, conn.transaction():
            conn.execute(ddl)

    with ThreadPoolExecutor(max_workers=max(1, lanes)) as pool:
        for future in [pool.submit(create, m.ddl_tables) for m in bundle.modules]:
            future.result()


_REFERENCES = re.compile(r"\bREFERENCES ([\w.\"]+)")


def referenced(stmt: str) -> str:
    """The table a foreign key statement refers to ('' if it is not one)."""
    m = _REFERENCES.search(stmt)
    return m.group(1).replace('"', "") if m else ""


class EarlyForeignKeys:
    """Adds and validates foreign keys while the load goes on, on one connection of its own:
    each key as soon as both its tables are loaded and keyed (:meth:`loaded`), in that order.

    One lane, so its statements never wait on each other (adding a key locks both tables in
    a mode that conflicts with itself); it touches only tables whose load has ended, so it
    never waits on a loader either. :meth:`finish` stops it after the key in hand and returns
    the keys it did not add, for the lanes after the load."""

    def __init__(self, dsn: str, keys: list[tuple[str, str]]) -> None:
        self._keys = keys  # (ADD ... NOT VALID, VALIDATE) pairs
        self._waiting = [(target(add)[0], referenced(add), i) for i, (add, _) in enumerate(keys)]
        self._loaded: set[str] = set()
        self._lock = threading.Lock()
        self._queue: queue.SimpleQueue[int | None] = queue.SimpleQueue()
        self._stop = threading.Event()
        self._done: list[int] = []
        self._error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._run, args=(dsn,), name="heron-early-foreign-keys", daemon=True
        )
        self._thread.start()

    def loaded(self, table: str) -> None:
        """``table`` is loaded and keyed: queue the keys that were waiting only for it."""
        with self._lock:
            self._loaded.add(table)
            waiting = []
            for child, parent, i in self._waiting:
                if child in self._loaded and parent in self._loaded:
                    self._queue.put(i)
                else:
                    waiting.append((child, parent, i))
            self._waiting = waiting

    def on_done(self, table: str) -> Callable[[Future[Any]], None]:
        """A callback for the future of ``table``'s load task: :meth:`loaded` if it succeeded."""

        def done(future: Future[Any]) -> None:
            if not future.cancelled() and future.exception() is None:
                self.loaded(table)

        return done

    def _run(self, dsn: str) -> None:
        try:
            with connect(dsn) as conn:
                conn.execute("SET max_parallel_maintenance_workers = 0")
                conn.execute("SET maintenance_work_mem = '256MB'")
                while (i := self._queue.get()) is not None and not self._stop.is_set():
                    add, validate = self._keys[i]
                    conn.execute(add)
                    conn.execute(validate)
                    self._done.append(i)
        except BaseException as exc:  # handed to finish()
            self._error = exc

    def finish(self, *, drain: bool = False) -> list[tuple[str, str]]:
        """Stop after the key in hand (with ``drain``: after every key queued so far); the
        keys not added, in their order. Raises what the lane met (a key the data breaks, a
        lost connection)."""
        if not drain:
            self._stop.set()
        self._queue.put(None)
        self._thread.join()
        if self._error is not None:
            raise self._error
        done = set(self._done)
        return [key for i, key in enumerate(self._keys) if i not in done]
