"""``heron recall``: Set-Recall@k of an offline table retrieval baseline over a question set,
printed as a Markdown table or JSON (argparse stays in pytest_heron.cli)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from pytest_heron.dataset import load_questions
from pytest_heron.scoring.recall import markdown, rank_questions, recall_table
from pytest_heron.systems import Ranker, ranker

MODELS = {
    "bm25": "BM25 (Lucene variant, k1 1.5, b 0.75, Snowball stems)",
    "embedding": "all-MiniLM-L6-v2 (numpy, first 256 word pieces)",
}


def recall_command(
    method: str, ks: Sequence[int], questions_dir: str | None, *, as_json: bool
) -> int:
    """Rank every table for every question with ``method`` and print Set-Recall@k; 0."""
    questions = load_questions(Path(questions_dir) if questions_dir else None)
    built: Ranker
    if method == "embedding":  # minutes on a small machine: show progress
        from pytest_heron.core.progress import Steps
        from pytest_heron.systems import build_ranker, table_docs

        docs = table_docs()
        with Steps("embedding tables and questions", 2 * len(docs) + len(questions)) as steps:
            built = build_ranker("embedding", docs, steps.advance)
            rankings = rank_questions(built, questions, steps.advance)
    else:
        built = ranker(method)
        rankings = rank_questions(built, questions)
    rows = recall_table(questions, rankings, ks)
    conditions = {
        "method": method,
        "model": MODELS[method],
        "fields": "whole table document + qualified name, scores summed",
        "questions": len(questions),
        "tables": len(built.tables),
        "unit": "percent of gold tables in the top k, averaged over questions",
    }
    if as_json:
        print(json.dumps({"conditions": conditions, "recall": rows}, indent=2))
    else:
        print(
            f"Set-Recall@k, {conditions['model']}, {len(questions)} questions, "
            f"{conditions['tables']} tables ranked (percent of gold tables in the top k)\n"
        )
        print(markdown(rows, ks))
    return 0
