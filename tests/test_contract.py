"""The schema contract (heron_data/CONVENTIONS.md), enforced on the live catalog of a tiny seed."""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

import psycopg
import pytest

from pytest_heron.generate import Generator, load_bundle
from pytest_heron.generate.estimate import expected_rows

EXPECTED_TABLES = 211
EXPECTED_SCHEMAS = 14
ROW_TARGETS = {"tiny": 200_000, "small": 4_400_000, "bench": 88_000_000, "large": 430_000_000}
SNAKE = re.compile(r"^[a-z][a-z0-9_]*$")


@pytest.fixture(scope="module")
def conn(tiny_state: Any) -> psycopg.Connection[Any]:
    with psycopg.connect(tiny_state.admin_dsn) as c:
        yield c


@pytest.fixture(scope="module")
def schemas() -> list[str]:
    return [m.name for m in load_bundle().modules]


def _rows(conn: psycopg.Connection[Any], sql: str, *args: Any) -> list[tuple[Any, ...]]:
    return conn.execute(sql, args or None).fetchall()


@pytest.fixture(scope="module")
def tables(conn: psycopg.Connection[Any], schemas: list[str]) -> list[str]:
    return [
        f"{s}.{t}"
        for s, t in _rows(
            conn,
            "SELECT table_schema, table_name FROM information_schema.tables"
            " WHERE table_schema = ANY(%s) AND table_type = 'BASE TABLE' ORDER BY 1, 2",
            schemas,
        )
    ]


