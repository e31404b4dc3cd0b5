"""The seeding scheduler's pure parts: which table a statement holds, in which order lanes
take statements, which statements make each table; and that a seeded state's catalog is the one
the printed DDL builds."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import psycopg
from hypothesis import given, settings
from hypothesis import strategies as st
from psycopg import sql

from pytest_heron.database.server import Server
from pytest_heron.database.states import State
from pytest_heron.dataset import split_statements
from pytest_heron.generate.ddl import ddl_script, table_ddl
from pytest_heron.generate.lanes import Schedule, by_cost, target
from pytest_heron.generate.spec import load_bundle


def test_target_names_the_table_and_whether_it_is_held_alone() -> None:
    assert target("CREATE INDEX ix_a ON crm.accounts (owner_user_id);") == ("crm.accounts", False)
    assert target("CREATE UNIQUE INDEX ux ON crm.accounts (x);") == ("crm.accounts", False)
    assert target(
        'ALTER TABLE "crm"."accounts" ADD CONSTRAINT "accounts_pkey" PRIMARY KEY (id)'
    ) == (
        "crm.accounts",
        True,
    )
    assert target("ALTER TABLE crm.leads VALIDATE CONSTRAINT fk_x;") == ("crm.leads", True)
    assert target("ANALYZE orders.orders") == ("orders.orders", True)


def test_by_cost_puts_the_largest_tables_first_and_keeps_ties_in_order() -> None:
    rows = {"a.big": 100, "a.mid": 10, "a.small": 1}
    stmts = [
        "ANALYZE a.small",
        "CREATE INDEX i1 ON a.mid (x);",
        "ALTER TABLE a.big VALIDATE CONSTRAINT f1;",
        "CREATE INDEX i2 ON a.mid (y);",
        "ANALYZE a.unknown",
    ]
    assert by_cost(stmts, rows) == [stmts[2], stmts[1], stmts[3], stmts[0], stmts[4]]


_STATEMENTS = st.lists(
    st.tuples(st.sampled_from(["s.a", "s.b", "s.c"]), st.booleans()), min_size=1, max_size=25
)


@given(_STATEMENTS, st.lists(st.integers(0, 10**6), min_size=200, max_size=200), st.integers(1, 4))
@settings(max_examples=300, deadline=None)
def test_schedule_never_runs_conflicting_statements_together(
    specs: list[tuple[str, bool]], choices: list[int], lanes: int
) -> None:
    stmts = [
        f"ALTER TABLE {t} VALIDATE CONSTRAINT c{i};" if alone else f"CREATE INDEX i{i} ON {t} (x);"
        for i, (t, alone) in enumerate(specs)
    ]
    schedule = Schedule(stmts)
    running: list[tuple[str, str, bool]] = []
    started: list[str] = []
    picks = iter(choices)
    while schedule.pending or running:
        while len(running) < lanes and (got := schedule.take()) is not None:
            stmt, table, alone = got
            others = [r for r in running if r[1] == table]
            assert not (others and (alone or any(r[2] for r in others))), (stmt, running)
            running.append(got)
            started.append(stmt)
        assert running, "the schedule stalled with statements pending"
        stmt, table, alone = running.pop(next(picks, 0) % len(running))
        schedule.finish(table, alone)
    assert sorted(started) == sorted(stmts)


def test_schedule_takes_the_first_free_statement_in_order() -> None:
    stmts = [
        "ALTER TABLE s.a VALIDATE CONSTRAINT c1;",
        "ALTER TABLE s.a VALIDATE CONSTRAINT c2;",
        "CREATE INDEX i1 ON s.b (x);",
        "CREATE INDEX i2 ON s.b (y);",
    ]
    schedule = Schedule(stmts)
    assert schedule.take() == (stmts[0], "s.a", True)
    assert schedule.take() == (stmts[2], "s.b", False)  # c2 waits for c1
    assert schedule.take() == (stmts[3], "s.b", False)  # indexes share a table
    assert schedule.take() is None
    schedule.finish("s.a", True)
    assert schedule.take() == (stmts[1], "s.a", True)


def test_table_ddl_gives_each_table_its_create_then_its_comments() -> None:
    bundle = load_bundle()
    made = table_ddl(bundle)
    assert made is not None
    schemas, tables = made
    assert sorted(tables) == sorted(bundle.tables)
    for fq, stmts in tables.items():
        assert stmts[0].startswith(f"CREATE TABLE {fq} (")
        assert all(
            s.startswith((f"COMMENT ON TABLE {fq} ", f"COMMENT ON COLUMN {fq}.")) for s in stmts[1:]
        )
    created = [s.split()[2] for s in schemas if s.startswith("CREATE SCHEMA")]
    assert created == [m.name for m in bundle.modules]
    every = sum(len(split_statements(m.ddl_tables)) for m in bundle.modules)
    assert len(schemas) + sum(len(stmts) for stmts in tables.values()) == every


def _fake(ddl: str) -> Any:
    return cast(Any, SimpleNamespace(modules=[SimpleNamespace(ddl_tables=ddl)]))


def test_table_ddl_gives_up_on_a_statement_it_cannot_place() -> None:
    ok = "CREATE SCHEMA a;\nCREATE TABLE a.b (x int);\nCOMMENT ON COLUMN a.b.x IS 'y; z';"
    assert table_ddl(_fake(ok)) == (
        ["CREATE SCHEMA a"],
        {"a.b": ["CREATE TABLE a.b (x int)", "COMMENT ON COLUMN a.b.x IS 'y; z'"]},
    )
    assert table_ddl(_fake(ok + "\nCREATE INDEX i ON a.b (x);")) is None
    assert table_ddl(_fake("COMMENT ON TABLE a.b IS 'x';\nCREATE TABLE a.b (x int);")) is None


_CATALOG = {
    "constraints": "SELECT conrelid::regclass::text, conname, contype,"
    " pg_get_constraintdef(oid), convalidated FROM pg_constraint"
    " WHERE connamespace::regnamespace::text = ANY(%s) ORDER BY 1, 2",
    "indexes": "SELECT i.indexrelid::regclass::text, pg_get_indexdef(i.indexrelid)"
    " FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid"
    " WHERE c.relnamespace::regnamespace::text = ANY(%s) ORDER BY 1",
    "columns": "SELECT a.attrelid::regclass::text, a.attnum, a.attname,"
    " format_type(a.atttypid, a.atttypmod), a.attnotnull, a.attidentity,"
    " pg_get_expr(d.adbin, d.adrelid) FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid"
    " LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum"
    " WHERE c.relkind = 'r' AND c.relnamespace::regnamespace::text = ANY(%s)"
    " AND a.attnum > 0 AND NOT a.attisdropped ORDER BY 1, 2",
    "comments": "SELECT d.objoid::regclass::text, d.objsubid, d.description"
    " FROM pg_description d JOIN pg_class c ON c.oid = d.objoid"
    " WHERE d.classoid = 'pg_class'::regclass"
    " AND c.relnamespace::regnamespace::text = ANY(%s) ORDER BY 1, 2",
}


def test_a_seeded_state_has_the_catalog_of_the_printed_ddl(
    server: Server, tiny_state: State
) -> None:
    """The loader makes each table in its load transaction and drops and re-adds its keys
    (read from the DDL text): the keys, NOT NULLs, indexes, defaults and comments it leaves
    are the ones ``heron ddl`` builds."""
    schemas = [m.name for m in load_bundle().modules]
    name = "heron_test_load_printed_ddl"
    drop = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
    with psycopg.connect(server.admin_dsn, autocommit=True) as conn:
        conn.execute(drop)
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        with psycopg.connect(server.dsn(name), autocommit=True) as conn:
            conn.execute(ddl_script("standard"))
        for what, query in _CATALOG.items():
            with psycopg.connect(server.dsn(name)) as printed:
                want = printed.execute(query, (schemas,)).fetchall()
            with psycopg.connect(tiny_state.admin_dsn) as seeded:
                got = seeded.execute(query, (schemas,)).fetchall()
            assert want, what
            assert got == want, what
    finally:
        with psycopg.connect(server.admin_dsn, autocommit=True) as conn:
            conn.execute(drop)
