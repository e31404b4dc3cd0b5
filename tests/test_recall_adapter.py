"""``heron recall --adapter`` (issue 44, item 3): any adapter's table retrieval scored as
Set-Recall@k by difficulty class, no SQL needed. The outside check is graph2sql's offline
retrieval (schema graph + Personalized PageRank, tests/graph2sql_ranker.py) on the 100 built-in
questions at tiny/42; a full-schema adapter (no tables) reads n/a."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pytest_heron.cli import main
from pytest_heron.core.types import RETRIEVALS
from pytest_heron.database.server import Server


def _recall(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main(["recall", *args, "--json"]) == 0
    doc: dict[str, Any] = json.loads(capsys.readouterr().out)
    return doc


@pytest.mark.parametrize("ranker", ["Graph2SQLRanker", "Graph2SQLNoEdges"])
def test_graph2sql_ranking_is_measured_without_sql(
    server: Server, tiny_state: Any, capsys: pytest.CaptureFixture[str], ranker: str
) -> None:
    spec = f"graph2sql_ranker:{ranker}"
    doc = _recall(capsys, "--adapter", spec, "--dsn", server.admin_dsn)
    c = doc["conditions"]
    assert (c["questions"], c["ranked"], c["failures"]) == (100, 100, 0)
    rows = {r["retrieval"]: r for r in doc["recall"]}
    assert list(rows) == ["all", *RETRIEVALS]
    assert sum(rows[label]["n"] for label in RETRIEVALS) == rows["all"]["n"] == 100
    for row in rows.values():
        assert 0.0 <= row["at_5"] <= row["at_10"] <= row["at_20"] <= 100.0
    assert rows["all"]["at_20"] > 0.0  # it finds some gold tables: a real ranking, not noise
    print(json.dumps(rows))  # the measurement, for the record (-s shows it)


ADAPTERS = '''
class Everything:
    """Reports every table as an unranked set: no Set-Recall@k credit."""
    name = "everything"
    def prepare(self, ctx):
        self.tables = list(ctx.tables)
    def generate(self, q):
        return {"tables": self.tables}

class WholeSchema:
    """Sends the whole schema and reports no tables: n/a."""
    name = "whole"
    def prepare(self, ctx): pass
    def generate(self, q):
        return "SELECT 1"
'''


def test_an_unranked_set_of_every_table_earns_nothing_and_no_tables_read_na(
    server: Server,
    tiny_state: Any,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (tmp_path / "outside_adapters.py").write_text(ADAPTERS)
    monkeypatch.syspath_prepend(str(tmp_path))
    every = _recall(capsys, "--adapter", "outside_adapters:Everything", "--dsn", server.admin_dsn)
    assert every["conditions"]["ranked"] == 0
    assert {r["at_5"] for r in every["recall"]} == {r["at_20"] for r in every["recall"]} == {0.0}
    whole = _recall(capsys, "--adapter", "outside_adapters:WholeSchema", "--dsn", server.admin_dsn)
    assert {r["at_5"] for r in whole["recall"]} == {None}
