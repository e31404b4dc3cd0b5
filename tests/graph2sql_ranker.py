"""An outside tool's table retrieval as a heron adapter, written the way a tool builder would:
graph2sql (a schema graph ranked by Personalized PageRank, offline, no LLM) over heron's DDL.
It returns only a ranking of tables (``tables_ranked``), no SQL: a retrieval-only system, which
``heron recall --adapter`` scores (tests/test_recall_adapter.py).

graph2sql's DDL reader takes unqualified table names, so ``schema.table`` is handed to it as
``schema__table`` and mapped back. The DDL an adapter is handed states no foreign keys, so the
graph's edges (what Personalized PageRank walks) are read from the state's catalog through
``ctx.dsn``. ``rank`` returns its top-k seeds (with a score) and their neighbours; the ranking is
the seeds by score, best first, then the neighbours in its order.
"""

from __future__ import annotations

import re
from typing import Any

import psycopg
from graph2sql import SchemaGraph

from pytest_heron import BenchmarkContext, Question

SEEDS = 20  # graph2sql's k: the seed nodes it scores


class Graph2SQLRanker:
    name = "graph2sql-ppr"
    version = "graph2sql 0.2"
    edges = True  # the foreign keys as the graph's edges (False: the tables alone)

    def prepare(self, ctx: BenchmarkContext) -> None:
        schemas = sorted({t.split(".")[0] for t in ctx.tables})
        qualified = re.compile(r"\b(" + "|".join(schemas) + r")\.([a-z_][a-z0-9_]*)\b")
        self.graph = SchemaGraph.from_ddl(qualified.sub(r"\1__\2", ctx.schema_ddl))
        self.tables = set(ctx.tables)
        if not self.edges:
            return
        with psycopg.connect(ctx.dsn) as conn:
            keys = conn.execute(
                "SELECT DISTINCT conrelid::regclass::text, confrelid::regclass::text"
                " FROM pg_constraint WHERE contype = 'f' ORDER BY 1, 2"
            ).fetchall()
        for child, parent in keys:
            if child in self.tables and parent in self.tables and child != parent:
                self.graph.add_edge(
                    child.replace(".", "__"), parent.replace(".", "__"), "foreign_key"
                )

    def generate(self, q: Question) -> dict[str, Any]:
        found = self.graph.rank(q.question, k=SEEDS)["nodes"]
        scored = sorted(
            (n for n in found if n.get("score") is not None), key=lambda n: -float(n["score"])
        )
        rest = [n for n in found if n.get("score") is None]
        ranked: list[str] = []
        for node in [*scored, *rest]:
            table = str(node["label"]).replace("__", ".", 1)
            if table in self.tables and table not in ranked:
                ranked.append(table)
        return {"tables_ranked": ranked}


class Graph2SQLNoEdges(Graph2SQLRanker):
    """The same without the foreign keys: graph2sql's lexical match alone seeds the ranking."""

    name = "graph2sql-lexical"
    edges = False
