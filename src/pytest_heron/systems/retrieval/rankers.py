"""Offline table retrieval baselines and their Set-Recall@k.

Before writing SQL against 211 tables, a text-to-SQL system has to pick the few tables that
matter. This module ranks every table of the schema for a question, with two deterministic,
fully offline rankers:

- ``bm25``: Okapi BM25 (:mod:`.lexical`: Lucene variant, k1 = 1.5, b = 0.75, pure Python) over
  words: lowercase, split on anything not a letter or digit (so snake_case and ``schema.table``
  fall apart into words), English stop words removed, Snowball-stemmed; the score is the sum of
  BM25 on the whole document and BM25 on the qualified name alone.
- ``embedding``: cosine similarity between all-MiniLM-L6-v2 embeddings (see
  :mod:`.minilm`) of the question and of each table's document, plus the same
  between the question and the table's qualified name.

Both score a table as the sum over two fields, the whole document and the name alone, with
equal weights (not tuned on the questions).

A table's document is its qualified name as words, its table comment, its column names as
words, then its column comments, in that order (the embedding model reads only the first 256
word pieces, so the most telling parts come first). Equal scores are ordered by table name, so a
ranking is a pure function of the schema and the question.

Set-Recall@k reuses :func:`pytest_heron.scoring.metrics.set_recall` with the top k tables as the
context: per question, the share of its gold tables among the top k (partial credit, not
all-or-nothing), averaged over questions, as a percentage.

Adapters can call :func:`rank_tables` (or keep a :func:`ranker`) to choose the tables they put
in their context. ``bm25`` needs nothing beyond the core; ``embedding`` needs its extra
(``pytest-heron[embedding]``), and without it raises :class:`HeronError` naming the pip command.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Protocol

import numpy as np
import numpy.typing as npt

from pytest_heron.core.errors import HeronError
from pytest_heron.dataset import parse_ddl
from pytest_heron.systems.retrieval.lexical import LexicalIndex, terms, words

__all__ = [
    "METHODS",
    "Bm25Ranker",
    "EmbeddingRanker",
    "Ranker",
    "TableDoc",
    "build_ranker",
    "name_words",
    "order_by_score",
    "parse_catalogue",
    "rank_tables",
    "ranker",
    "table_docs",
    "words",
]

METHODS = ("bm25", "embedding")


@dataclass(frozen=True)
class TableDoc:
    """What the rankers know about one table: name, comment, columns and their comments."""

    table: str
    comment: str
    columns: tuple[tuple[str, str], ...]

    @property
    def text(self) -> str:
        """The document both rankers index (see the module docstring for the order)."""
        parts = [name_words(self.table) + ":"]
        if self.comment:
            parts.append(self.comment)
        parts.append("Columns: " + ", ".join(c.replace("_", " ") for c, _ in self.columns) + ".")
        parts.extend(f"{c.replace('_', ' ')}: {note}" for c, note in self.columns if note)
        return "\n".join(parts)


def name_words(table: str) -> str:
    """``"orders.order_lines"`` as ``"orders order lines"``."""
    return table.replace(".", " ").replace("_", " ")


def parse_catalogue(ddl: str) -> tuple[TableDoc, ...]:
    """Every ``CREATE TABLE`` in ``ddl`` with its ``COMMENT ON TABLE / COLUMN`` texts, in DDL
    order (read by :func:`~pytest_heron.dataset.catalogue.parse_ddl`: constraints are not
    columns)."""
    return tuple(
        TableDoc(t.name, t.comment, tuple((c.name, c.comment) for c in t.columns))
        for t in parse_ddl(ddl).tables.values()
    )


@cache
def table_docs() -> tuple[TableDoc, ...]:
    """The documents of the built-in schema, sorted by table name."""
    from pytest_heron.generate import load_bundle

    return tuple(sorted(parse_catalogue(load_bundle().ddl), key=lambda d: d.table))


def order_by_score(tables: Sequence[str], scores: Iterable[float]) -> list[str]:
    """Tables by descending score, equal scores by ascending name."""
    pairs = sorted(zip(tables, scores, strict=True), key=lambda p: (-float(p[1]), p[0]))
    return [t for t, _ in pairs]


class Ranker(Protocol):
    method: str
    tables: list[str]

    def rank(self, question: str) -> list[str]: ...


class Bm25Ranker:
    """BM25 over two fields of each table, the sum of their scores: the whole document, and the
    qualified name alone (:class:`~.lexical.LexicalIndex`, one index per field).

    The name field exists because the central tables (tenants, customers, orders, products)
    are mentioned in the columns and comments of dozens of others: in the whole-document field
    their words have almost no inverse document frequency, and a question naming
    ``core.tenants`` would rank it 27th. In the name field those words are rare again.
    """

    method = "bm25"

    def __init__(self, docs: Sequence[TableDoc]) -> None:
        self.tables = [d.table for d in docs]
        self._fields: list[LexicalIndex] = []
        for field in ([d.text for d in docs], [d.table for d in docs]):
            index = LexicalIndex()
            for text in field:
                index.add(text)
            self._fields.append(index)

    def terms(self, text: str) -> list[str]:
        """The indexed terms of ``text``: words minus stop words, stemmed."""
        return terms(text)

    def scores(self, question: str) -> list[float]:
        """One score per table, in the order of :attr:`tables`."""
        total = np.zeros(len(self.tables), dtype=np.float64)
        query = terms(question)
        for index in self._fields:
            total += np.asarray(index.term_scores(query), dtype=np.float64)
        return [float(x) for x in total]

    def rank(self, question: str) -> list[str]:
        return order_by_score(self.tables, self.scores(question))


class EmbeddingRanker:
    """Cosine similarity of all-MiniLM-L6-v2 embeddings, summed over the same two fields as
    :class:`Bm25Ranker`: the question against the whole document and against the name."""

    method = "embedding"

    def __init__(
        self, docs: Sequence[TableDoc], progress: Callable[[int], None] | None = None
    ) -> None:
        from pytest_heron.systems.retrieval import minilm

        self.model = minilm.load()
        self.tables = [d.table for d in docs]
        self._documents = self.model.encode([d.text for d in docs], progress)
        self._names = self.model.encode([name_words(d.table) for d in docs], progress)

    def scores_many(
        self, questions: Sequence[str], progress: Callable[[int], None] | None = None
    ) -> npt.NDArray[np.float32]:
        """One row of scores per question, columns in the order of :attr:`tables`;
        ``progress`` gets the number of texts each batch encoded."""
        q = self.model.encode(questions, progress)
        scores: npt.NDArray[np.float32] = q @ self._documents.T + q @ self._names.T
        return scores

    def rank_many(
        self, questions: Sequence[str], progress: Callable[[int], None] | None = None
    ) -> list[list[str]]:
        scores = self.scores_many(questions, progress)
        return [order_by_score(self.tables, row) for row in scores]

    def rank(self, question: str) -> list[str]:
        return self.rank_many([question])[0]


def build_ranker(
    method: str,
    docs: Sequence[TableDoc] | None = None,
    progress: Callable[[int], None] | None = None,
) -> Ranker:
    """A new ranker over ``docs`` (default: the built-in schema); ``progress`` gets the
    number of documents each embedding batch encoded (twice per document: text and name)."""
    docs = table_docs() if docs is None else docs
    if method == "bm25":
        return Bm25Ranker(docs)
    if method == "embedding":
        return EmbeddingRanker(docs, progress)
    raise HeronError(f"unknown retrieval method {method!r}; known: {', '.join(METHODS)}")


@cache
def ranker(method: str) -> Ranker:
    """The ranker over the built-in schema, built once per process."""
    return build_ranker(method)


def rank_tables(question: str, method: str = "bm25", k: int | None = None) -> list[str]:
    """The built-in schema's tables ranked for ``question`` (all of them, or the top ``k``)."""
    ranked = ranker(method).rank(question)
    return ranked if k is None else ranked[:k]
