"""Soft-F1 agrees with the comparator: 1.0 exactly for what it calls equal, partial credit by cells
under a column mapping otherwise (src/pytest_heron/compare/overlap.py)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_heron.compare import compare
from pytest_heron.compare.modes import soft_f1
from pytest_heron.compare.overlap import column_subsets, overlap

Rows = list[tuple[Any, ...]]
PROPS = settings(
    max_examples=300, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)

cells = st.one_of(
    st.none(),
    st.integers(-3, 3),
    st.integers(-(2**40), 2**40),
    st.floats(-1e6, 1e6, allow_nan=False),
    st.sampled_from(["a", "b", "c", ""]),
    st.decimals(-1000, 1000, places=2),
)


def _noisy(v: Any, rnd: random.Random) -> Any:
    """The value as an equivalent computation could return it (within the tolerance)."""
    if isinstance(v, float):
        return v * (1 + rnd.uniform(-1e-9, 1e-9))
    if isinstance(v, Decimal) and rnd.random() < 0.5:
        return float(v)
    if isinstance(v, int) and not isinstance(v, bool) and rnd.random() < 0.3:
        return float(v)  # an integer cast to float stays equal
    return v


@st.composite
def result_pairs(draw: st.DrawFn) -> tuple[Rows, Rows]:
    width = draw(st.integers(1, 4))
    gold: Rows = draw(st.lists(st.tuples(*[cells] * width), max_size=10))
    rnd = draw(st.randoms(use_true_random=False))
    perm = list(range(width))
    rnd.shuffle(perm)
    pred = [tuple(_noisy(row[k], rnd) for k in perm) for row in gold]
    rnd.shuffle(pred)
    change = draw(st.sampled_from(["none", "none", "cell", "drop", "add", "duplicate"]))
    if change == "cell" and pred:
        i, j = rnd.randrange(len(pred)), rnd.randrange(width)
        row = list(pred[i])
        row[j] = draw(cells)
        pred[i] = tuple(row)
    elif change == "drop" and pred:
        pred.pop(rnd.randrange(len(pred)))
    elif change == "add":
        pred.append(tuple(draw(cells) for _ in range(width)))
    elif change == "duplicate" and pred:
        pred.append(pred[rnd.randrange(len(pred))])
    return gold, pred


@PROPS
@given(result_pairs())
def test_soft_f1_is_one_exactly_when_the_comparator_says_equal(pair: tuple[Rows, Rows]) -> None:
    gold, pred = pair
    equal = compare(gold, pred).equal
    score = soft_f1(gold, pred)
    assert 0.0 <= score <= 1.0
    if equal:
        assert score == 1.0
    else:  # and never full marks for an answer the comparator rejects
        assert score < 1.0
    assert soft_f1(gold, pred, equal=equal) == score  # the caller's verdict changes nothing
    assert soft_f1(gold, list(reversed(pred))) == score  # row order never matters


def test_big_correct_answer_with_permuted_columns_scores_one() -> None:
    rng = random.Random(5)
    n = 50_000
    gold = [
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
        for i in range(n)
    ]
    perm = [3, 7, 0, 5, 1, 6, 2, 4]
    pred = [tuple(row[k] for k in perm) for row in gold]
    rng.shuffle(pred)
    assert soft_f1(gold, pred) == 1.0
    # one column wrong in every row: every row still pairs, with 7 of its 8 cells
    wrong = [(*row[:5], row[5] + "!", *row[6:]) for row in pred]  # predicted 5 = gold 6
    # (the verdict is passed, as the scorer can: the comparator's tolerant search of 50,000
    # rows that all differ is the slow part, and is not what this test is about)
    assert soft_f1(gold, wrong, equal=False) == pytest.approx(7 / 8)
    # float noise within tolerance: not cell-for-cell equal, but the comparator says equal
    noisy = [(*row[:6], row[6] * (1 + 1e-12), row[7]) for row in pred]  # gold column 2
    assert overlap(gold, noisy) is not None
    assert compare(gold, noisy).equal
    assert soft_f1(gold, noisy) == 1.0


def test_partial_credit_counts_cells_under_the_column_mapping() -> None:
    gold = [(1, "a", 10), (2, "b", 20), (3, "c", 30)]
    # columns permuted; one row's number wrong; one row missing
    pred = [(20, 2, "b"), (99, 1, "a")]
    counts = overlap(gold, pred)
    assert counts is not None
    assert counts.mapping == (1, 2, 0)
    assert (counts.pairs, counts.cells) == (2, 5)
    tp, fp, fn = 5 / 3, 2 - 5 / 3, 3 - 5 / 3
    precision, recall = tp / (tp + fp), tp / (tp + fn)
    assert soft_f1(gold, pred) == pytest.approx(2 * precision * recall / (precision + recall))
    # values swapped within one row are in the wrong columns: that row earns nothing
    assert soft_f1([(1, 2), (3, 4)], [(2, 1), (3, 4)]) == pytest.approx(0.5)
    # extra predicted columns cost precision, not recall
    assert soft_f1([(1,), (2,)], [(1, "x"), (2, "y")]) == pytest.approx(2 / 3)
    assert soft_f1([(1, "a")], [("b", 2)]) == 0.0
    assert soft_f1([(1, "a")], [(1, "a", 5)], equal=False) < 1.0


def test_rows_pair_on_the_most_columns_first() -> None:
    gold = [(1, "x", True), (1, "y", False)]
    pred = [(1, "y", True), (1, "x", True)]
    counts = overlap(gold, pred)
    assert counts is not None and counts.cells == 5  # (1,x,T)-(1,x,T): 3, (1,y,F)-(1,y,T): 2


def test_column_subsets_are_bounded() -> None:
    assert column_subsets([0, 1, 2]) == [(0, 1, 2), (0, 1), (0, 2), (1, 2), (0,), (1,), (2,)]
    assert len(column_subsets(list(range(8)))) == 255
    wide = column_subsets(list(range(20)))
    assert len(wide) <= 256
    assert wide[0] == tuple(range(20)) and wide[-20:] == [(c,) for c in range(20)]


_SCRIPT = """
import json, random, sys
from pytest_heron.compare.modes import soft_f1
rng = random.Random(2)
gold = [(rng.choice("abc"), rng.choice("xyz"), rng.randrange(4)) for _ in range(300)]
pred = [(rng.choice("xyz"), rng.randrange(4), rng.choice("abd")) for _ in range(280)]
print(json.dumps(soft_f1(gold, pred)))
"""


def test_score_does_not_depend_on_the_hash_seed() -> None:
    scores = []
    for seed in ("1", "2", "3"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run(
            [sys.executable, "-c", _SCRIPT], env=env, capture_output=True, text=True, check=True
        )
        scores.append(json.loads(done.stdout))
    assert 0.0 < scores[0] < 1.0
    assert scores == [scores[0]] * 3


def test_colliding_codes_do_not_make_row_order_matter() -> None:
    # '' and 0 share the 64-bit code 0: rows grouped by code must still pair by their keys
    gold = [(None, None), (None, None), (None, 0), (None, "")]
    pred = [(None, None), (None, 0.0), (None, "")]
    assert soft_f1(gold, pred) == soft_f1(gold, list(reversed(pred))) == pytest.approx(6 / 7)
