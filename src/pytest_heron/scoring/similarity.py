"""Exact match: the prediction's SQL text equals gold's once both are normalised by sqlglot (a
figure beside EX; Soft-F1, the row-level partial credit, is a comparator mode:
:func:`pytest_heron.compare.soft_f1`). Pure functions, no I/O."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def soft_f1(
    gold: Sequence[Sequence[Any]], pred: Sequence[Sequence[Any]], *, equal: bool | None = None
) -> float:
    """Cell-level partial credit in [0, 1], after BIRD mini-dev's Soft-F1, but with the result
    comparator's notion of a right answer, column mapping and value keys.

    * An answer the comparator (:func:`pytest_heron.compare.compare`, rows unordered) calls equal
      scores exactly 1.0, whatever the order of its rows and columns and whatever numeric noise
      it allows.  Two empty results score 1.0; an empty result against a non-empty one 0.0.
      A caller that has already compared the two results may pass the verdict as ``equal``
      (``compare(gold, pred).equal``) to spare a second comparison; ``None`` means unknown.
    * Otherwise the predicted columns are mapped to gold columns by content (the mapping with the
      largest total overlap of their values), rows are paired by content under that mapping
      (rows agreeing on all mapped columns first, then on all but one, and so on down to single
      columns), and matched cells are counted (:mod:`pytest_heron.compare.overlap`).
    * With ``w`` the gold width, a pair with ``k`` matched cells counts ``k/w`` true positives,
      ``(pred width - k)/w`` false positives and ``(w - k)/w`` false negatives; an unpaired gold
      row is one false negative, an unpaired predicted row one false positive.  The score is the
      F1 of the resulting precision and recall (0.0 when nothing matches).
    * Rows count with their multiplicity; the score depends on neither the order of the rows
      nor the interpreter's hash seed.  A value counts only in the column it was mapped to:
      two values swapped within one row are two misses.  Ragged rows (which no database
      returns) score 0.0.

    BIRD mini-dev pairs row i with row i, and its values within a row by equality anywhere in
    the row; that penalises a right answer in another order and rewards values in wrong columns.

    >>> soft_f1([(1, "a"), (2, "b")], [(2, "b"), (1, "a")])
    1.0
    >>> soft_f1([(1, "a"), (2, "b")], [("b", 2), ("a", 1)])  # columns in another order
    1.0
    >>> soft_f1([(1, "a")], [(1, "x")])
    0.5
    >>> soft_f1([(1, "a"), (2, "b")], [(1, "a")])  # precision 1, recall 1/2
    0.6666666666666666
    """
    from pytest_heron.compare import compare, overlap

    if equal:
        return 1.0
    try:
        counts = overlap(gold, pred)
    except Exception:  # like the comparator, never raise out of scoring
        counts = None
    if counts is None:
        return 1.0 if equal is None and compare(gold, pred).equal else 0.0
    same_shape = counts.gold_rows == counts.pred_rows and (
        counts.gold_width == counts.pred_width or counts.gold_rows == 0
    )
    if same_shape and counts.cells == counts.gold_rows * counts.gold_width:
        return 1.0  # every cell matched exactly (two empty results included)
    if equal is None and same_shape and compare(gold, pred).equal:
        return 1.0  # equal within the comparator's tolerance
    if counts.cells == 0:
        return 0.0
    width = counts.gold_width
    tp = counts.cells / width
    fn = counts.gold_rows - tp
    fp = counts.pairs * counts.pred_width / width - tp + (counts.pred_rows - counts.pairs)
    precision, recall = tp / (tp + fp), tp / (tp + fn)
    return 2 * precision * recall / (precision + recall)


def exact_match(gold_sql: str, pred_sql: str | None) -> bool:
    """String match after sqlglot normalisation (shown beside EX to show how it under-counts)."""
    import sqlglot

    if not pred_sql:
        return False

    def norm(sql: str) -> str:
        try:
            return str(
                sqlglot.parse_one(sql, read="postgres").sql(dialect="postgres", normalize=True)
            )
        except Exception:
            return " ".join(sql.split()).rstrip(";").lower()

    return norm(gold_sql) == norm(pred_sql)
