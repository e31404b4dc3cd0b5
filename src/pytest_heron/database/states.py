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

import os

import psycopg
from psycopg import sql

from pytest_heron.core.errors import BackendError, ConfigError
from pytest_heron.database.manifest import (
    MANIFEST_FORMAT as MANIFEST_FORMAT,
)
from pytest_heron.database.manifest import (
    Progress,
    State,
    build_lock,
    drop_database,
    grant_reader,
    layout_of,
    make_state,
    read_manifest,
    seeding_progress,
    stamp,
    state_name,
    valid,
)
from pytest_heron.database.manifest import StateRef as StateRef
from pytest_heron.database.manifest import reader_role as reader_role
from pytest_heron.database.server import Server
from pytest_heron.generate import LAYOUTS
from pytest_heron.sandbox import DANGEROUS_FUNCTIONS as roles_DANGEROUS_FUNCTIONS
from pytest_heron.sandbox import close_database
from pytest_heron.sandbox import lock_down as roles_lock_down

# Kept here for existing imports; the list and the revocation live in sandbox/py.
DANGEROUS_FUNCTIONS = roles_DANGEROUS_FUNCTIONS
lock_down = roles_lock_down


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
    with psycopg.connect(server.admin_dsn, autocommit=True) as conn, build_lock(conn, name, say):
        manifest = read_manifest(conn, name)
        if layout_of(manifest) != "standard":
            raise BackendError(
                f"database {name!r} holds a {layout_of(manifest)}-layout state; heron will not"
                " replace it with a standard one: choose another --database, or drop it"
                " yourself"
            )
        if replace or not valid(manifest, name):
            if manifest or replace:
                say(f"{name}: stamp missing or stale; rebuilding")
            drop_database(conn, name)
            drop_database(conn, building)
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
            manifest = stamp(conn, name, scale, seed, result, {"layout": "standard"})
            say(f"{name}: ready ({result.rows:,} rows in {result.seconds:.1f}s)")
        login = grant_reader(server, name)
        roles_lock_down(server.dsn(name))
    return make_state(server, scale, seed, name, manifest, login, adapter)


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
