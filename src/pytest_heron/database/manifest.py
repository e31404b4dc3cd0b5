"""What a state database records about itself, and what building one takes, shared by the
standard states (:mod:`.states`) and the Citus ones (:mod:`.citus`): the manifest (the database's
comment: format, data version, layout, counts), the :class:`State` records, the build lock (a
session advisory lock per state name), the scoring role's grants and the seeding progress.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from pytest_heron.core.errors import BackendError
from pytest_heron.core.progress import Steps
from pytest_heron.database.server import Server
from pytest_heron.generate import load_bundle
from pytest_heron.sandbox import (
    close_database,
    close_maintenance_databases,
    create_adapter_role,
    prepare_scoring_role,
    scoring_role,
)

if TYPE_CHECKING:  # the generator (numpy) is imported only when a state is seeded
    from pytest_heron.generate import SeedResult

LOCK_CLASS = 4242  # the first key of every build lock (the second: the state name's CRC)


MANIFEST_FORMAT = 1


# How long a build waits for another process's lock on the same state (a tiny state seeds in
# ~20 s, bench in hours: the wait is long, but never silent and never endless).
LOCK_TIMEOUT = float(os.environ.get("HERON_LOCK_TIMEOUT", "3600"))


Progress = Callable[[str], None]


@dataclass(frozen=True)
class StateRef:
    """What a process needs to query one state (plain data, sent to xdist workers)."""

    seed: int
    database: str
    admin_dsn: str
    reader_dsn: str
    adapter_dsn: str | None = None  # the system under test's DSN (first state only)


@dataclass(frozen=True)
class State:
    """A ready database state."""

    scale: str
    seed: int
    database: str
    admin_dsn: str
    reader_dsn: str  # the scoring role: predictions run as it; never given to a system
    manifest: dict[str, object]
    adapter_dsn: str | None = None  # the run's adapter role (ensure_state(adapter=True))

    def ref(self) -> StateRef:
        """What another process needs to query this state (no manifest; picklable, JSON-able)."""
        return StateRef(self.seed, self.database, self.admin_dsn, self.reader_dsn, self.adapter_dsn)


def state_name(scale: str, seed: int) -> str:
    return f"heron_{scale}_{seed}_{load_bundle().data_version}"


def lock_key(name: str) -> int:
    return zlib.crc32(name.encode()) - 2**31  # fits a signed int4 key pair's second half


def read_manifest(conn: psycopg.Connection[tuple[object, ...]], name: str) -> dict[str, object]:
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


def layout_of(manifest: dict[str, object]) -> str:
    """The key layout a stamp records (stamps from before layouts existed are standard)."""
    return str(manifest.get("layout", "standard"))


def valid(
    manifest: dict[str, object], name: str, layout: str = "standard", distributed: bool = True
) -> bool:
    return (
        manifest.get("format") == MANIFEST_FORMAT
        and manifest.get("database") == name
        and manifest.get("data_version") == load_bundle().data_version
        and layout_of(manifest) == layout
        and (layout == "standard" or manifest.get("distributed") == distributed)
    )


def drop_database(conn: psycopg.Connection[tuple[object, ...]], name: str) -> None:
    conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def reader_role(database: str) -> str:
    """The SELECT-only scoring role of one state database (one role per state, so a prediction
    can read only the state it is scored on); see :mod:`pytest_heron.sandbox.roles`."""
    return scoring_role(database)


def schemas() -> list[str]:
    return [m.name for m in load_bundle().modules]


def take_build_lock(conn: psycopg.Connection[tuple[object, ...]], name: str, say: Progress) -> None:
    """Take the state's build lock, waiting at most ``LOCK_TIMEOUT`` seconds and saying who
    holds it meanwhile; raise a :class:`BackendError` naming the holder when the wait is over."""
    key = (LOCK_CLASS, lock_key(name))
    deadline = time.monotonic() + LOCK_TIMEOUT
    said = 0.0
    while True:
        got = conn.execute("SELECT pg_try_advisory_lock(%s, %s)", key).fetchone()
        if got and got[0]:
            return
        holder = lock_holder(conn, key)
        now = time.monotonic()
        if now >= deadline:
            raise BackendError(
                f"{name}: gave up after {LOCK_TIMEOUT:g}s waiting for its build lock (advisory"
                f" lock {key[0]}/{key[1]} in database {conn.info.dbname!r}), held by {holder}."
                " If that process is another heron building this state, let it finish; if it"
                " is left over from a killed run, end that session (SELECT"
                " pg_terminate_backend(<pid>)) and try again. HERON_LOCK_TIMEOUT sets the wait."
            )
        if now - said >= 15.0:
            say(f"{name}: waiting for its build lock, held by {holder}")
            said = now
        time.sleep(0.5)


def lock_holder(conn: psycopg.Connection[tuple[object, ...]], key: tuple[int, int]) -> str:
    row = conn.execute(
        "SELECT a.pid, a.usename, a.application_name, a.state, a.backend_start::text"
        " FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
        " WHERE l.locktype = 'advisory' AND l.granted AND l.classid = %s::int::oid"
        " AND l.objid = %s::bigint::oid AND l.objsubid = 2"
        " AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())",
        (key[0], key[1] & 0xFFFFFFFF),
    ).fetchone()
    if row is None:
        return "another session (gone now, or not visible to this role)"
    pid, user, app, state, since = row
    return f"server process {pid} (user {user!r}, application {app!r}, {state}, since {since})"


def grant_reader(server: Server, database: str, exclusive: bool = True) -> tuple[str, str]:
    """Set up the state's scoring role (reset on every call): it may read the benchmark
    schemas only and, when ``exclusive`` (heron owns the database), is the only role besides
    the owner (and the run's adapter role) that connects. Returns ``(role, password)``."""
    state_dsn = server.dsn(database)
    if exclusive:
        close_database(server.admin_dsn, state_dsn, database)
        if server.owned:
            close_maintenance_databases(server.admin_dsn)
    return prepare_scoring_role(
        server.admin_dsn, state_dsn, database, schemas(), key=harness_key(server)
    )


def harness_key(server: Server) -> str | None:
    """The secret role passwords derive from when the admin DSN has no password (a server
    reached by peer auth or a .pgpass file): a random key kept in the cache folder (0600)."""
    if conninfo_to_dict(server.admin_dsn).get("password"):
        return None
    from pytest_heron.core.paths import cache_dir
    from pytest_heron.database.server import admin_secret

    folder = cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    return admin_secret(folder / "harness")


def stamp(
    conn: psycopg.Connection[tuple[object, ...]],
    name: str,
    scale: str,
    seed: int,
    result: SeedResult,
    extra: dict[str, object],
) -> dict[str, object]:
    """Write the manifest of a finished build as the database comment; return it."""
    manifest: dict[str, object] = {
        "format": MANIFEST_FORMAT,
        "database": name,
        **extra,
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
    comment(conn, name, manifest)
    return manifest


def comment(
    conn: psycopg.Connection[tuple[object, ...]], name: str, manifest: dict[str, object]
) -> None:
    conn.execute(
        sql.SQL("COMMENT ON DATABASE {} IS {}").format(
            sql.Identifier(name), sql.Literal(json.dumps(manifest, sort_keys=True))
        )
    )


LOADED = re.compile(r"loaded ([\d,]+)/([\d,]+) rows \((.*)\), done: \S+$")


def seeding_progress(say: Progress, name: str) -> Progress:
    """The loader's progress for state ``name``: its "loaded N/M rows" lines drive a
    :class:`~pytest_heron.core.progress.Steps` (a bar on a terminal, a line per tenth otherwise);
    every other message is passed on."""
    steps: Steps | None = None

    def show(msg: str) -> None:
        nonlocal steps
        m = LOADED.match(msg)
        if m is None:
            if steps is not None:
                steps.close()
            say(f"{name}: {msg}")
            return
        done, total = (int(g.replace(",", "")) for g in m.group(1, 2))
        if steps is None:
            steps = Steps(f"{name}: rows loaded", total, emit=say)
        steps.advance(done - steps.done, m.group(3))

    return show


def make_state(
    server: Server,
    scale: str,
    seed: int,
    name: str,
    manifest: dict[str, object],
    login: tuple[str, str],
    adapter: bool,
) -> State:
    adapter_dsn = None
    if adapter:
        role, password = create_adapter_role(server.admin_dsn, server.dsn(name), name, schemas())
        adapter_dsn = server.dsn(name, user=role, password=password)
    return State(
        scale=scale,
        seed=seed,
        database=name,
        admin_dsn=server.dsn(name),
        reader_dsn=server.dsn(name, user=login[0], password=login[1]),
        manifest=manifest,
        adapter_dsn=adapter_dsn,
    )


def server_label(server: Server) -> str:
    """Where a server is, for messages: host and port, never the password."""
    params = conninfo_to_dict(server.admin_dsn)
    kind = "the server" if server.kind == "dsn" else f"the {server.kind} server"
    return f"{kind} at {params.get('host') or 'localhost'}:{params.get('port') or 5432}"


def release_build_lock(conn: psycopg.Connection[tuple[object, ...]], name: str) -> None:
    conn.execute("SELECT pg_advisory_unlock(%s, %s)", (LOCK_CLASS, lock_key(name)))


@contextlib.contextmanager
def build_lock(
    conn: psycopg.Connection[tuple[object, ...]], name: str, say: Progress
) -> Iterator[None]:
    """The state's build lock held for the block (see :func:`take_build_lock`)."""
    take_build_lock(conn, name, say)
    try:
        yield
    finally:
        release_build_lock(conn, name)
