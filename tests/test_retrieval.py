"""Offline table retrieval: documents, both rankers on the real schema and questions,
Set-Recall@k, ``heron recall`` and the missing-extra messages."""

from __future__ import annotations

import dataclasses
import json
import re
import sys
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_heron.cli import main
from pytest_heron.core.errors import HeronError
from pytest_heron.core.types import RETRIEVALS
from pytest_heron.dataset import load_questions
from pytest_heron.dataset.questions import GoldQuestion
from pytest_heron.generate import load_bundle
from pytest_heron.scoring import recall
from pytest_heron.systems.retrieval import minilm
from pytest_heron.systems.retrieval import rankers as retrieval

QUESTIONS = load_questions()
TABLES = sorted(load_bundle().tables)
KS = recall.DEFAULT_KS


@pytest.fixture(scope="module")
def bm25() -> retrieval.Ranker:
    return retrieval.ranker("bm25")


@pytest.fixture(scope="module")
def embedding() -> retrieval.Ranker:
    return retrieval.ranker("embedding")


# --- documents -----------------------------------------------------------------------------


def test_parse_catalogue_reads_columns_and_comments_but_not_constraints() -> None:
    ddl = (
        "CREATE TABLE s.t_one (\n"
        "    id bigint PRIMARY KEY,\n"
        "    unit_name text NOT NULL,\n"
        "    CONSTRAINT uq_t UNIQUE (unit_name)\n"
        ");\n"
        "COMMENT ON TABLE s.t_one IS 'The buyer''s units.';\n"
        "COMMENT ON COLUMN s.t_one.unit_name IS 'Name; see ''units''.';\n"
        "CREATE TABLE s.two (\n    x int\n);\n"
    )
    one, two = retrieval.parse_catalogue(ddl)
    assert one == retrieval.TableDoc(
        "s.t_one", "The buyer's units.", (("id", ""), ("unit_name", "Name; see 'units'."))
    )
    assert two == retrieval.TableDoc("s.two", "", (("x", ""),))
    assert one.text.splitlines() == [
        "s t one:",
        "The buyer's units.",
        "Columns: id, unit name.",
        "unit name: Name; see 'units'.",
    ]


def test_every_table_of_the_schema_has_one_document_with_its_columns() -> None:
    docs = retrieval.table_docs()
    assert [d.table for d in docs] == TABLES
    bundle = load_bundle()
    for doc in docs:
        assert doc.comment, doc.table
        assert sorted(c for c, _ in doc.columns) == sorted(bundle.table(doc.table).column_names)
    assert sum(bool(note) for d in docs for _, note in d.columns) > 1000


def test_words_split_snake_case_and_qualified_names() -> None:
    assert retrieval.words("orders.order_lines: Cost (EUR) v2") == [
        "orders",
        "order",
        "lines",
        "cost",
        "eur",
        "v2",
    ]


@given(st.dictionaries(st.text("abc.", min_size=1, max_size=4), st.sampled_from([0.0, 1.0, 2.5])))
@settings(max_examples=200, deadline=None)
def test_order_by_score_sorts_by_score_then_name(scores: dict[str, float]) -> None:
    names = list(scores)
    ranked = retrieval.order_by_score(names, [scores[n] for n in names])
    assert sorted(ranked) == sorted(names)
    keys = [(-scores[t], t) for t in ranked]
    assert keys == sorted(keys)
    assert ranked == retrieval.order_by_score(names[::-1], [scores[n] for n in names[::-1]])


# --- Set-Recall@k --------------------------------------------------------------------------


def _question(qid: str, gold: tuple[str, ...], retrieval_class: str) -> GoldQuestion:
    return GoldQuestion(qid, "?", "SELECT 1", gold, "single", retrieval_class)


def test_recall_table_gives_partial_credit_per_question_and_class() -> None:
    questions = [
        _question("a", ("s.x", "s.y"), "named"),
        _question("b", ("s.z",), "two_hop"),
    ]
    rankings = {"a": ["s.x", "s.q", "s.y"], "b": ["s.q", "s.r", "s.z"]}
    rows = recall.recall_table(questions, rankings, (1, 2, 3))
    assert rows == [
        {"retrieval": "all", "n": 2, "at_1": 25.0, "at_2": 25.0, "at_3": 100.0},
        {"retrieval": "named", "n": 1, "at_1": 50.0, "at_2": 50.0, "at_3": 100.0},
        {"retrieval": "two_hop", "n": 1, "at_1": 0.0, "at_2": 0.0, "at_3": 100.0},
    ]


