"""The Citus tier (``pytest -m citus``): heron on a real Citus cluster.

The coordinator's DSN comes from ``HERON_CITUS_DSN`` (a superuser, or a role as docs/citus.md
describes, on a coordinator whose maintenance database has the citus extension and its workers
registered). Selecting the tier without it fails every test: a tier that skips would pass
without having run. ``scripts/citus_tier.sh`` builds a local 3-node cluster and runs the tier.

What is checked: a tiny/42 citus-layout state seeded through heron has the standard layout's
per-table checksums and the placement docs/citus.md describes; the gold adapter scores 100 %
multi-state on three citus states; every hostile prediction of the adversarial suite (plus
Citus's own administration functions) is refused with nothing changed on any node; and a hostile
adapter, run through the harness with its own DSN, is refused whatever node and database it
reaches, with every node's catalogs, roles and data (each shard's checksum) unchanged.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from pytest_heron import sandbox
from pytest_heron.database.checksum import table_checksums, total_line
from pytest_heron.database.citus import citus_node_dsns, citus_workers
from pytest_heron.database.server import Server, from_dsn
from pytest_heron.database.states import State, ensure_state, reader_role
from pytest_heron.generate import load_bundle
from pytest_heron.generate.citus import placement, shard_count
from test_adversarial import CASES, TIMEOUT

pytestmark = pytest.mark.citus

ENV = "HERON_CITUS_DSN"
GOLDEN = Path(__file__).parent / "golden" / "tiny_42.tsv"


def _dsn() -> str:
    dsn = os.environ.get(ENV, "").strip()
    if not dsn:
        pytest.fail(
            f"the citus tier needs {ENV}: the DSN of a Citus coordinator whose maintenance"
            " database has the citus extension and its workers registered (scripts/citus_tier.sh"
            " builds and starts a local cluster and sets it)",
            pytrace=False,
        )
    return dsn


@pytest.fixture(scope="session")
def citus_server() -> Iterator[Server]:
    srv = from_dsn(_dsn())
    yield srv
    srv.stop()


@pytest.fixture(scope="session")
def citus_tiny(citus_server: Server) -> State:
    return ensure_state(citus_server, "tiny", 42, layout="citus", jobs=2)


def _schemas() -> list[str]:
    return [m.name for m in load_bundle().modules]


def test_seeded_state_has_the_standard_checksums(citus_tiny: State) -> None:
    sums = list(table_checksums(citus_tiny.admin_dsn, _schemas()))
    got = [f"{n}\t{r}\t{h}" for n, r, h in [*sums, total_line(sums)]]
    assert got == GOLDEN.read_text(encoding="utf-8").splitlines()


def test_placement_keys_and_manifest(citus_tiny: State) -> None:
    place = placement(load_bundle())
    with psycopg.connect(citus_tiny.admin_dsn) as conn:
        tables = dict(
            conn.execute(
                "SELECT table_name::text, citus_table_type FROM citus_tables ORDER BY 1"
            ).fetchall()
        )
        groups = conn.execute(
            "SELECT count(DISTINCT colocation_id), min(shard_count), max(shard_count)"
            " FROM citus_tables WHERE citus_table_type = 'distributed'"
        ).fetchone()
        fks = conn.execute(
            "SELECT count(*), count(*) FILTER (WHERE NOT convalidated) FROM pg_constraint k"
            " JOIN pg_namespace n ON n.oid = k.connamespace"
            " WHERE k.contype = 'f' AND n.nspname = ANY(%s)",
            (_schemas(),),
        ).fetchone()
        pks = conn.execute(
            "SELECT count(*) FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid"
            " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE k.contype = 'p'"
            " AND n.nspname || '.' || c.relname = ANY(%s)"
            " AND pg_get_constraintdef(k.oid) LIKE 'PRIMARY KEY (tenant_id, %%'",
            (list(place.distributed),),
        ).fetchone()
    assert {t for t, kind in tables.items() if kind == "distributed"} == set(place.distributed)
    assert {t for t, kind in tables.items() if kind == "reference"} == set(place.reference)
    assert groups == (1, shard_count("tiny"), shard_count("tiny"))  # all co-located
    assert fks is not None and fks[0] > 600 and fks[1] == 0  # all validated
    assert pks == (len(place.distributed),)
    manifest = citus_tiny.manifest
    assert (manifest["layout"], manifest["distributed"]) == ("citus", True)
    assert manifest["nodes"] == 1 + len(citus_workers(citus_tiny.admin_dsn))


def test_gold_scores_100_percent_multi_state(tmp_path: Path) -> None:
    """The plugin as users run it: three citus-layout states, every question on every one."""
    out = tmp_path / "results.json"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:randomly",
            "-p",
            "no:cacheprovider",
            "-n",
            "2",
            "-q",
            "--heron-adapter=gold",
            f"--heron-dsn={_dsn()}",
            "--heron-layout=citus",
            "--heron-scale=tiny",
            f"--heron-output={out}",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    assert "layout=citus nodes=3" in run.stdout
    doc = json.loads(out.read_text(encoding="utf-8"))
    conditions = doc["conditions"]
    assert (conditions["layout"], conditions["states"]) == ("citus", 3)
    assert conditions["nodes"] >= 2
    assert doc["metrics"]["ex_multistate"] == 100.0, doc["metrics"]
    assert len(doc["questions"]) >= 100


# -- the sandbox on a cluster --------------------------------------------------------------------

# Citus's own ways to change the cluster, as a prediction would try them.
CITUS_CASES: list[tuple[str, str, set[str | None]]] = [
    (
        "run_command_on_workers",
        "SELECT * FROM run_command_on_workers($$DROP SCHEMA orders CASCADE$$)",
        {"db_error"},
    ),
    (
        "run_command_on_all_nodes",
        "SELECT * FROM run_command_on_all_nodes($$ALTER ROLE CURRENT_USER SUPERUSER$$)",
        {"db_error"},
    ),
    (
        "run_command_on_shards",
        "SELECT * FROM run_command_on_shards('orders.orders', $$TRUNCATE %s$$)",
        {"db_error"},
    ),
    ("citus_add_node", "SELECT citus_add_node('127.0.0.1', 1)", {"db_error"}),
    ("citus_remove_node", "SELECT citus_remove_node('127.0.0.1', 1)", {"db_error"}),
    ("master_add_node", "SELECT master_add_node('127.0.0.1', 1)", {"db_error"}),
    (
        "master_create_empty_shard",
        "SELECT master_create_empty_shard('orders.orders')",
        {"db_error"},
    ),
    (
        "master_remove_metadata",
        "SELECT master_remove_distributed_table_metadata_from_workers("
        "'orders.orders'::regclass, 'orders', 'orders')",
        {"db_error"},
    ),
    ("undistribute_table", "SELECT undistribute_table('orders.orders')", {"db_error"}),
    (
        "create_distributed_table",
        "SELECT create_distributed_table('core.tenants', 'id')",
        {"db_error"},
    ),
    (
        "alter_distributed_table",
        "SELECT alter_distributed_table('orders.orders', shard_count => 2)",
        {"db_error"},
    ),
    (
        "move_shard",
        "SELECT citus_move_shard_placement(1, '127.0.0.1', 1, '127.0.0.1', 2)",
        {"db_error"},
    ),
    ("rebalance", "SELECT rebalance_table_shards()", {"db_error"}),
    ("citus_set_coordinator_host", "SELECT citus_set_coordinator_host('x')", {"db_error"}),
    (
        "worker_apply_shard_ddl",
        "SELECT worker_apply_shard_ddl_command(1, 'DROP TABLE orders.orders')",
        {"db_error"},
    ),
    ("create_restore_point", "SELECT citus_create_restore_point('x')", {"db_error"}),
    ("citus_terminate", "SELECT pg_terminate_backend(pid) FROM citus_stat_activity", {"db_error"}),
    ("job_cancel", "SELECT citus_job_cancel(1)", {"db_error"}),
    # a query Citus runs on the workers must still work (a control)
    (
        "distributed_join",
        "SELECT count(*) FROM orders.orders o JOIN orders.customers c"
        " ON c.tenant_id = o.tenant_id AND c.id = o.customer_id",
        {None},
    ),
]
# Where Citus answers an attack differently, and as safely: it refuses to plan a cartesian
# product of distributed tables at all.
ON_CITUS: dict[str, set[str | None]] = {"cross_join_bomb": {"db_error", "timeout"}}


# Adapter roles live as long as their run (a run drops the stale ones it finds): left out.
ADAPTER_ROLES = "heron\\_adapter\\_%"


def _node_fingerprint(state: State) -> list[Any]:
    """What a prediction could change on any node, cheaply (checked after every attack): on
    every node its relations, nodes, roles and role settings, and the row counts of a few
    tables through the coordinator. The data's full checksums are compared once, after all the
    attacks (:func:`test_data_unchanged_after_the_attacks`)."""
    out: list[Any] = []
    with psycopg.connect(state.admin_dsn) as conn:
        out.append(
            conn.execute(
                "SELECT (SELECT count(*) FROM core.tenants), (SELECT count(*) FROM orders.orders),"
                " (SELECT count(*) FROM orders.order_items), (SELECT count(*) FROM core.currencies)"
            ).fetchall()
        )
    for dsn in citus_node_dsns(state.admin_dsn, citus_workers(state.admin_dsn)):
        with psycopg.connect(dsn) as conn:
            out.append(
                conn.execute(
                    "SELECT (SELECT count(*) FROM pg_class),"
                    " (SELECT md5(string_agg(c.oid::text || c.relname, ',' ORDER BY c.oid))"
                    "  FROM pg_class c),"
                    " (SELECT string_agg(nodename || ':' || nodeport || ':' || isactive, ','"
                    "  ORDER BY nodeid) FROM pg_dist_node),"
                    " (SELECT string_agg(rolname || rolsuper::text || coalesce(rolconfig::text,"
                    "  ''), ',' ORDER BY rolname) FROM pg_roles WHERE rolname LIKE 'heron%%'"
                    "  AND rolname NOT LIKE %s)",
                    (ADAPTER_ROLES,),
                ).fetchall()
            )
    return out


@pytest.fixture(scope="module")
def cluster_before(citus_tiny: State) -> list[Any]:
    return _node_fingerprint(citus_tiny)


@pytest.mark.parametrize(
    ("name", "sql", "allowed"), CASES + CITUS_CASES, ids=[c[0] for c in CASES + CITUS_CASES]
)
def test_hostile_prediction_on_citus(
    name: str, sql: str, allowed: set[str | None], citus_tiny: State, cluster_before: list[Any]
) -> None:
    got = sandbox.execute(citus_tiny.reader_dsn, sql, timeout_s=TIMEOUT)
    allowed = ON_CITUS.get(name, allowed)
    assert got.error_kind in allowed, f"{name}: {got.error_kind}: {got.error}"
    if got.error_kind is not None:
        assert got.error
    assert _node_fingerprint(citus_tiny) == cluster_before, f"{name} changed a node"


def test_data_unchanged_after_the_attacks(citus_tiny: State) -> None:
    sums = list(table_checksums(citus_tiny.admin_dsn, _schemas()))
    got = [f"{n}\t{r}\t{h}" for n, r, h in [*sums, total_line(sums)]]
    assert got == GOLDEN.read_text(encoding="utf-8").splitlines()


def test_reader_settings_reach_every_worker(citus_tiny: State) -> None:
    """The role, its settings and the pinned session reach the workers: the shard queries run
    as the reader, read-only, in UTC (checked from the workers' own view of the session)."""
    role = reader_role(citus_tiny.database)
    got = sandbox.execute(
        citus_tiny.reader_dsn,
        "SELECT * FROM run_command_on_workers($$SELECT current_user$$)",
        timeout_s=5,
    )
    assert got.error_kind == "db_error"  # not for readers; ask the workers as the admin
    for dsn in citus_node_dsns(citus_tiny.admin_dsn, citus_workers(citus_tiny.admin_dsn))[1:]:
        with psycopg.connect(dsn) as conn:
            row = conn.execute(
                "SELECT rolconfig FROM pg_roles WHERE rolname = %s", (role,)
            ).fetchone()
            database = conn.execute(
                "SELECT s.setconfig FROM pg_db_role_setting s JOIN pg_database d"
                " ON d.oid = s.setdatabase WHERE d.datname = current_database()"
                " AND s.setrole = 0"
            ).fetchone()
        assert row is not None, f"{role} missing on {dsn}"
        config = set(row[0])
        assert {"default_transaction_read_only=on", "statement_timeout=300s"} <= config
        assert database is not None and "citus.propagate_set_commands=local" in database[0]
    timezone = sandbox.execute(
        citus_tiny.reader_dsn,
        "SELECT count(*) FROM orders.orders WHERE date_trunc('day', created_at)"
        " <> date_trunc('day', created_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'",
        timeout_s=10,
    )
    assert timezone.ok and timezone.rows == [(0,)], timezone.error  # workers compute in UTC


def test_reader_cannot_write_on_a_worker_directly(citus_tiny: State) -> None:
    """The reader's role exists on the workers too: connecting there straight does not let it
    write a shard (read-only by default, and SELECT is all it holds)."""
    workers = citus_workers(citus_tiny.admin_dsn)
    host, port = workers[0]
    direct = make_conninfo(citus_tiny.reader_dsn, host=host, port=str(port))
    with psycopg.connect(citus_tiny.admin_dsn) as conn:
        row = conn.execute(
            "SELECT shard_name FROM citus_shards WHERE table_name = 'orders.orders'::regclass"
            " AND nodename = %s AND nodeport = %s ORDER BY shardid LIMIT 1",
            (host, port),
        ).fetchone()
    assert row is not None
    before = _node_fingerprint(citus_tiny)
    with psycopg.connect(direct, autocommit=True) as conn:
        for stmt in (
            f"DELETE FROM orders.{row[0]}",
            f"SET default_transaction_read_only = off; DELETE FROM orders.{row[0]}",
        ):
            with pytest.raises(psycopg.Error):
                conn.execute(stmt)
    assert _node_fingerprint(citus_tiny) == before


# -- a hostile adapter on a cluster --------------------------------------------------------------

HOSTILE_QUESTIONS = """\
- id: c001
  question: How many tenants are there?
  gold_sql: SELECT count(*) AS n FROM core.tenants
  gold_tables: [core.tenants]
  shape: single
  retrieval: named
- id: c002
  question: How many orders are there?
  gold_sql: SELECT count(*) AS n FROM orders.orders
  gold_tables: [orders.orders]
  shape: single
  retrieval: named
- id: c003
  question: How many currencies are there?
  gold_sql: SELECT count(*) AS n FROM core.currencies
  gold_tables: [core.currencies]
  shape: single
  retrieval: named
"""

# The adapter's own process, with its own DSN (the adapter role of the first citus state): it
# reads the cluster's layout from the catalogs any role may read, then tries to change the
# cluster through the coordinator, its maintenance database, every worker directly (the state
# database, its shards, another state's database, the maintenance database), and reports each
# attempt as its conditions. Its predictions are hostile too, but for c002.
HOSTILE_ADAPTER = r'''
import zlib

import psycopg
from psycopg.conninfo import make_conninfo

SAFE = "SET statement_timeout = '10s'; SET default_transaction_read_only = off"


def attempt(dsn, statements):
    """'refused ...' when the connection or any statement fails, else 'DONE ...'."""
    try:
        with psycopg.connect(dsn, autocommit=True, connect_timeout=10) as conn:
            conn.execute(SAFE)
            rows = None
            for stmt in statements:
                cur = conn.execute(stmt)
                rows = cur.fetchall() if cur.description else None
                # run_command_on_* report a failure on a node as a row, not an error
                if rows and stmt.lstrip().upper().startswith("SELECT * FROM RUN_COMMAND_ON"):
                    if not any(r[2] is True for r in rows):
                        return "refused on every node: " + "; ".join(str(r[3]) for r in rows)[:300]
            return "DONE " + repr(rows)[:300]
    except Exception as exc:
        return "refused " + type(exc).__name__ + ": " + str(exc).splitlines()[0][:300]


def layout(dsn):
    with psycopg.connect(dsn, autocommit=True) as conn:
        database = conn.info.dbname
        workers = conn.execute(
            "SELECT nodename, nodeport FROM pg_dist_node WHERE groupid <> 0 ORDER BY nodeid"
        ).fetchall()
        shards = conn.execute(
            "SELECT logicalrelid::text, shard_name(logicalrelid, shardid) FROM pg_dist_shard"
            " WHERE logicalrelid IN ('orders.orders'::regclass, 'core.currencies'::regclass)"
            " ORDER BY shardid"
        ).fetchall()
    return database, workers, shards


def other_states(node):
    with psycopg.connect(node, autocommit=True, connect_timeout=10) as conn:
        return [
            r[0]
            for r in conn.execute(
                "SELECT datname FROM pg_database WHERE datname LIKE 'heron%%'"
                " AND datname <> current_database() ORDER BY 1"
            ).fetchall()
        ]


class Hostile:
    name = "citus-hostile"
    version = "1"

    def conditions(self, ctx):
        state = ctx.dsn
        maintenance = make_conninfo(state, dbname="postgres")
        database, workers, shards = layout(state)
        scorer = f"heron_reader_{zlib.crc32(database.encode()):08x}"  # the one scoring here
        found = {"workers": len(workers), "shards": len(shards)}
        on_state = {
            "delete": ["DELETE FROM orders.orders"],
            "update_reference": ["UPDATE core.currencies SET code = 'XXX'"],
            "truncate": ["TRUNCATE core.tenants CASCADE"],
            "create_table": ["CREATE TABLE core.planted (x int)"],
            "drop_schema": ["DROP SCHEMA orders CASCADE"],
            "create_role": ["CREATE ROLE heron_planted"],
            "superuser": ["ALTER ROLE CURRENT_USER SUPERUSER"],
            "scoring_role": [f'ALTER ROLE "{scorer}" SET default_transaction_read_only = off'],
            "database_setting": [
                f'ALTER DATABASE "{database}" SET citus.enable_repartition_joins = off'
            ],
            "run_command_on_workers": [
                "SELECT * FROM run_command_on_workers($$DROP SCHEMA orders CASCADE$$)"
            ],
            "citus_add_node": ["SELECT citus_add_node('127.0.0.1', 1)"],
            "undistribute_table": ["SELECT undistribute_table('orders.orders')"],
            "create_distributed_table": [
                "SELECT create_distributed_table('core.currencies', 'code')"
            ],
        }
        for key, stmts in on_state.items():
            found[f"coordinator {key}"] = attempt(state, stmts)
        on_maintenance = {
            "run_command_on_workers": [
                "SELECT * FROM run_command_on_workers($$CREATE TABLE planted (x int)$$)"
            ],
            "citus_add_node": ["SELECT citus_add_node('127.0.0.1', 1)"],
            "create_database": ["CREATE DATABASE heron_planted"],
            "alter_system": ["ALTER SYSTEM SET statement_timeout = 0"],
            "create_table": ["CREATE TABLE planted (x int)"],
        }
        if workers:
            host, port = workers[0]
            on_maintenance["citus_remove_node"] = [f"SELECT citus_remove_node('{host}', {port})"]
        for key, stmts in on_maintenance.items():
            found[f"coordinator postgres {key}"] = attempt(maintenance, stmts)
        for i, (host, port) in enumerate(workers):
            node = make_conninfo(state, host=host, port=str(port))
            shard = "SET citus.override_table_visibility = off;" \
                    " SET citus.enable_manual_changes_to_shards = on"
            on_worker = {
                "delete": ["DELETE FROM orders.orders"],
                "drop_schema": ["DROP SCHEMA orders CASCADE"],
                "run_command_on_workers": [
                    "SELECT * FROM run_command_on_workers($$TRUNCATE core.tenants CASCADE$$)"
                ],
                "scoring_role": [f'ALTER ROLE "{scorer}" SET statement_timeout = 0'],
            }
            for table, name in shards:
                kind = table.split(".")[1]  # shard_name gives schema.table_shardid
                on_worker[f"shard {kind} {name}"] = [
                    shard, f"DELETE FROM {name}", f"TRUNCATE {name}"
                ]
            for key, stmts in on_worker.items():
                found[f"worker{i} {key}"] = attempt(node, stmts)
            found[f"worker{i} postgres create_table"] = attempt(
                make_conninfo(node, dbname="postgres"), ["CREATE TABLE planted (x int)"]
            )
            for other in other_states(node):
                found[f"worker{i} {other} read"] = attempt(
                    make_conninfo(node, dbname=other),
                    ["SELECT count(*) FROM core.tenants"],
                )
        return found

    def prepare(self, ctx):
        pass

    def generate(self, q):
        if q.id == "c001":
            return "SELECT * FROM run_command_on_workers($$DROP SCHEMA orders CASCADE$$)"
        if q.id == "c003":
            return "SET default_transaction_read_only = off; DELETE FROM core.currencies"
        return "SELECT count(*) AS n FROM orders.orders"
'''


def _cluster_snapshot(state: State) -> list[Any]:
    """Everything a hostile adapter could change on any node: on every node, the state
    database's and the maintenance database's relations, nodes and heron roles (settings
    included), and the state's data as the node holds it (every local table but the shells of
    distributed and reference tables: the shards and reference copies, one checksum each)."""
    out: list[Any] = [_node_fingerprint(state)]
    nodes = citus_node_dsns(state.admin_dsn, citus_workers(state.admin_dsn))
    for dsn in nodes:
        with psycopg.connect(make_conninfo(dsn, dbname="postgres")) as conn:
            out.append(
                conn.execute(
                    "SELECT (SELECT md5(string_agg(c.oid::text || c.relname, ',' ORDER BY c.oid))"
                    "  FROM pg_class c), (SELECT string_agg(datname, ',' ORDER BY datname)"
                    "  FROM pg_database), (SELECT string_agg(nodename || ':' || nodeport, ','"
                    "  ORDER BY nodeid) FROM pg_dist_node),"
                    " (SELECT string_agg(rolname || rolsuper::text || coalesce(rolconfig::text,"
                    "  ''), ',' ORDER BY rolname) FROM pg_roles WHERE rolname NOT LIKE %s)",
                    (ADAPTER_ROLES,),
                ).fetchall()
            )
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("SET citus.override_table_visibility = off")
            tables = conn.execute(
                "SELECT c.oid::regclass::text FROM pg_class c JOIN pg_namespace n"
                " ON n.oid = c.relnamespace WHERE c.relkind = 'r' AND n.nspname = ANY(%s)"
                " AND NOT EXISTS (SELECT 1 FROM pg_dist_partition p WHERE p.logicalrelid = c.oid)"
                " ORDER BY 1",
                (_schemas(),),
            ).fetchall()
            sums = []
            for (table,) in tables:
                row = conn.execute(
                    f"SELECT count(*), sum(('x' || left(md5(t::text), 15))::bit(60)::bigint)"
                    f" FROM {table} t"
                ).fetchone()
                sums.append((table, row))
            out.append(sums)
    return out


def test_a_hostile_adapter_changes_nothing_on_any_node(
    citus_server: Server, citus_tiny: State, tmp_path: Path
) -> None:
    """Issue 31 item 3 for the adapter: run through the real harness (its own, jailed process
    where the machine allows, with the adapter role's DSN), it tries to change the cluster from
    every node it can reach; every attempt is refused, its hostile predictions score nothing,
    and every node's catalogs, roles and data are as before."""
    before = _cluster_snapshot(citus_tiny)
    assert sum(len(part) for part in before[1:] if isinstance(part, list)) > 200
    folder = Path(tempfile.mkdtemp(prefix="heron-citus-hostile-"))
    try:
        folder.chmod(0o755)  # the jailed adapter's user reads its code here
        (folder / "citus_hostile.py").write_text(HOSTILE_ADAPTER, encoding="utf-8")
        (folder / "questions").mkdir(mode=0o755)
        (folder / "questions" / "set.yaml").write_text(HOSTILE_QUESTIONS, encoding="utf-8")
        for path in (folder / "citus_hostile.py", folder / "questions" / "set.yaml"):
            path.chmod(0o644)
        out = tmp_path / "results.json"
        env = {**os.environ, "PYTHONPATH": str(folder), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
        run = subprocess.run(
            [
                *(sys.executable, "-m", "pytest", "-p", "pytest_heron.plugin", "-q"),
                "--heron-adapter=citus_hostile:Hostile",
                f"--heron-questions={folder / 'questions'}",
                f"--heron-dsn={_dsn()}",
                *("--heron-layout=citus", "--heron-scale=tiny", "--heron-states=1"),
                f"--heron-output={out}",
            ],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    assert out.is_file(), run.stdout[-4000:] + run.stderr[-4000:]
    doc = json.loads(out.read_text(encoding="utf-8"))
    found: dict[str, Any] = doc["conditions"]["adapter_conditions"]
    workers = len(citus_workers(citus_tiny.admin_dsn))
    assert found["workers"] == workers and found["shards"] == shard_count("tiny") + 1
    attempts = {k: v for k, v in found.items() if k not in ("workers", "shards")}
    assert len([k for k in attempts if k.startswith("coordinator ")]) == 19, sorted(attempts)
    done = {k: v for k, v in attempts.items() if not v.startswith("refused")}
    assert done == {}, done
    for i in range(workers):
        # each worker holds some of the shards: there the refusal is the sandbox's, not a
        # missing table's
        mine = {k: v for k, v in attempts.items() if k.startswith(f"worker{i} ")}
        assert len(mine) >= 4 + 5 + 1, sorted(mine)
        for kind in ("orders", "currencies"):
            refusals = [v for k, v in mine.items() if k.startswith(f"worker{i} shard {kind} ")]
            assert any("permission denied" in v for v in refusals), (i, kind, refusals)
    by_id = {q["id"]: q for q in doc["questions"]}
    assert by_id["c002"]["correct"] is True, by_id["c002"]
    assert by_id["c001"]["correct"] is False and by_id["c001"]["error_kind"] == "db_error"
    assert by_id["c003"]["correct"] is False and by_id["c003"]["error_kind"] is not None
    assert _cluster_snapshot(citus_tiny) == before
