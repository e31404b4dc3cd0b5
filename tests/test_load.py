"""The seeding scheduler's pure parts: which table a statement holds, and in which order lanes
take statements."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_heron.generate.load import _by_cost, _Schedule, _target


def test_target_names_the_table_and_whether_it_is_held_alone() -> None:
    assert _target("CREATE INDEX ix_a ON crm.accounts (owner_user_id);") == ("crm.accounts", False)
    assert _target("CREATE UNIQUE INDEX ux ON crm.accounts (x);") == ("crm.accounts", False)
    assert _target(
        'ALTER TABLE "crm"."accounts" ADD CONSTRAINT "accounts_pkey" PRIMARY KEY (id)'
    ) == (
        "crm.accounts",
        True,
    )
    assert _target("ALTER TABLE crm.leads VALIDATE CONSTRAINT fk_x;") == ("crm.leads", True)
    assert _target("ANALYZE orders.orders") == ("orders.orders", True)


def test_by_cost_puts_the_largest_tables_first_and_keeps_ties_in_order() -> None:
    rows = {"a.big": 100, "a.mid": 10, "a.small": 1}
    stmts = [
        "ANALYZE a.small",
        "CREATE INDEX i1 ON a.mid (x);",
        "ALTER TABLE a.big VALIDATE CONSTRAINT f1;",
        "CREATE INDEX i2 ON a.mid (y);",
        "ANALYZE a.unknown",
    ]
    assert _by_cost(stmts, rows) == [stmts[2], stmts[1], stmts[3], stmts[0], stmts[4]]


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
    schedule = _Schedule(stmts)
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
    schedule = _Schedule(stmts)
    assert schedule.take() == (stmts[0], "s.a", True)
    assert schedule.take() == (stmts[2], "s.b", False)  # c2 waits for c1
    assert schedule.take() == (stmts[3], "s.b", False)  # indexes share a table
    assert schedule.take() is None
    schedule.finish("s.a", True)
    assert schedule.take() == (stmts[1], "s.a", True)
