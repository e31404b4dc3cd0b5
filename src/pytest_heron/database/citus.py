"""States on a Citus cluster: the coordinator's workers, a state database prepared on every
node, the settings gold and every prediction run under there, and the roles made through the
state database so that Citus copies them to the workers (docs/citus.md)."""

from __future__ import annotations

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from pytest_heron.core.errors import BackendError, ConfigError
from pytest_heron.database.manifest import (
    MANIFEST_FORMAT,
    Progress,
    State,
    build_lock,
    comment,
    grant_reader,
    harness_key,
    make_state,
    read_manifest,
    seeding_progress,
    server_label,
    stamp,
    state_name,
    valid,
)
from pytest_heron.database.manifest import schemas as schema_names
from pytest_heron.database.server import Server
from pytest_heron.generate import load_bundle
from pytest_heron.sandbox import (
    close_database,
    create_adapter_role,
    lock_down_citus,
    prepare_scoring_role,
)


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
    with psycopg.connect(server.admin_dsn, autocommit=True) as conn, build_lock(conn, name, say):
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,))
        if exists.fetchone() is None:
            if not distribute:
                raise BackendError(f"database {name!r} does not exist")
            prepare_citus_database(server, name, say)
            comment(conn, name, {"format": MANIFEST_FORMAT, "database": name, "owned": True})
        manifest = read_manifest(conn, name)
        owned = bool(manifest.get("owned"))
        if replace or not valid(manifest, name, "citus", distribute):
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
                comment(conn, name, {"format": MANIFEST_FORMAT, "database": name, "owned": owned})
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
            manifest = stamp(conn, name, scale, seed, result, extra)
            say(f"{name}: ready ({result.rows:,} rows in {result.seconds:.1f}s)")
        if distribute:
            _citus_settings(server, name)
            login = _grant_citus_reader(server, name, owned)
        else:
            login = grant_reader(server, name, exclusive=False)
    if not distribute:
        return make_state(server, scale, seed, name, manifest, login, adapter=False)
    state_dsn = server.dsn(name)
    adapter_dsn = None
    if adapter:  # roles are made through the state database, where Citus propagates them
        role, password = create_adapter_role(state_dsn, state_dsn, name, schema_names())
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
    login = prepare_scoring_role(
        state_dsn, state_dsn, name, schema_names(), key=harness_key(server)
    )
    for dsn in nodes:
        lock_down_citus(dsn)
    return login