def _check_recall_rows(rows: list[dict[str, Any]]) -> None:
    assert [r["retrieval"] for r in rows] == ["all", *RETRIEVALS]
    assert rows[0]["n"] == len(QUESTIONS) == sum(r["n"] for r in rows[1:])
    for row in rows:
        values = [row[f"at_{k}"] for k in KS]
        assert all(0.0 <= v <= 100.0 for v in values), row
        assert values == sorted(values), f"not monotone in k: {row}"


# --- bm25 ----------------------------------------------------------------------------------


def test_bm25_ranks_every_table_exactly_once(bm25: retrieval.Ranker) -> None:
    for q in QUESTIONS:
        assert sorted(bm25.rank(q.question)) == TABLES


def test_bm25_rankings_are_deterministic(bm25: retrieval.Ranker) -> None:
    fresh = retrieval.build_ranker("bm25")
    first = recall.rank_questions(bm25, QUESTIONS)
    assert recall.rank_questions(fresh, QUESTIONS) == first
    assert recall.rank_questions(bm25, QUESTIONS) == first


@pytest.mark.parametrize(
    "template", ["How many rows are in {fq}?", "How many rows does the {words} table have?"]
)
def test_bm25_puts_a_table_named_in_the_question_in_the_top_5(
    bm25: retrieval.Ranker, template: str
) -> None:
    missed = []
    for table in TABLES:
        question = template.format(fq=table, words=retrieval.name_words(table))
        rank = bm25.rank(question).index(table) + 1
        if rank > 5:
            missed.append((table, rank))
    assert missed == []


def test_bm25_finds_the_table_a_real_question_names(bm25: retrieval.Ranker) -> None:
    q001 = next(q for q in QUESTIONS if q.id == "q001")
    assert "customers" in q001.question and q001.gold_tables == ("orders.customers",)
    assert "orders.customers" in retrieval.rank_tables(q001.question, "bm25", k=5)


def test_bm25_recall_is_a_percentage_and_monotone_in_k(bm25: retrieval.Ranker) -> None:
    rows = recall.recall_table(QUESTIONS, recall.rank_questions(bm25, QUESTIONS), KS)
    _check_recall_rows(rows)


def _printed_rows(out: str) -> dict[str, list[float]]:
    rows = {}
    for line in out.splitlines():
        m = re.match(r"^\| (\w+) \| (\d+) \| (.*) \|$", line)
        if m and m[1] != "retrieval":
            rows[m[1]] = [float(m[2]), *(float(c) for c in m[3].split(" | "))]
    return rows


