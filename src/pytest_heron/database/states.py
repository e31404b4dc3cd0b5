"""Seeded database states: one database per ``(scale, seed, data version)``, built once.

A state's database is named ``heron_<scale>_<seed>_<data version>``. It is built under another
name and renamed when complete, then stamped with a manifest (JSON in ``COMMENT ON DATABASE``);
a database with the right name and a matching stamp is reused as it is. A server-wide advisory
lock per state name keeps two processes (xdist controllers, parallel CI jobs, ``heron seed``)
from building the same state at once: the second waits and then reuses the first one's work.

On a Citus cluster the state is prepared on every node and seeded there
(:func:`pytest_heron.database.citus.ensure_citus_state`); its stamp records the layout.
"""

from __future__ import annotations

import json
import os
import re
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from pytest_heron.core.errors import BackendError, ConfigError
from pytest_heron.core.progress import Steps
from pytest_heron.database.server import Server
from pytest_heron.generate import LAYOUTS, load_bundle
from pytest_heron.sandbox import DANGEROUS_FUNCTIONS as roles_DANGEROUS_FUNCTIONS
from pytest_heron.sandbox import (
    close_database,
    close_maintenance_databases,
    create_adapter_role,
    prepare_scoring_role,
    scoring_role,
)
from pytest_heron.sandbox import lock_down as roles_lock_down

if TYPE_CHECKING:  # the generator (numpy) is imported only when a state is seeded
    from pytest_heron.generate import SeedResult

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


def _layout(manifest: dict[str, object]) -> str:
    """The key layout a stamp records (stamps from before layouts existed are standard)."""
    return str(manifest.get("layout", "standard"))


def _valid(
    manifest: dict[str, object], name: str, layout: str = "standard", distributed: bool = True
) -> bool:
    return (
        manifest.get("format") == MANIFEST_FORMAT
        and manifest.get("database") == name
        and manifest.get("data_version") == load_bundle().data_version
        and _layout(manifest) == layout
        and (layout == "standard" or manifest.get("distributed") == distributed)
    )


def _drop(conn: psycopg.Connection[tuple[object, ...]], name: str) -> None:
    conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def reader_role(database: str) -> str:
    """The SELECT-only scoring role of one state database (one role per state, so a prediction
    can read only the state it is scored on); see :mod:`pytest_heron.sandbox.roles`."""
    return scoring_role(database)


def _schemas() -> list[str]:
    return [m.name for m in load_bundle().modules]


def _lock(conn: psycopg.Connection[tuple[object, ...]], name: str, say: Progress) -> None:
    """Take the state's build lock, waiting at most ``LOCK_TIMEOUT`` seconds and saying who
    holds it meanwhile; raise a :class:`BackendError` naming the holder when the wait is over."""
    key = (4242, _lock_key(name))
    deadline = time.monotonic() + LOCK_TIMEOUT
    said = 0.0
    while True:
        got = conn.execute("SELECT pg_try_advisory_lock(%s, %s)", key).fetchone()
        if got and got[0]:
            return
        holder = _lock_holder(conn, key)
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


def _lock_holder(conn: psycopg.Connection[tuple[object, ...]], key: tuple[int, int]) -> str:
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


def _grant_reader(server: Server, database: str, exclusive: bool = True) -> tuple[str, str]:
    """Set up the state's scoring role (reset on every call): it may read the benchmark
    schemas only and, when ``exclusive`` (heron owns the database), is the only role besides
    the owner (and the run's adapter role) that connects. Returns ``(role, password)``."""
    state_dsn = server.dsn(database)
    if exclusive:
        close_database(server.admin_dsn, state_dsn, database)
        if server.owned:
            close_maintenance_databases(server.admin_dsn)
    return prepare_scoring_role(
        server.admin_dsn, state_dsn, database, _schemas(), key=_harness_key(server)
    )


def _harness_key(server: Server) -> str | None:
    """The secret role passwords derive from when the admin DSN has no password (a server
    reached by peer auth or a .pgpass file): a random key kept in the cache folder (0600)."""
    if conninfo_to_dict(server.admin_dsn).get("password"):
        return None
    from pytest_heron.core.paths import cache_dir
    from pytest_heron.database.server import admin_secret

    folder = cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    return admin_secret(folder / "harness")


