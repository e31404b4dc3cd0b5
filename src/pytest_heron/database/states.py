"""Seeded database states: one database per ``(scale, seed, data version)``, built once.

A state's database is named ``heron_<scale>_<seed>_<data version>``. It is built under another
name and renamed when complete, then stamped with a manifest (JSON in ``COMMENT ON DATABASE``);
a database with the right name and a matching stamp is reused as it is. A server-wide advisory
lock per state name keeps two processes (xdist controllers, parallel CI jobs, ``heron seed``)
from building the same state at once: the second waits and then reuses the first one's work.

``heron seed --layout citus`` is the exception (:func:`ensure_citus_state`): it seeds in place
into a database the user prepared on a Citus cluster, and its stamp records the layout.
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
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from pytest_heron.core.errors import BackendError, ConfigError
from pytest_heron.core.progress import Steps
from pytest_heron.database.server import Server
from pytest_heron.generate import LAYOUTS, SeedResult, load_bundle
from pytest_heron.sandbox import DANGEROUS_FUNCTIONS as roles_DANGEROUS_FUNCTIONS
from pytest_heron.sandbox import (
    close_database,
    close_maintenance_databases,
    create_adapter_role,
    lock_down_citus,
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

    ``layout="citus"`` seeds in place into ``database``, which must exist (see
    :func:`ensure_citus_state`); the plugin's states are always ``standard``. The scoring
    role is reset on every call; ``adapter=True`` also creates this process's adapter role
    for the state (``State.adapter_dsn``), dropped by ``release_adapters()``.
    """
    if layout not in LAYOUTS:
        raise ConfigError(f"unknown layout {layout!r}; known: {', '.join(LAYOUTS)}")
    if layout == "citus":
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


def require_citus(server: Server) -> None:
    """Refuse, before anything is created, a server that cannot load the citus extension."""
    with psycopg.connect(server.admin_dsn, autocommit=True) as conn:
        found = conn.execute(
            "SELECT 1 FROM pg_available_extensions WHERE name = 'citus'"
        ).fetchone()
    if found is None:
        raise BackendError(
            f"--layout citus needs a Citus coordinator, but {server_label(server)} has no citus"
            " extension (pg_available_extensions has no 'citus'); nothing was created. Point"
            " --dsn at a Citus 12.1+ coordinator (PostgreSQL 16), or print the script with"
            " 'heron ddl --layout citus' and run it there with psql"
        )


def citus_state_name(scale: str, seed: int) -> str:
    """The database of a citus-layout state the plugin (or ``heron seed --layout citus`` without
    ``--database``) builds: the standard name with ``_citus`` after it."""
    return f"{state_name(scale, seed)}_citus"


# Set on a citus-layout state database (every role, gold and predictions alike): joins on
# columns other than tenant_id need repartitioning, and the executor's SET LOCAL settings
# (TimeZone, DateStyle, ...) must reach the workers that compute the shard queries.
CITUS_DATABASE_SETTINGS: tuple[tuple[str, str], ...] = (
    ("citus.enable_repartition_joins", "on"),
    ("citus.propagate_set_commands", "local"),
)


def citus_workers(admin_dsn: str) -> list[tuple[str, int]]:
    """``(host, port)`` of the active primary workers registered in the database of
    ``admin_dsn`` (the coordinator's maintenance database), in node id order."""
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'citus'").fetchone() is None:
            raise BackendError(
                f"database {conn.info.dbname!r} of the coordinator has no citus extension: heron"
                " finds the workers there. Run CREATE EXTENSION citus and register the workers"
                " (SELECT citus_add_node(host, port)) in it, or prepare the state database"
                " yourself and name it with --database"
            )
        rows = conn.execute(
            "SELECT nodename, nodeport FROM pg_dist_node WHERE groupid <> 0 AND isactive"
            " AND noderole = 'primary' ORDER BY nodeid"
        ).fetchall()
    if not rows:
        raise BackendError("the coordinator has no active worker registered (pg_dist_node)")
    return [(str(h), int(p)) for h, p in rows]


