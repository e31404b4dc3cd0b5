"""Rewrite the Set-Recall@k table of ``docs/retrieval.md`` from what ``heron recall`` computes
(both methods, every built-in question, k = 5, 10, 20), between the page's two markers.

The table is never typed by hand: after a change to the questions, the table documents or the
rankers, run this and commit the page; ``tests/test_retrieval.py`` fails while the page's table
differs from the computed one. The embedding method needs the ``embedding`` extra (minutes on a
small machine; BM25 takes seconds).

    python scripts/retrieval_table.py
"""

from __future__ import annotations

import sys
from pathlib import Path

from pytest_heron.dataset import load_questions
from pytest_heron.scoring import rank_questions, recall_table, side_by_side
from pytest_heron.systems import ranker

PAGE = Path(__file__).resolve().parents[1] / "docs" / "retrieval.md"
START = "<!-- the table below is written by `python scripts/retrieval_table.py` -->"
END = "<!-- end of the written table -->"
KS = (5, 10, 20)
METHODS = ("bm25", "embedding")


def computed() -> str:
    questions = load_questions()
    tables = {m: recall_table(questions, rank_questions(ranker(m), questions), KS) for m in METHODS}
    return side_by_side(tables, KS)


def rewrite(page: str, table: str) -> str:
    """``page`` with the text between its markers replaced by ``table``."""
    before, found, rest = page.partition(START)
    _old, found_end, after = rest.partition(END)
    if not found or not found_end:
        raise SystemExit(f"{PAGE}: the markers {START!r} and {END!r} are missing")
    return f"{before}{START}\n\n{table}\n\n{END}{after}"


def main() -> int:
    PAGE.write_text(rewrite(PAGE.read_text(encoding="utf-8"), computed()), encoding="utf-8")
    print(f"wrote the table of {PAGE}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