@pytest.mark.parametrize("method", retrieval.METHODS)
def test_heron_recall_prints_the_computed_numbers(
    method: str, request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str]
) -> None:
    ranker = request.getfixturevalue(method)
    rankings = recall.rank_questions(ranker, QUESTIONS)
    rows = recall.recall_table(QUESTIONS, rankings, KS)
    _check_recall_rows(rows)

    assert main(["recall", "--method", method]) == 0
    out = capsys.readouterr().out
    assert f"{len(QUESTIONS)} questions, {len(TABLES)} tables" in out
    printed = _printed_rows(out)
    assert list(printed) == [r["retrieval"] for r in rows]
    for row in rows:
        expected = [row["n"], *(round(row[f"at_{k}"], 1) for k in KS)]
        assert printed[row["retrieval"]] == pytest.approx(expected, abs=1e-9)

    assert main(["recall", "--method", method, "--k", "1,3", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["conditions"]["method"] == method
    assert doc["recall"] == recall.recall_table(QUESTIONS, rankings, (1, 3))


def test_heron_recall_rejects_a_bad_k(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["recall", "--method", "bm25", "--k", "5,0"])
    assert "every k must be at least 1" in capsys.readouterr().err


# --- missing extras ------------------------------------------------------------------------


def test_bm25_needs_no_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """The ranker is pure Python: with bm25s and PyStemmer unimportable it ranks as before."""
    expected = retrieval.ranker("bm25").rank(QUESTIONS[0].question)
    monkeypatch.setitem(sys.modules, "bm25s", None)  # makes `import bm25s` fail
    monkeypatch.setitem(sys.modules, "Stemmer", None)
    assert retrieval.build_ranker("bm25").rank(QUESTIONS[0].question) == expected
    assert main(["recall", "--method", "bm25", "--k", "5"]) == 0


def test_a_missing_embedding_extra_names_the_pip_command(monkeypatch: pytest.MonkeyPatch) -> None:
    hint = re.escape("pip install 'pytest-heron[embedding]'")
    monkeypatch.setitem(sys.modules, "tokenizers", None)
    minilm.load.cache_clear()
    try:
        with pytest.raises(HeronError, match=hint):
            retrieval.build_ranker("embedding")
    finally:
        minilm.load.cache_clear()
    monkeypatch.setattr(minilm, "SOURCES", (("no_such_weights_package", "model"),))
    with pytest.raises(HeronError, match=hint):
        minilm.model_dir()


def test_an_unknown_method_is_an_error() -> None:
    with pytest.raises(HeronError, match="bm25, embedding"):
        retrieval.build_ranker("tfidf")


# --- embedding -----------------------------------------------------------------------------


def test_minilm_reproduces_the_published_similarities() -> None:
    # sentence-transformers' README: all-MiniLM-L6-v2 cosine similarities of these sentences.
    model = minilm.load()
    e = model.encode(
        ["The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium."]
    )
    sims = e @ e.T
    assert sims[0, 1] == pytest.approx(0.6660, abs=5e-4)
    assert sims[0, 2] == pytest.approx(0.1046, abs=5e-4)
    assert sims[1, 2] == pytest.approx(0.1411, abs=5e-4)


def test_minilm_embeddings_are_unit_deterministic_and_semantic() -> None:
    model = minilm.load()
    texts = [
        "How many invoices are overdue?",
        "Count the bills that are past their due date.",
        "Which warehouse holds the most pallets?",
        "word " * 400,  # longer than the 256 word-piece window: truncated, not an error
    ]
    first = model.encode(texts)
    assert first.shape == (4, 384) and first.dtype == np.float32
    assert np.allclose(np.linalg.norm(first, axis=1), 1.0, atol=1e-5)
    # computed again by a copy of the model that has none of encode()'s kept results
    again = dataclasses.replace(model)
    assert again is not model and np.array_equal(first, again.encode(texts))
    # a list encoded before comes back from what encode() kept: the same rows, one progress call
    steps: list[int] = []
    assert np.array_equal(first, model.encode(texts, steps.append)) and steps == [len(texts)]
    # Alone or in a padded batch, a text gets the same vector up to float rounding.
    assert np.allclose(first[:1], model.encode(texts[:1]), atol=1e-5)
    assert first[0] @ first[1] > first[0] @ first[2] + 0.2


def test_embedding_ranks_every_table_once_and_deterministically(
    embedding: retrieval.Ranker,
) -> None:
    first = recall.rank_questions(embedding, QUESTIONS)
    assert all(sorted(r) == TABLES for r in first.values())
    assert recall.rank_questions(embedding, QUESTIONS) == first


def test_the_retrieval_page_shows_the_table_heron_recall_computes(
    bm25: retrieval.Ranker, embedding: retrieval.Ranker
) -> None:
    """docs/retrieval.md's table is what scripts/retrieval_table.py writes from both methods'
    rankings of every question: a change that moves a figure fails here until it is rerun."""
    import importlib.util
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location(
        "retrieval_table", root / "scripts" / "retrieval_table.py"
    )
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    tables = {
        name: recall.recall_table(QUESTIONS, recall.rank_questions(ranker, QUESTIONS), script.KS)
        for name, ranker in (("bm25", bm25), ("embedding", embedding))
    }
    assert tuple(tables) == script.METHODS
    page = (root / "docs" / "retrieval.md").read_text(encoding="utf-8")
    table = recall.side_by_side(tables, script.KS)
    assert script.START in page and table in page, "run: python scripts/retrieval_table.py"
    assert script.rewrite(page, table) == page