def citus_node_dsns(state_dsn: str, workers: list[tuple[str, int]]) -> list[str]:
    """The state database on every node: the coordinator's DSN first, then each worker's
    (same user and password)."""
    return [state_dsn] + [make_conninfo(state_dsn, host=h, port=str(p)) for h, p in workers]


def _coordinator_address(conn: psycopg.Connection[tuple[object, ...]], dsn: str) -> tuple[str, int]:
    row = conn.execute(
        "SELECT nodename, nodeport FROM pg_dist_node WHERE groupid = 0 ORDER BY nodeid LIMIT 1"
    ).fetchone()
    if row is not None:
        return str(row[0]), int(str(row[1]))
    params = conninfo_to_dict(dsn)
    return str(params.get("host") or "localhost"), int(str(params.get("port") or 5432))


def prepare_citus_database(server: Server, name: str, say: Progress) -> None:
    """Create the state database ``name`` on the coordinator and on every worker registered in
    the coordinator's maintenance database, with the citus extension in each, and register
    the workers in it. Workers are reached directly, with the admin DSN's user and password."""
    workers = citus_workers(server.admin_dsn)
    with psycopg.connect(server.admin_dsn, autocommit=True) as conn:
        coordinator = _coordinator_address(conn, server.admin_dsn)
    say(f"{name}: creating it on the coordinator and {len(workers)} worker(s)")
    for node, dsn in enumerate(citus_node_dsns(server.admin_dsn, workers)):
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("SET citus.enable_create_database_propagation = off")
            if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
                if node == 0:
                    raise BackendError(f"database {name!r} exists already")  # checked before
            else:
                conn.execute(
                    sql.SQL(
                        "CREATE DATABASE {} TEMPLATE template0 ENCODING 'UTF8' LOCALE 'C'"
                    ).format(sql.Identifier(name))
                )
        with psycopg.connect(make_conninfo(dsn, dbname=name), autocommit=True) as db:
            db.execute("CREATE EXTENSION IF NOT EXISTS citus")
    with psycopg.connect(server.dsn(name), autocommit=True) as db:
        db.execute("SELECT citus_set_coordinator_host(%s, %s)", coordinator)
        for host, port in workers:
            db.execute("SELECT citus_add_node(%s, %s)", (host, port))


def _citus_settings(server: Server, name: str) -> None:
    with psycopg.connect(server.dsn(name), autocommit=True) as db:
        for setting, value in CITUS_DATABASE_SETTINGS:
            db.execute(
                sql.SQL("ALTER DATABASE {} SET {} = {}").format(
                    sql.Identifier(name), sql.Identifier(*setting.split(".")), sql.Literal(value)
                )
            )


