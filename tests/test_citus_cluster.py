"""The Citus tier (``pytest -m citus``): heron on a real Citus cluster.

The coordinator's DSN comes from ``HERON_CITUS_DSN`` (a superuser, or a role as docs/citus.md
describes, on a coordinator whose maintenance database has the citus extension and its workers
registered). Selecting the tier without it fails every test: a tier that skips would pass
without having run. ``scripts/citus_tier.sh`` builds a local 3-node cluster and runs the tier.

What is checked: a tiny/42 citus-layout state seeded through heron has the standard layout's
per-table checksums and the placement docs/citus.md describes; the gold adapter scores 100 %
multi-state on three citus states; and every hostile prediction of the adversarial suite (plus
Citus's own administration functions) is refused with nothing changed on any node.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
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
                    "  ''), ',' ORDER BY rolname) FROM pg_roles WHERE rolname LIKE 'heron%%')"
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
