"""The audit's own machinery (pure parts), in the default run."""

from __future__ import annotations

from pytest_heron import audit, sandbox
from pytest_heron.audit.gold import TIMEOUT_S, run_gold
from pytest_heron.database.introspect import ForeignKey, by_column, foreign_keys
from pytest_heron.dataset.questions import GoldQuestion
from pytest_heron.sandbox.statement import tables_read


def _q(sql: str, tables: tuple[str, ...], **kw: object) -> GoldQuestion:
    return GoldQuestion(
        id="x1",
        question="?",
        gold_sql=sql,
        gold_tables=tables,
        shape="single",
        retrieval="named",
        **kw,
    )  # type: ignore[arg-type]


def test_tables_read_excludes_ctes_and_keeps_schemas() -> None:
    sql = (
        "WITH t AS (SELECT * FROM orders.orders) "
        "SELECT * FROM t JOIN core.tenants c ON c.id = t.tenant_id"
    )
    assert tables_read(sql) == {"orders.orders", "core.tenants"}


def test_static_problems_find_each_kind() -> None:
    assert audit.static_problems(_q("SELECT 1 FROM orders.orders", ("orders.orders",))) == {}
    wrong = audit.static_problems(_q("SELECT 1 FROM orders.orders", ("core.tenants",)))
    assert "gold_tables" in wrong
    volatile = audit.static_problems(_q("SELECT random() FROM orders.orders", ("orders.orders",)))
    assert "deterministic" in volatile
    assert "deterministic" in audit.static_problems(
        _q("SELECT now() FROM orders.orders", ("orders.orders",))
    )
    limit = audit.static_problems(_q("SELECT id FROM orders.orders LIMIT 3", ("orders.orders",)))
    assert "ordered_limit" in limit
    # a key outside the select list is no problem: scoring recovers it as a hidden column
    hidden = audit.static_problems(
        _q("SELECT id FROM orders.orders ORDER BY placed_at", ("orders.orders",))
    )
    assert hidden == {}


def test_mutants_cover_each_rewrite() -> None:
    sql = (
        "SELECT DISTINCT c.id, sum(o.n), min(o.placed_at), count(o.x) FROM orders.customers c "
        "LEFT JOIN orders.orders o ON o.customer_id = c.id "
        "WHERE c.tenant_id = 1 AND c.deleted_at IS NULL AND o.placed_at >= '2024-01-01' "
        "GROUP BY c.id"
    )
    descs = [d for d, _ in audit.mutants(sql)]
    assert "drop WHERE conjunct: c.tenant_id = 1" in descs
    assert "drop WHERE conjunct: c.deleted_at IS NULL" in descs
    assert any(d.startswith("LEFT JOIN -> INNER JOIN #1") for d in descs)
    assert "drop DISTINCT #1" in descs
    assert "SUM -> AVG #1" in descs and "MIN -> MAX #1" in descs
    assert "COUNT -> COUNT(DISTINCT) #1" in descs
    assert "date 2024-01-01 -> 2024-01-02" in descs
    assert len({s for _, s in audit.mutants(sql)}) == len(descs)  # all different


def test_join_along_a_not_null_fk_is_recognised_as_equivalent() -> None:
    fks = by_column([ForeignKey("orders.orders", "customer_id", "orders.customers", "id", True)])
    sql = "SELECT o.id FROM orders.orders o JOIN orders.customers c ON c.id = o.customer_id"
    assert audit.join_equivalence(sql, 0, fks) is not None
    nullable = by_column(
        [ForeignKey("orders.orders", "customer_id", "orders.customers", "id", False)]
    )
    assert audit.join_equivalence(sql, 0, nullable) is None
    two_column = by_column(
        [ForeignKey("orders.orders", "customer_id", "orders.customers", "id", True, width=2)]
    )
    assert audit.join_equivalence(sql, 0, two_column) is None
    reverse = "SELECT c.id FROM orders.customers c JOIN orders.orders o ON o.customer_id = c.id"
    assert audit.join_equivalence(reverse, 0, fks) is None


