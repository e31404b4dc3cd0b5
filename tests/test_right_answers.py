"""Issue 44 through a real run: the Grade pays for right answers, and Set-Recall has a k.

One scenario, two file-adapter sessions on three questions at ``tiny`` with one state:

- ``select1``: every answer is ``SELECT 1`` (it runs, costs no tokens and is fast, and is never
  right), each with all 211 tables reported as an unranked set. It graded 35.0 before (nothing
  errored, so reliability, token economy and latency were paid in full); now it grades 0 and
  the summary says why, and its context of 211 tables earns no Set-Recall@5/@10/@20.
- ``ranked``: gold's SQL with a ranking of the tables, the gold table second on one question and
  21st on the other: Set-Recall@k reads the ranking's top k.
- ``child``: the same ranking from a ``module:Class`` adapter, which runs in a process of its
  own: ``Prediction.tables_ranked`` and a mapping's ``tables_ranked`` cross its wire.
- retrieval-only adapters (issue 44, item 3), the same ranking and no SQL: ``declared`` says
  ``task = "retrieval"``, ``asked`` gets ``--heron-task=retrieval``, ``as_sql`` is run as an SQL
  run (every answer an ``invalid_prediction``, its tables still counted).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from inner import Scenario, shared
from pytest_heron.generate import load_bundle

QUESTIONS = """\
- id: r001
  question: How many currencies are there?
  gold_sql: SELECT count(*) AS n FROM core.currencies
  gold_tables: [core.currencies]
  shape: single
  retrieval: named
- id: r002
  question: How many dashboards are there?
  gold_sql: SELECT count(*) AS n FROM analytics.dashboards
  gold_tables: [analytics.dashboards]
  shape: single
  retrieval: named
- id: r003
  question: What is two plus two?
  gold_sql: SELECT 2 + 2 AS four
  gold_tables: []
  shape: single
  retrieval: named
"""
GOLD = {
    "r001": "SELECT count(*) AS n FROM core.currencies",
    "r002": "SELECT count(*) AS n FROM analytics.dashboards",
    "r003": "SELECT 4",
}
ADAPTER = """
from pytest_heron import Prediction
from test_right_answers import GOLD, _ranking

class Ranker:
    name = "ranker"
    def prepare(self, ctx): pass
    def generate(self, q):
        if q.id == "r001":
            return Prediction(sql=GOLD[q.id], tables_ranked=_ranking("core.currencies", 2))
        if q.id == "r002":
            return {"sql": GOLD[q.id], "tables_ranked": _ranking("analytics.dashboards", 21),
                    "tables": ["analytics.dashboards", "core.currencies"]}
        return GOLD[q.id]

class RankOnly:  # a retrieval-only system: a ranking of tables, no SQL (nothing for r003)
    name = "rank-only"
    def prepare(self, ctx): pass
    def generate(self, q):
        gold = {"r001": ("core.currencies", 2), "r002": ("analytics.dashboards", 21)}
        return {"tables_ranked": _ranking(*gold[q.id])} if q.id in gold else {}

class DeclaredRankOnly(RankOnly):
    task = "retrieval"
