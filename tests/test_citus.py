"""The ``citus`` key layout: the pure rewrites, the printed script, the Citus-valid golds, and a
tiny seed with the composite keys (distribution skipped) checked on the live catalog of plain
PostgreSQL. The same on a real cluster: tests/test_citus_cluster.py (``pytest -m citus``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql

from pytest_heron.core.errors import BackendError, SpecError
from pytest_heron.database.checksum import table_checksums
from pytest_heron.database.server import Server
from pytest_heron.database.states import State, ensure_state
from pytest_heron.dataset import load_questions
from pytest_heron.dataset.questions import citus_golds, for_layout
from pytest_heron.generate import load_bundle
from pytest_heron.generate.citus import (
    Placement,
    classify,
    declared_keys,
    distribution_statements,
    placement,
    rewrite_fk,
    rewrite_index,
    rewrite_key,
    shard_count,
)
from pytest_heron.generate.ddl import ddl_script

DIST = ["orders.orders", "orders.order_items", "crm.accounts", "catalog.products"]
FK = "ALTER TABLE {} ADD CONSTRAINT fk_x FOREIGN KEY ({}) REFERENCES {}({})"

# ---------------------------------------------------------------------------------------------
# Pure rewrites on handwritten statements
# ---------------------------------------------------------------------------------------------


def test_primary_key_and_unique_get_tenant_id_first() -> None:
    pk = "ALTER TABLE orders.orders ADD CONSTRAINT orders_pkey PRIMARY KEY (id)"
    assert rewrite_key(pk, DIST).endswith("PRIMARY KEY (tenant_id, id)")
    # the quoting _drop_keys uses (psycopg identifiers)
    uq = 'ALTER TABLE "orders"."orders" ADD CONSTRAINT "uq_orders_number" UNIQUE (order_number)'
    assert rewrite_key(uq, DIST) == uq.replace("(order_number)", "(tenant_id, order_number)")
    has = "ALTER TABLE orders.orders ADD CONSTRAINT uq_a UNIQUE (customer_id, tenant_id);"
    assert rewrite_key(has, DIST) == has  # already holds the distribution column
    ref = "ALTER TABLE core.tenants ADD CONSTRAINT uq_tenants_slug UNIQUE (slug)"
    assert rewrite_key(ref, DIST) == ref  # reference table: stays globally unique
    with pytest.raises(SpecError):
        rewrite_key("ALTER TABLE orders.orders ADD CONSTRAINT c CHECK (id > 0)", DIST)


def test_fk_between_tenant_tables_gets_tenant_id_on_both_sides() -> None:
    stmt = FK.format("orders.order_items", "order_id", "orders.orders", "id") + ";"
    assert rewrite_fk(stmt, DIST) == (
        "ALTER TABLE orders.order_items ADD CONSTRAINT fk_x FOREIGN KEY (tenant_id, order_id)"
        " REFERENCES orders.orders(tenant_id, id);"
    )


def test_fk_to_a_target_column_that_is_not_id() -> None:
    stmt = FK.format("orders.order_items", "sku", "catalog.products", "sku")
    assert "(tenant_id, sku) REFERENCES catalog.products(tenant_id, sku)" in rewrite_fk(stmt, DIST)


def test_fks_to_reference_tables_stay() -> None:
    tenant = FK.format("orders.orders", "tenant_id", "core.tenants", "id")
    code = FK.format("orders.orders", "currency_code", "core.currencies", "code")
    assert rewrite_fk(tenant, DIST) == tenant
    assert rewrite_fk(code, DIST) == code


def test_self_reference_stays_inside_the_tenant() -> None:
    stmt = FK.format("crm.accounts", "parent_account_id", "crm.accounts", "id") + " NOT VALID;"
    assert rewrite_fk(stmt, DIST) == (
        "ALTER TABLE crm.accounts ADD CONSTRAINT fk_x FOREIGN KEY (tenant_id, parent_account_id)"
        " REFERENCES crm.accounts(tenant_id, id) NOT VALID;"
    )


def test_fk_that_already_pairs_tenant_ids_stays() -> None:
    stmt = FK.format("orders.order_items", "tenant_id, order_id", "orders.orders", "tenant_id, id")
    assert rewrite_fk(stmt, DIST) == stmt
    bad = FK.format("orders.order_items", "tenant_id, order_id", "orders.orders", "id, tenant_id")
    with pytest.raises(SpecError, match="same position"):
        rewrite_fk(bad, DIST)


def test_reference_to_distributed_fk_is_refused() -> None:
    stmt = FK.format("core.tenants", "owner_order_id", "orders.orders", "id")
    with pytest.raises(SpecError, match="Citus forbids"):
        rewrite_fk(stmt, DIST)


def test_set_null_actions_never_clear_tenant_id() -> None:
    base = FK.format("orders.order_items", "order_id", "orders.orders", "id")
    got = rewrite_fk(base + " ON DELETE SET NULL;", DIST)
    assert got.endswith("(tenant_id, id) ON DELETE SET NULL (order_id);")
    got = rewrite_fk(base + " ON DELETE SET DEFAULT ON UPDATE CASCADE", DIST)
    assert got.endswith(" ON DELETE SET DEFAULT (order_id) ON UPDATE CASCADE")
    assert rewrite_fk(base + " ON DELETE CASCADE", DIST).endswith(" ON DELETE CASCADE")
    with pytest.raises(SpecError, match="ON UPDATE SET NULL"):
        rewrite_fk(base + " ON UPDATE SET NULL", DIST)


def test_indexes() -> None:
    plain = "CREATE INDEX ix_orders_customer_id ON orders.orders (customer_id);"
    assert rewrite_index(plain, DIST) == plain
    unique = "CREATE UNIQUE INDEX ux_orders_ref ON orders.orders (external_ref) WHERE x;"
    assert rewrite_index(unique, DIST) == unique.replace(
        "(external_ref)", "(tenant_id, external_ref)"
    )
    with pytest.raises(SpecError):
        rewrite_index("CREATE UNIQUE INDEX ux ON orders.orders (lower(email));", DIST)


def test_declared_keys_refuse_spellings_they_cannot_read() -> None:
    with pytest.raises(SpecError, match="cannot read the key"):
        declared_keys("CREATE TABLE a.b (\n    x text UNIQUE,\n    y int\n);")


def test_placement_of_the_bundle() -> None:
    bundle = load_bundle()
    place = placement(bundle)
    assert set(place.distributed) | set(place.reference) == set(bundle.tables)
    assert "core.tenants" in place.reference and "core.fx_rates" in place.reference
    assert "orders.order_items" in place.distributed
    for fq in place.distributed:
        assert "tenant_id" in bundle.table(fq).column_names
    assert list(place.distributed) == sorted(place.distributed)


def test_distribution_statements_order() -> None:
    place = classify({"b.x": ["tenant_id"], "a.y": ["tenant_id"], "c.r": ["code"]})
    assert place == Placement(("a.y", "b.x"), ("c.r",))
    assert distribution_statements(place) == [
        "CREATE EXTENSION IF NOT EXISTS citus;",
        "SELECT create_reference_table('c.r');",
        "SELECT create_distributed_table('a.y', 'tenant_id', colocate_with => 'none');",
        "SELECT create_distributed_table('b.x', 'tenant_id', colocate_with => 'a.y');",
    ]


def test_script_is_deterministic_and_places_every_table() -> None:
    script = ddl_script("citus")
    assert script == ddl_script("citus")
    lines = script.splitlines()
    place = placement(load_bundle())
    for fq in place.distributed:
        assert sum(f"create_distributed_table('{fq}', 'tenant_id'," in x for x in lines) == 1, fq
    for fq in place.reference:
        assert lines.count(f"SELECT create_reference_table('{fq}');") == 1, fq
    assert lines.count("CREATE EXTENSION IF NOT EXISTS citus;") == 1
    assert len([x for x in lines if "create_" in x and x.startswith("SELECT")]) == len(
        load_bundle().tables
    )
    assert "citus" not in ddl_script("standard").lower()


# ---------------------------------------------------------------------------------------------
# A tiny seed with the composite keys, on the embedded server
# ---------------------------------------------------------------------------------------------

CITUS_DB = "heron_test_citus_keys"


def _recreate(server: Server, name: str) -> None:
    with psycopg.connect(server.admin_dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def _drop(server: Server, name: str) -> None:
    with psycopg.connect(server.admin_dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


@pytest.fixture(scope="module")
def citus_state(server: Server) -> Iterator[State]:
    _recreate(server, CITUS_DB)
    yield ensure_state(
        server, "tiny", 42, database=CITUS_DB, layout="citus", distribute=False, jobs=2
    )
    _drop(server, CITUS_DB)


def _constraints(dsn: str) -> list[tuple[Any, ...]]:
    """``(table, name, type, columns, referenced table, referenced columns, validated)``."""
    schemas = [m.name for m in load_bundle().modules]
    with psycopg.connect(dsn) as conn:
        return conn.execute(
            """SELECT k.conrelid::regclass::text, k.conname, k.contype,
                      ARRAY(SELECT a.attname::text FROM unnest(k.conkey) WITH ORDINALITY u(n, i)
                            JOIN pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = u.n
                            ORDER BY u.i),
                      k.confrelid::regclass::text,
                      ARRAY(SELECT a.attname::text FROM unnest(k.confkey) WITH ORDINALITY u(n, i)
                            JOIN pg_attribute a ON a.attrelid = k.confrelid AND a.attnum = u.n
                            ORDER BY u.i),
                      k.convalidated, pg_get_constraintdef(k.oid)
               FROM pg_constraint k JOIN pg_namespace n ON n.oid = k.connamespace
               WHERE n.nspname = ANY(%s) AND k.contype IN ('p', 'u', 'f')
               ORDER BY 1, 2""",
            (schemas,),
        ).fetchall()


def _tenant_tables(dsn: str) -> set[str]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT table_schema || '.' || table_name FROM information_schema.columns"
            " WHERE column_name = 'tenant_id' AND table_schema = ANY(%s)",
            ([m.name for m in load_bundle().modules],),
        ).fetchall()
    return {str(r[0]) for r in rows}


def test_catalog_of_the_citus_layout(citus_state: State, tiny_state: State) -> None:
    tenant = _tenant_tables(citus_state.admin_dsn)
    assert tenant == set(placement(load_bundle()).distributed)  # specs agree with the catalog
    keys = fks = 0
    for table, name, kind, cols, target, refcols, valid, _ in _constraints(citus_state.admin_dsn):
        if kind in ("p", "u") and table in tenant:
            keys += 1
            assert "tenant_id" in cols, (name, cols)
        if kind == "f":
            fks += 1
            assert valid, name  # every FK was validated against the data
            assert not (table not in tenant and target in tenant), name  # reference -> tenant
            if table in tenant and target in tenant:
                assert "tenant_id" in cols, name
                assert cols.index("tenant_id") == refcols.index("tenant_id"), name
    assert keys >= len(tenant)  # at least a primary key each
    standard = _constraints(tiny_state.admin_dsn)
    assert fks == sum(1 for c in standard if c[2] == "f")
    assert len(_constraints(citus_state.admin_dsn)) == len(standard)
    self_refs = [c for c in _constraints(citus_state.admin_dsn) if c[2] == "f" and c[0] == c[4]]
    assert len(self_refs) == 5 and all(c[3][0] == c[5][0] == "tenant_id" for c in self_refs)


def test_same_data_as_the_standard_layout(citus_state: State, tiny_state: State) -> None:
    schemas = [m.name for m in load_bundle().modules]
    citus_sums = list(table_checksums(citus_state.admin_dsn, schemas))
    assert len(citus_sums) == len(load_bundle().tables)
    assert citus_sums == list(table_checksums(tiny_state.admin_dsn, schemas))


def test_manifest_records_the_layout_and_is_reused(server: Server, citus_state: State) -> None:
    assert citus_state.manifest["layout"] == "citus"
    assert citus_state.manifest["distributed"] is False
    again = ensure_state(server, "tiny", 42, database=CITUS_DB, layout="citus", distribute=False)
    assert again.manifest["built_at"] == citus_state.manifest["built_at"]
    with pytest.raises(BackendError, match="citus-layout state"):
        ensure_state(server, "tiny", 42, database=CITUS_DB)  # never mistaken for standard
    with psycopg.connect(citus_state.reader_dsn) as conn:  # the reader can read it
        assert conn.execute("SELECT count(*) FROM orders.orders").fetchone() == (
            citus_state.manifest["row_counts"]["orders.orders"],  # type: ignore[index]
        )


def test_printed_script_builds_the_same_keys_as_the_loader(
    server: Server, citus_state: State
) -> None:
    name = "heron_test_citus_script"
    _recreate(server, name)
    try:
        with psycopg.connect(server.dsn(name), autocommit=True) as conn:
            conn.execute(ddl_script("citus", distribute=False))
        printed = [c[:6] + c[7:] for c in _constraints(server.dsn(name))]
    finally:
        _drop(server, name)
    assert printed == [c[:6] + c[7:] for c in _constraints(citus_state.admin_dsn)]


def test_schemas_heron_did_not_build_are_never_dropped(server: Server) -> None:
    name = "heron_test_citus_foreign"
    _recreate(server, name)
    try:
        with psycopg.connect(server.dsn(name), autocommit=True) as conn:
            conn.execute("CREATE SCHEMA core; CREATE TABLE core.mine (x int)")
        with pytest.raises(BackendError, match="heron did not build"):
            ensure_state(server, "tiny", 42, database=name, layout="citus", distribute=False)
        with psycopg.connect(server.dsn(name)) as conn:
            assert conn.execute("SELECT to_regclass('core.mine') IS NOT NULL").fetchone() == (True,)
    finally:
        _drop(server, name)


def test_citus_golds_only_add_tenant_conditions() -> None:
    """Each Citus-valid gold is one of the built-in questions, says why, and only adds
    ``tenant_id`` equalities (its results equal the original's: see the file's header)."""
    questions = load_questions()
    golds = citus_golds()
    assert golds and set(golds) <= {q.id for q in questions}
    swapped = {q.id: q.gold_sql for q in for_layout(questions, "citus")}
    assert for_layout(questions, "standard") == questions
    for q in questions:
        if q.id not in golds:
            assert swapped[q.id] == q.gold_sql
            continue
        sql, reason = golds[q.id]
        assert swapped[q.id] == sql != q.gold_sql and "tenant_id" in reason
        added = sql.count(".tenant_id = ") - q.gold_sql.count(".tenant_id = ")
        assert added >= 1, q.id


def test_shard_counts_and_the_anchor_statement() -> None:
    assert shard_count("tiny") < shard_count("small") < shard_count("bench") == 32
    place = classify({"a.y": ["tenant_id"], "b.x": ["tenant_id"]})
    first = distribution_statements(place, 4)[1]
    assert first.endswith("colocate_with => 'none', shard_count => 4);")