def ensure_citus_state(
    server: Server,
    scale: str,
    seed: int,
    *,
    database: str | None,
    jobs: int = 1,
    progress: Progress | None = None,
    replace: bool = False,
    distribute: bool = True,
    adapter: bool = False,
) -> State:
    """Seed ``(scale, seed)`` in the ``citus`` layout into the database ``database`` (default:
    :func:`citus_state_name`).

    Citus keeps its list of worker nodes per database, and the coordinator reaches the workers'
    databases by the same name. A database that exists is seeded in place (the user prepared
    it: created on every node, ``CREATE EXTENSION citus`` in each, workers registered). One
    that does not is prepared by heron (:func:`prepare_citus_database`, distributed layouts
    only). The manifest (the database comment) records ``layout: citus`` and whether the
    tables were distributed; a valid one is reused. Schemas named like ours that heron did not
    build are never dropped. ``distribute=False`` keeps the composite keys but skips the Citus
    calls (tests on plain PostgreSQL; the CLI never sets it). The reader role gets SELECT on
    the benchmark schemas; in a database heron prepared it is also the only role besides the
    owner (and the adapter role) that may connect, on every node (see :func:`_lock_down_citus`).
    """
    if distribute:
        require_citus(server)
    if not database and not distribute:
        raise ConfigError("--layout citus without distribution needs --database")
    say = progress or (lambda _msg: None)
    name = database or citus_state_name(scale, seed)
    schemas = [m.name for m in load_bundle().modules]
    with psycopg.connect(server.admin_dsn, autocommit=True) as conn:
        _lock(conn, name, say)
        try:
            exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,))
            if exists.fetchone() is None:
                if not distribute:
                    raise BackendError(f"database {name!r} does not exist")
                prepare_citus_database(server, name, say)
                _comment(conn, name, {"format": MANIFEST_FORMAT, "database": name, "owned": True})
            manifest = _read_manifest(conn, name)
            owned = bool(manifest.get("owned"))
            if replace or not _valid(manifest, name, "citus", distribute):
                with psycopg.connect(server.dsn(name), autocommit=True) as db:
                    present = [
                        str(r[0])
                        for r in db.execute(
                            "SELECT nspname FROM pg_namespace WHERE nspname = ANY(%s) ORDER BY 1",
                            (schemas,),
                        ).fetchall()
                    ]
                    if present and manifest.get("database") != name:
                        raise BackendError(
                            f"database {name!r} already has the schema(s) {', '.join(present)},"
                            " which heron did not build there; seed into an empty database"
                        )
                    # Stamped before the build, so a half-built state is recognised as ours.
                    _comment(
                        conn, name, {"format": MANIFEST_FORMAT, "database": name, "owned": owned}
                    )
                    if present:
                        say(f"{name}: stamp missing or stale; dropping its heron schemas")
                    for schema in present:
                        db.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
                say(f"{name}: seeding scale={scale} seed={seed} layout=citus")
                from pytest_heron.generate import seed_database

                result = seed_database(
                    server.dsn(name),
                    scale,
                    seed,
                    jobs=jobs,
                    progress=seeding_progress(say, name),
                    layout="citus",
                    distribute=distribute,
                )
                extra: dict[str, object] = {"layout": "citus", "distributed": distribute}
                if owned:
                    extra["owned"] = True
                if distribute:
                    with psycopg.connect(server.dsn(name)) as db:
                        extra["nodes"] = _node_count(db)
                manifest = _stamp(conn, name, scale, seed, result, extra)
                say(f"{name}: ready ({result.rows:,} rows in {result.seconds:.1f}s)")
            if distribute:
                _citus_settings(server, name)
                login = _grant_citus_reader(server, name, owned)
            else:
                login = _grant_reader(server, name, exclusive=False)
        finally:
            conn.execute("SELECT pg_advisory_unlock(4242, %s)", (_lock_key(name),))
    if not distribute:
        return _state(server, scale, seed, name, manifest, login, adapter=False)
    state_dsn = server.dsn(name)
    adapter_dsn = None
    if adapter:  # roles are made through the state database, where Citus propagates them
        role, password = create_adapter_role(state_dsn, state_dsn, name, _schemas())
        adapter_dsn = server.dsn(name, user=role, password=password)
    return State(
        scale=scale,
        seed=seed,
        database=name,
        admin_dsn=state_dsn,
        reader_dsn=server.dsn(name, user=login[0], password=login[1]),
        manifest=manifest,
        adapter_dsn=adapter_dsn,
    )


def _node_count(db: psycopg.Connection[tuple[object, ...]]) -> int:
    row = db.execute(
        "SELECT count(*) FROM pg_dist_node WHERE isactive AND noderole = 'primary'"
    ).fetchone()
    return int(str(row[0])) if row else 0


def _grant_citus_reader(server: Server, name: str, owned: bool) -> tuple[str, str]:
    """The scoring role of a citus-layout state. Role statements run in the state database,
    where Citus propagates them (the role, its password and its settings) to every worker;
    the revocations run on every node (:func:`lock_down_citus`). Workers keep their
    default CONNECT for PUBLIC: the coordinator reaches them as the querying role."""
    state_dsn = server.dsn(name)
    nodes = citus_node_dsns(state_dsn, citus_workers(state_dsn))
    if owned:  # on the coordinator, where clients connect; workers take the coordinator's
        close_database(server.admin_dsn, state_dsn, name)
    login = prepare_scoring_role(state_dsn, state_dsn, name, _schemas(), key=_harness_key(server))
    for dsn in nodes:
        lock_down_citus(dsn)
    return login


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