@pytest.fixture(scope="module")
def columns(conn: psycopg.Connection[Any], schemas: list[str]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = defaultdict(dict)
    for s, t, c, typ, nullable, pos in _rows(
        conn,
        "SELECT table_schema, table_name, column_name, data_type, is_nullable, ordinal_position"
        " FROM information_schema.columns WHERE table_schema = ANY(%s)",
        schemas,
    ):
        out[f"{s}.{t}"][c] = {"type": typ, "nullable": nullable == "YES", "pos": pos}
    return out


@pytest.fixture(scope="module")
def fks(conn: psycopg.Connection[Any], schemas: list[str]) -> list[dict[str, Any]]:
    """Every foreign key: child table/columns -> parent table/columns."""
    rows = _rows(
        conn,
        """SELECT c.conname, cn.nspname || '.' || cl.relname, pn.nspname || '.' || pl.relname,
                  (SELECT array_agg(a.attname ORDER BY k.i) FROM unnest(c.conkey)
                     WITH ORDINALITY k(n, i) JOIN pg_attribute a
                     ON a.attrelid = c.conrelid AND a.attnum = k.n),
                  (SELECT array_agg(a.attname ORDER BY k.i) FROM unnest(c.confkey)
                     WITH ORDINALITY k(n, i) JOIN pg_attribute a
                     ON a.attrelid = c.confrelid AND a.attnum = k.n),
                  c.convalidated
           FROM pg_constraint c
           JOIN pg_class cl ON cl.oid = c.conrelid JOIN pg_namespace cn ON cn.oid = cl.relnamespace
           JOIN pg_class pl ON pl.oid = c.confrelid JOIN pg_namespace pn ON pn.oid = pl.relnamespace
           WHERE c.contype = 'f' AND cn.nspname = ANY(%s) ORDER BY 1""",
        schemas,
    )
    return [
        {"name": n, "child": ch, "parent": pa, "cols": list(cc), "pcols": list(pc), "valid": v}
        for n, ch, pa, cc, pc, v in rows
    ]


def test_table_and_schema_counts(tables: list[str], schemas: list[str]) -> None:
    assert len(schemas) == EXPECTED_SCHEMAS
    assert len(tables) == EXPECTED_TABLES
    assert {t.split(".")[0] for t in tables} == set(schemas)


def test_live_tables_match_the_specs(tables: list[str]) -> None:
    assert sorted(tables) == sorted(load_bundle().tables)


def test_every_table_has_a_primary_key_and_a_comment(
    conn: psycopg.Connection[Any], tables: list[str]
) -> None:
    missing_pk, missing_comment = [], []
    for t in tables:
        pk = _rows(conn, "SELECT 1 FROM pg_index WHERE indrelid = %s::regclass AND indisprimary", t)
        if not pk:
            missing_pk.append(t)
        comment = _rows(conn, "SELECT obj_description(%s::regclass, 'pg_class')", t)[0][0]
        if not comment:
            missing_comment.append(t)
    assert missing_pk == [] and missing_comment == []


def test_names_are_snake_case(columns: dict[str, dict[str, Any]]) -> None:
    bad = [
        f"{t}.{c}"
        for t, cols in columns.items()
        for c in [*t.split("."), *cols]
        if not SNAKE.match(c)
    ]
    assert bad == []


def test_fk_graph_is_one_connected_component(tables: list[str], fks: list[dict[str, Any]]) -> None:
    graph: dict[str, set[str]] = {t: set() for t in tables}
    for fk in fks:
        graph[fk["child"]].add(fk["parent"])
        graph[fk["parent"]].add(fk["child"])
    seen, todo = set(), [tables[0]]
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo.extend(graph[node] - seen)
    assert sorted(set(tables) - seen) == []


def test_tenant_scoped_tables_have_tenant_id_second_not_null_with_fk(
    columns: dict[str, dict[str, Any]], fks: list[dict[str, Any]]
) -> None:
    tenant_fks = {
        fk["child"]
        for fk in fks
        if fk["cols"] == ["tenant_id"] and fk["parent"] == "core.tenants" and fk["pcols"] == ["id"]
    }
    scoped = [t for t, cols in columns.items() if "tenant_id" in cols]
    assert len(scoped) > len(columns) / 2  # most tables are tenant-scoped
    for t in scoped:
        col = columns[t]["tenant_id"]
        assert col["pos"] == 2 and not col["nullable"] and col["type"] == "bigint", t
        assert t in tenant_fks, t


def test_every_fk_column_is_indexed_and_named(
    conn: psycopg.Connection[Any], fks: list[dict[str, Any]]
) -> None:
    unindexed, misnamed = [], []
    for fk in fks:
        table = fk["child"].split(".")[1]
        if fk["name"] != f"fk_{table}_{'_'.join(fk['cols'])}":
            misnamed.append(fk["name"])
        first = _rows(
            conn,
            """SELECT 1 FROM pg_index i JOIN pg_attribute a
               ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
               WHERE i.indrelid = %s::regclass AND a.attname = %s""",
            fk["child"],
            fk["cols"][0],
        )
        if not first:
            unindexed.append(f"{fk['child']}.{fk['cols'][0]}")
    assert unindexed == [] and misnamed == []


def test_every_fk_holds(fks: list[dict[str, Any]]) -> None:
    # Constraints are added after the load (DDL section 2), so a valid constraint proves the data.
    assert fks and all(fk["valid"] for fk in fks)


def test_soft_delete_money_time_and_status_conventions(
    conn: psycopg.Connection[Any], columns: dict[str, dict[str, Any]], fks: list[dict[str, Any]]
) -> None:
    currency_fk_cols = {
        (fk["child"], fk["cols"][0]) for fk in fks if fk["parent"] == "core.currencies"
    }
    problems = []
    for t, cols in columns.items():
        for name, c in cols.items():
            if name == "deleted_at" and (
                c["type"] != "timestamp with time zone" or not c["nullable"]
            ):
                problems.append(f"{t}.deleted_at must be a nullable timestamptz")
            if name.endswith("_minor") and c["type"] != "bigint":
                problems.append(f"{t}.{name} must be bigint")
            if c["type"] == "timestamp without time zone":
                problems.append(f"{t}.{name} must be timestamptz")
            if name == "status" and (c["type"] != "text" or c["nullable"]):
                problems.append(f"{t}.status must be text NOT NULL")
        if any(n.endswith("_minor") for n in cols) and not any(
            (t, n) in currency_fk_cols for n in cols if n.endswith("currency_code")
        ):
            problems.append(f"{t} has money columns but no currency_code FK to core.currencies")
        if "id" in cols:
            created = cols.get("created_at")
            if not created or created["nullable"] or created["type"] != "timestamp with time zone":
                problems.append(f"{t} needs created_at timestamptz NOT NULL")
        if "status" in cols:
            check = _rows(
                conn,
                "SELECT 1 FROM pg_constraint WHERE conrelid = %s::regclass AND contype = 'c'"
                " AND pg_get_constraintdef(oid) LIKE '%%status%%'",
                t,
            )
            if not check:
                problems.append(f"{t}.status has no CHECK listing its values")
    assert problems == []


def test_no_row_references_another_tenant(
    conn: psycopg.Connection[Any], columns: dict[str, dict[str, Any]], fks: list[dict[str, Any]]
) -> None:
    leaks = []
    for fk in fks:
        child, parent = fk["child"], fk["parent"]
        if fk["cols"] == ["tenant_id"] or "tenant_id" not in columns[child]:
            continue
        if "tenant_id" not in columns[parent] or len(fk["cols"]) != 1:
            continue
        n = _rows(
            conn,
            f"SELECT count(*) FROM {child} c JOIN {parent} p ON p.{fk['pcols'][0]} = "
            f"c.{fk['cols'][0]} WHERE p.tenant_id <> c.tenant_id",
        )[0][0]
        if n:
            leaks.append(f"{fk['name']}: {n} rows")
    assert leaks == []


def test_traps_are_present_in_the_data(
    conn: psycopg.Connection[Any], columns: dict[str, dict[str, Any]], fks: list[dict[str, Any]]
) -> None:
    soft = [t for t, cols in columns.items() if "deleted_at" in cols]
    deleted = {
        t: _rows(conn, f"SELECT avg((deleted_at IS NOT NULL)::int) FROM {t}")[0][0] for t in soft
    }
    assert len(soft) >= 5 and all(0 < share < 0.5 for share in deleted.values()), deleted
    currencies = _rows(conn, "SELECT count(DISTINCT currency_code) FROM orders.orders")[0][0]
    assert currencies >= 5
    nullable_fks = [fk for fk in fks if columns[fk["child"]][fk["cols"][0]]["nullable"]]
    with_nulls = [
        fk
        for fk in nullable_fks
        if _rows(conn, f"SELECT count(*) FROM {fk['child']} WHERE {fk['cols'][0]} IS NULL")[0][0]
    ]
    assert len(nullable_fks) >= 10 and len(with_nulls) == len(nullable_fks), [
        fk["name"] for fk in nullable_fks if fk not in with_nulls
    ]
    shared = _rows(
        conn,
        "SELECT count(*) FROM (SELECT company_name FROM orders.customers GROUP BY 1"
        " HAVING count(DISTINCT tenant_id) > 1) s",
    )[0][0]
    assert shared > 0  # the same names recur across tenants
    zones = _rows(conn, "SELECT count(DISTINCT time_zone) FROM core.tenants")[0][0]
    assert zones >= 3


@pytest.mark.parametrize("scale", sorted(ROW_TARGETS))
def test_row_totals_are_within_ten_percent_of_the_targets(scale: str) -> None:
    total = expected_rows(load_bundle(), scale)
    target = ROW_TARGETS[scale]
    assert 0.9 * target <= total <= 1.1 * target, f"{scale}: {total:,} rows vs {target:,}"


@pytest.mark.parametrize("scale", ["tiny", "small", "bench"])
def test_estimates_agree_with_exact_counts(scale: str) -> None:
    exact = sum(Generator(load_bundle(), scale, 42).row_counts().values())
    assert abs(expected_rows(load_bundle(), scale) - exact) <= 0.02 * exact
