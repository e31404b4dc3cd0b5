"""The adapter pytest-heron runs: ``--heron-adapter=acme_sql.adapter:AcmeSql``.

A real system would read ``ctx.schema_ddl`` and ask its model; this stand-in knows three
answers by heart (one of them wrong on purpose: it forgets the soft-delete filter) and says
``SELECT 1`` to everything else, so its score is low and stable, which is what a CI gate needs
to show.
"""

from __future__ import annotations

from pytest_heron import BenchmarkContext, Prediction, Question

KNOWN = {
    "q001": (
        "SELECT count(*) FROM orders.customers WHERE tenant_id = 2 AND deleted_at IS NULL",
        ["orders.customers"],
    ),
    "q002": (
        "SELECT currency_code, count(*) FROM orders.orders "
        "WHERE placed_at >= '2024-01-01 00:00:00+00' AND placed_at < '2025-01-01 00:00:00+00' "
        "GROUP BY currency_code ORDER BY currency_code",
        ["orders.orders"],
    ),
    # wrong: counts soft-deleted customers too
    "q011": ("SELECT count(*) FROM orders.customers WHERE tenant_id = 2", ["orders.customers"]),
}


class AcmeSql:
    name = "acme-sql"
    version = "0.1"

    def prepare(self, ctx: BenchmarkContext) -> None:
        self.dsn = ctx.dsn  # read-only; a real system might look at the data

    def generate(self, q: Question) -> Prediction:
        sql, tables = KNOWN.get(q.id, ("SELECT 1", []))
        return Prediction(sql=sql, tables_in_context=tables)
