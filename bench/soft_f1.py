"""Soft-F1 on a big correct answer with permuted columns, timed against the old implementation.

Input: ``--rows`` rows x 8 columns (ints, text, a float, a numeric as Decimal, a small int, a big
int, a unique text, a nullable int); the prediction is the same rows shuffled, with the columns
permuted (``--perm``, default a uniformly random permutation from ``--seed``).  Both
implementations score the same input in the same process: the current
:func:`pytest_heron.scoring.similarity.soft_f1` and ``old_soft_f1`` below, a verbatim copy of the
implementation it replaced (rows paired by identical key tuples in the given column order, then
greedily over up to 2,000 candidates per row).  Each is run ``--repeat`` times (best wall clock
kept); the old one is run once by default since it is slow.  Prints both scores and times, and
last ``ratio=<old/new>``.

    python bench/soft_f1.py [--rows 50000] [--seed 7] [--repeat 3] [--old-repeat 1]
"""

from __future__ import annotations

import argparse
import random
import time
from collections import Counter
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

from pytest_heron.scoring.similarity import soft_f1

Row = tuple[object, ...]


def old_soft_f1(gold: Sequence[Sequence[Any]], pred: Sequence[Sequence[Any]]) -> float:
    """The implementation before 2026-12-01, copied unchanged as the reference."""
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


def make_input(rows: int, seed: int, perm: list[int]) -> tuple[list[Row], list[Row]]:
    rng = random.Random(seed)
    gold: list[Row] = [
        (
            i,
            f"customer {i % 977}",
            rng.random() * 1000,
            Decimal(rng.randrange(10**6)) / 100,
            i % 7,
            rng.randrange(10**9),
            f"t{i}",
            None if i % 11 == 0 else i * 3,
        )
        for i in range(rows)
    ]
    pred = [tuple(row[k] for k in perm) for row in gold]
    rng.shuffle(pred)
    return gold, pred


def timed(
    fn: Callable[[list[Row], list[Row]], float], gold: list[Row], pred: list[Row], repeat: int
) -> tuple[float, float]:
    best = float("inf")
    score = 0.0
    for _ in range(max(1, repeat)):
        started = time.perf_counter()
        score = fn(gold, pred)
        best = min(best, time.perf_counter() - started)
    return score, best


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--old-repeat", type=int, default=1)
    parser.add_argument("--perm", type=str, default="", help="e.g. 3,7,0,5,1,6,2,4")
    args = parser.parse_args()
    if args.perm:
        perm = [int(k) for k in args.perm.split(",")]
    else:
        perm = list(range(8))
        random.Random(args.seed).shuffle(perm)
    gold, pred = make_input(args.rows, args.seed, perm)
    print(f"{args.rows:,} rows x 8 columns, rows shuffled, columns permuted {perm}")
    new_score, new_s = timed(soft_f1, gold, pred, args.repeat)
    print(f"  new: soft_f1={new_score:.6f} seconds={new_s:.3f}")
    old_score, old_s = timed(old_soft_f1, gold, pred, args.old_repeat)
    print(f"  old: soft_f1={old_score:.6f} seconds={old_s:.3f}")
    print(f"ratio={old_s / new_s:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