# Kept here for existing imports; the list and the revocation live in sandbox/py.
DANGEROUS_FUNCTIONS = roles_DANGEROUS_FUNCTIONS
lock_down = roles_lock_down


def _stamp(
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
    _comment(conn, name, manifest)
    return manifest


def _comment(
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


def ensure_state(
    server: Server,
    scale: str,
    seed: int,
    *,
    jobs: int = 1,
    progress: Progress | None = None,
    database: str | None = None,
    replace: bool = False,
    layout: str = "standard",
    distribute: bool = True,
    adapter: bool = False,
) -> State:
    """Return the state for ``(scale, seed)``, building it first if it is missing or stale.

    ``layout="citus"`` hands over to :func:`pytest_heron.database.citus.ensure_citus_state`
    (the state prepared on every node of the cluster). The scoring
    role is reset on every call; ``adapter=True`` also creates this process's adapter role
    for the state (``State.adapter_dsn``), dropped by ``release_adapters()``.
    """
    if layout not in LAYOUTS:
        raise ConfigError(f"unknown layout {layout!r}; known: {', '.join(LAYOUTS)}")
    if layout == "citus":
        from pytest_heron.database.citus import ensure_citus_state

        return ensure_citus_state(
            server,
            scale,
            seed,
            database=database,
            jobs=jobs,
            progress=progress,
            replace=replace,
            distribute=distribute,
            adapter=adapter,
        )
    say = progress or (lambda _msg: None)
    name = database or state_name(scale, seed)
    building = f"{name}__building"
    with psycopg.connect(server.admin_dsn, autocommit=True) as conn:
        _lock(conn, name, say)
        try:
            manifest = _read_manifest(conn, name)
            if _layout(manifest) != "standard":
                raise BackendError(
                    f"database {name!r} holds a {_layout(manifest)}-layout state; heron will not"
                    " replace it with a standard one: choose another --database, or drop it"
                    " yourself"
                )
            if replace or not _valid(manifest, name):
                if manifest or replace:
                    say(f"{name}: stamp missing or stale; rebuilding")
                _drop(conn, name)
                _drop(conn, building)
                if database is None:
                    _drop_other_versions(conn, scale, seed, keep=name)
                _create_building(server, conn, building)
                say(f"{name}: seeding scale={scale} seed={seed}")
                from pytest_heron.generate import seed_database

                result = seed_database(
                    server.dsn(building),
                    scale,
                    seed,
                    jobs=jobs,
                    progress=seeding_progress(say, name),
                )
                conn.execute(
                    sql.SQL("ALTER DATABASE {} RENAME TO {}").format(
                        sql.Identifier(building), sql.Identifier(name)
                    )
                )
                manifest = _stamp(conn, name, scale, seed, result, {"layout": "standard"})
                say(f"{name}: ready ({result.rows:,} rows in {result.seconds:.1f}s)")
            login = _grant_reader(server, name)
            roles_lock_down(server.dsn(name))
        finally:
            conn.execute("SELECT pg_advisory_unlock(4242, %s)", (_lock_key(name),))
    return _state(server, scale, seed, name, manifest, login, adapter)


def _create_building(
    server: Server, conn: psycopg.Connection[tuple[object, ...]], building: str
) -> None:
    """Create the database a state is built in; no role but the admin may connect to it
    (PUBLIC's default CONNECT is revoked at once, and the rename keeps that)."""
    conn.execute(
        sql.SQL("CREATE DATABASE {} TEMPLATE template0 ENCODING 'UTF8' LOCALE 'C'").format(
            sql.Identifier(building)
        )
    )
    close_database(server.admin_dsn, server.dsn(building), building)


def _state(
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
        role, password = create_adapter_role(server.admin_dsn, server.dsn(name), name, _schemas())
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


def seed_jobs() -> int:
    """Processes that load a missing state (read when a state is built, not at import)."""
    return max(1, min(4, os.cpu_count() or 1))
