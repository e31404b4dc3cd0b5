"""How close one answer is to gold without being right: Soft-F1 (partial credit over rows) and
exact match (sqlglot-normalised SQL text). Pure functions, no I/O."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any


def soft_f1(gold: Sequence[Sequence[Any]], pred: Sequence[Sequence[Any]]) -> float:
    """Row-level partial credit in [0, 1], after BIRD mini-dev's Soft-F1, but with rows paired by
    content instead of by position, so the score does not depend on row order.

    Each gold row is paired with at most one predicted row: identical rows first, then, greedily,
    the pair sharing the most values. A pair contributes the share of gold values found in the
    predicted row (true positives), of predicted values not in the gold row (false positives) and
    of gold values not in the predicted row (false negatives); unpaired gold rows count as all
    false negatives, unpaired predicted rows as all false positives. Two empty results score 1.
    BIRD mini-dev pairs row i with row i, which penalises a right answer in another order.

    >>> soft_f1([(1, "a"), (2, "b")], [(2, "b"), (1, "a")])
    1.0
    >>> soft_f1([(1, "a")], [(1, "x")])
    0.5
    """
    from pytest_heron.compare import value_key

    if not gold and not pred:
        return 1.0
    g = [tuple(value_key(v) for v in row) for row in gold]
    p = [tuple(value_key(v) for v in row) for row in pred]
    width = max(1, max((len(r) for r in g), default=1))
    unmatched_pred: dict[tuple[Any, ...], int] = {}
    for row in p:
        unmatched_pred[row] = unmatched_pred.get(row, 0) + 1
    tp = fp = fn = 0.0
    leftover_gold = []
    for row in g:  # identical rows pair first
        if unmatched_pred.get(row):
            unmatched_pred[row] -= 1
            tp += 1.0
        else:
            leftover_gold.append(row)
    # Greedy pairing on a canonical order (not the rows' order): ties go to the smaller repr.
    leftover_pred = sorted((r for r, n in unmatched_pred.items() for _ in range(n)), key=repr)
    for row in sorted(leftover_gold, key=repr):
        have = Counter(row)
        best, best_shared = -1, -1
        for i, cand in enumerate(leftover_pred[:2000]):  # bounded: partial credit, not a proof
            shared = sum((have & Counter(cand)).values())
            if shared > best_shared:
                best, best_shared = i, shared
        if best < 0:
            fn += 1.0
            continue
        cand = leftover_pred.pop(best)
        tp += best_shared / width
        fp += (len(cand) - best_shared) / width
        fn += (len(row) - best_shared) / width
    fp += float(len(leftover_pred))
    if tp == 0:
        return 0.0
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
