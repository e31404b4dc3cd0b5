"""The seeding scheduler: which table a statement holds, in which order lanes take statements,
which statements make each table, and the lane that adds foreign keys during the load."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from psycopg import sql

from pytest_heron.database.server import Server
from pytest_heron.dataset import split_statements
from pytest_heron.generate.ddl import table_ddl
from pytest_heron.generate.lanes import EarlyForeignKeys, Schedule, by_cost, referenced, target
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


def test_referenced_names_the_table_a_foreign_key_points_at() -> None:
    fk = 'ALTER TABLE a.c ADD CONSTRAINT f FOREIGN KEY (p_id) REFERENCES "a"."p"(id) NOT VALID'
    assert referenced(fk) == "a.p"
    assert referenced("ALTER TABLE a.c ADD CONSTRAINT u UNIQUE (x)") == ""


def test_early_foreign_keys_go_in_once_both_tables_are_loaded(server: Server) -> None:
    name = "heron_test_load_early_keys"
    drop = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
    with psycopg.connect(server.admin_dsn, autocommit=True) as conn:
        conn.execute(drop)
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    dsn = server.dsn(name)

    def key(child: str, parent: str, rule: str) -> tuple[str, str]:
        add = (
            f"ALTER TABLE a.{child} ADD CONSTRAINT {rule} FOREIGN KEY (p_id)"
            f" REFERENCES a.{parent}(id) NOT VALID"
        )
        return add, f"ALTER TABLE a.{child} VALIDATE CONSTRAINT {rule}"

    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(
                "CREATE SCHEMA a; CREATE TABLE a.p (id int PRIMARY KEY);"
                " CREATE TABLE a.q (id int PRIMARY KEY);"
                " CREATE TABLE a.c (p_id int); CREATE TABLE a.d (p_id int);"
                " INSERT INTO a.p VALUES (1), (2); INSERT INTO a.q VALUES (1);"
                " INSERT INTO a.c VALUES (1), (2), (NULL); INSERT INTO a.d VALUES (2)"
            )
        keys = [key("c", "p", "c_p"), key("d", "p", "d_p"), key("c", "q", "c_q")]
        lane = EarlyForeignKeys(dsn, keys)
        lane.loaded("a.c")
        lane.loaded("a.p")  # c -> p is ready; d -> p and c -> q wait for their other table
        left = lane.finish(drain=True)
        with psycopg.connect(dsn) as conn:
            made = conn.execute(
                "SELECT conname, convalidated FROM pg_constraint WHERE contype = 'f' ORDER BY 1"
            ).fetchall()
        assert made == [("c_p", True)] and left == keys[1:]
        broken = EarlyForeignKeys(dsn, [keys[2]])  # a.c holds p_id 2, a.q has no row 2
        broken.loaded("a.c")
        broken.loaded("a.q")
        with pytest.raises(psycopg.errors.ForeignKeyViolation):
            broken.finish(drain=True)
    finally:
        with psycopg.connect(server.admin_dsn, autocommit=True) as conn:
            conn.execute(drop)