"""
FAST = ("--heron-scale=tiny", "--heron-states=1", "-p", "no:cacheprovider", "-p", "no:randomly")


def _ranking(gold: str, place: int) -> list[str]:
    """Every table, with ``gold`` at 1-based ``place`` and the others in name order."""
    others = [t for t in sorted(load_bundle().tables) if t != gold]
    return [*others[: place - 1], gold, *others[place - 1 :]]


def _lines(records: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


@pytest.fixture(scope="session")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    every = sorted(load_bundle().tables)

    def build(scenario: Scenario) -> dict[str, pytest.RunResult]:
        scenario.write("q/set.yaml", QUESTIONS)
        scenario.write("pytest.ini", "[pytest]\n")
        scenario.write(
            "select1.jsonl", _lines([{"id": q, "sql": "SELECT 1", "tables": every} for q in GOLD])
        )
        ranked = [
            {"id": "r001", "sql": GOLD["r001"], "tables_ranked": _ranking("core.currencies", 2)},
            {
                "id": "r002",
                "sql": GOLD["r002"],
                "tables_ranked": _ranking("analytics.dashboards", 21),
                "tables": ["analytics.dashboards", "core.currencies"],
            },
            {"id": "r003", "sql": GOLD["r003"]},
        ]
        scenario.write("ranked.jsonl", _lines(ranked))
        scenario.write("ranker.py", ADAPTER)
        common = [f"--heron-questions={scenario.path / 'q'}", *FAST]
        tests = str(Path(__file__).parent)
        return {
            **{
                name: scenario.run(
                    "--heron-adapter=file",
                    *common,
                    f"--heron-predictions={name}.jsonl",
                    f"--heron-output={name}.json",
                )
                for name in ("select1", "ranked")
            },
            "child": scenario.run(
                "--heron-adapter=ranker:Ranker",
                *common,
                "--heron-output=child.json",
                env={"PYTHONPATH": tests},
            ),
            **{
                name: scenario.run(
                    f"--heron-adapter=ranker:{adapter}",
                    *common,
                    *extra,
                    f"--heron-output={name}.json",
                    env={"PYTHONPATH": tests},
                )
                for name, adapter, extra in (
                    ("declared", "DeclaredRankOnly", ()),
                    ("asked", "RankOnly", ("--heron-task=retrieval",)),
                    ("as_sql", "RankOnly", ()),
                )
            },
        }

    scenario, results = shared(tmp_path_factory, "right-answers", build)
    docs = {n: json.loads((scenario.path / f"{n}.json").read_text()) for n in results}
    return {"results": results, "docs": docs}


def test_a_system_that_answers_select_1_grades_zero_and_says_why(runs: dict[str, Any]) -> None:
    result, m = runs["results"]["select1"], runs["docs"]["select1"]["metrics"]
    result.assert_outcomes(failed=3)
    assert (m["ex_multistate"], m["errors"]) == (0.0, 0)  # every answer ran, none was right
    assert m["grade"] == 0.0
    out = result.stdout.str()
    assert "Grade: 0.0 = 0.45·ex + 0.20·ves + C·(" in out
    assert "Grade 0: no answer was right on every state (EX 0)" in out
    assert "Soft-F1 (partial credit, not in the Grade)" in out


def test_an_unranked_context_of_every_table_earns_no_set_recall_at_k(
    runs: dict[str, Any],
) -> None:
    m = runs["docs"]["select1"]["metrics"]
    assert m["set_recall"] == 100.0  # every gold table is somewhere in the 211
    assert m["set_recall_at_k"] == {"5": 0.0, "10": 0.0, "20": 0.0}
    assert (m["context_tables_median"], m["tables_ranked_n"]) == (211.0, 0)
    out = runs["results"]["select1"].stdout.str()
    assert "Set-Recall@5 0.0%, @10 0.0%, @20 0.0%   median context: 211 tables" in out


@pytest.mark.parametrize("run", ["ranked", "child"])
def test_set_recall_at_k_reads_the_top_k_of_a_ranking(runs: dict[str, Any], run: str) -> None:
    result, doc = runs["results"][run], runs["docs"][run]
    result.assert_outcomes(passed=3)
    m = doc["metrics"]
    # r001's gold table is 2nd: found at 5, 10 and 20; r002's is 21st: found at none of them
    assert m["set_recall_at_k"] == {"5": 50.0, "10": 50.0, "20": 50.0}
    assert m["tables_ranked_n"] == 2
    # the context: r001's ranking (211 tables, none given as the context), r002's two tables
    assert m["context_tables_median"] == pytest.approx((211 + 2) / 2)
    assert m["set_recall"] == 100.0
    by_id = {q["id"]: q for q in doc["questions"]}
    assert by_id["r002"]["tables_ranked"][20] == "analytics.dashboards"
    assert by_id["r003"]["tables_ranked"] is None and m["grade"] > 80


def test_the_results_file_records_the_adapters_name_beside_its_spec(runs: dict[str, Any]) -> None:
    """Issue 44, item 6: ``ranker:Ranker`` is the spec, ``ranker`` the adapter's own name."""
    child = runs["docs"]["child"]["conditions"]
    assert (child["adapter"], child["adapter_name"]) == ("ranker:Ranker", "ranker")
    assert "adapter=ranker:Ranker (name ranker) scale=tiny" in runs["results"]["child"].stdout.str()
    file = runs["docs"]["ranked"]["conditions"]
    assert (file["adapter"], file["adapter_name"]) == ("file", "file")
    assert "adapter=file scale=tiny" in runs["results"]["ranked"].stdout.str()


@pytest.mark.parametrize("run", ["declared", "asked"])
def test_a_retrieval_run_scores_the_ranking_without_sql(runs: dict[str, Any], run: str) -> None:
    result, doc = runs["results"][run], runs["docs"][run]
    result.assert_outcomes(passed=2, failed=1)  # r003: no tables reported
    m = doc["metrics"]
    assert doc["conditions"]["task"] == "retrieval"
    assert m["set_recall_at_k"] == {"5": 50.0, "10": 50.0, "20": 50.0}
    assert (m["tables_ranked_n"], m["errors"]) == (2, 1)
    for sql_only in ("ex1", "ex_multistate", "grade", "soft_f1", "ves", "exact_match"):
        assert m[sql_only] is None, sql_only  # no SQL was asked: n/a, never 0
    assert doc["breakdown"] == {}
    by_id = {q["id"]: q for q in doc["questions"]}
    assert by_id["r001"]["pred_sql"] is None and by_id["r001"]["error_kind"] is None
    assert by_id["r003"]["error_kind"] == "invalid_prediction"
    out = result.stdout.str()
    assert "task=retrieval: only the tables the adapter reported were scored" in out
    assert "| all | 3 | 50.0 | 50.0 | 50.0 |" in out and "| named | 3 | 50.0" in out
    assert "adapter=ranker:" in out and " task=retrieval scale=tiny" in out


def test_an_sql_run_keeps_the_tables_of_an_answer_without_sql(runs: dict[str, Any]) -> None:
    result, m = runs["results"]["as_sql"], runs["docs"]["as_sql"]["metrics"]
    result.assert_outcomes(failed=3)
    assert (m["ex_multistate"], m["errors"], m["grade"]) == (0.0, 3, 0.0)
    assert m["set_recall_at_k"] == {"5": 50.0, "10": 50.0, "20": 50.0}
    assert runs["docs"]["as_sql"]["conditions"]["task"] == "sql"
