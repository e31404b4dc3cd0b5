"""The audit's own machinery (pure parts), in the default run."""

from __future__ import annotations

from pytest_heron import audit
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
    hidden = audit.static_problems(
        _q("SELECT id FROM orders.orders ORDER BY placed_at", ("orders.orders",))
    )
    assert "order_keys" in hidden


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
    fks = {("orders.orders", "customer_id"): ("orders.customers", "id", True)}
    sql = "SELECT o.id FROM orders.orders o JOIN orders.customers c ON c.id = o.customer_id"
    assert audit.join_equivalence(sql, 0, fks) is not None
    nullable = {("orders.orders", "customer_id"): ("orders.customers", "id", False)}
    assert audit.join_equivalence(sql, 0, nullable) is None
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