def test_kill_rate_skips_equivalents_and_empty_probes() -> None:
    r = audit.MutantResult
    results = {
        "a": [
            r("m1", True, True),
            r("m2", False, True),
            r("m3", False, False),
            r("m4", False, False, "same by construction"),
        ],
        "p": [r("m5", False, False)],
    }
    questions = [_q("SELECT 1", ()), _q("SELECT 1", (), empty_probe=True)]
    questions[0] = GoldQuestion(**{**questions[0].__dict__, "id": "a"})
    questions[1] = GoldQuestion(**{**questions[1].__dict__, "id": "p"})
    rate = audit.kill_rate(results, questions)
    assert (rate.counted, rate.equivalent) == (3, 1)
    assert round(rate.single(), 1) == 33.3 and round(rate.multi(), 1) == 66.7


# -- the audit runs gold through the sandbox's executor, on a real state ------------------------


def test_gold_runs_through_the_one_executor(tiny_state) -> None:  # type: ignore[no-untyped-def]
    sql = "SELECT code, minor_units FROM core.currencies ORDER BY code"
    got = run_gold(tiny_state.admin_dsn, sql)
    same = sandbox.execute(tiny_state.admin_dsn, sql, timeout_s=TIMEOUT_S, guard=False)
    assert got.ok and got.rows and got.columns == ["code", "minor_units"]
    assert got.rows == same.rows
    capped = run_gold(tiny_state.admin_dsn, sql, max_rows=2)
    assert capped.error_kind == "result_too_large"
    broken = audit.state_problems(
        _q("SELECT nope FROM core.currencies", ("core.currencies",)), [tiny_state.admin_dsn]
    )
    assert broken == {"executes": 'state 1: column "nope" does not exist'}
    ok = _q(sql, ("core.currencies",))
    assert audit.state_problems(ok, [tiny_state.admin_dsn, tiny_state.admin_dsn]) == {}


def test_limit_ties_read_only_the_rows_at_the_boundary(tiny_state) -> None:  # type: ignore[no-untyped-def]
    dsn = tiny_state.admin_dsn
    by_units = "SELECT minor_units, code FROM core.currencies ORDER BY minor_units"
    assert audit.limit_ties(dsn, by_units + " LIMIT 1") is None  # JPY alone has 0 minor units
    tie = audit.limit_ties(dsn, by_units + " LIMIT 2")  # GBP and EUR both have 2
    assert tie == "rows 2 and 3 tie on the ORDER BY keys: the LIMIT cuts a tie"
    assert audit.limit_ties(dsn, by_units + ", code LIMIT 2") is None
    few = run_gold(dsn, "SELECT count(*) FROM core.currencies").rows[0][0]
    past_the_end = f"{by_units} LIMIT {few}"
    assert audit.limit_ties(dsn, past_the_end) is None  # no row outside the limit


def test_mutants_run_on_the_state_with_the_keys_given(tiny_state) -> None:  # type: ignore[no-untyped-def]
    q = _q(
        "SELECT o.id FROM orders.orders o JOIN orders.customers c ON c.id = o.customer_id "
        "WHERE o.tenant_id = 1 ORDER BY o.id",
        ("orders.orders", "orders.customers"),
    )
    dsns = [tiny_state.admin_dsn]
    keys = foreign_keys(tiny_state.admin_dsn)
    results = {r.description: r for r in audit.mutant_results(q, dsns, keys)}
    assert results["drop WHERE conjunct: o.tenant_id = 1"].killed_any
    join = next(r for d, r in results.items() if d.startswith("INNER JOIN -> LEFT JOIN #1"))
    assert not join.killed_any and join.equivalent and "NOT NULL" in join.equivalent
    unknown = {r.description: r for r in audit.mutant_results(q, dsns, ())}
    assert unknown[join.description].equivalent is None  # no keys given: no FK reason
