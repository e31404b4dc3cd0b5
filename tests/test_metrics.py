"""Metrics: pure functions, property-tested."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_heron import metrics

cells = st.one_of(st.none(), st.integers(-5, 5), st.sampled_from(["a", "b", "c"]))
tables = st.lists(st.tuples(cells, cells), max_size=12)


@given(tables)
@settings(max_examples=200, deadline=None)
def test_soft_f1_is_one_for_equal_results_in_any_order(rows: list[tuple[Any, ...]]) -> None:
    shuffled = rows[:]
    random.Random(len(rows)).shuffle(shuffled)
    assert metrics.soft_f1(rows, shuffled) == 1.0


@given(tables, tables)
@settings(max_examples=200, deadline=None)
def test_soft_f1_is_a_share_and_symmetric_in_order(
    gold: list[tuple[Any, ...]], pred: list[tuple[Any, ...]]
) -> None:
    score = metrics.soft_f1(gold, pred)
    assert 0.0 <= score <= 1.0
    assert score == metrics.soft_f1(gold, list(reversed(pred)))


def test_soft_f1_gives_partial_credit() -> None:
    assert metrics.soft_f1([(1, "a"), (2, "b")], [(1, "a")]) == pytest.approx(2 / 3)
    assert metrics.soft_f1([(1, "a")], []) == 0.0
    assert metrics.soft_f1([], []) == 1.0
    assert metrics.soft_f1([(1, "a")], [(1, "x")]) == 0.5


@given(st.integers(1, 30), st.data())
def test_pass_at_k_bounds(n: int, data: st.DataObject) -> None:
    c = data.draw(st.integers(0, n))
    k = data.draw(st.integers(1, n))
    p = metrics.pass_at_k(n, c, k)
    assert 0.0 <= p <= 1.0
    assert (p == 0.0) == (c == 0)
    if c == n:
        assert p == 1.0
    if k > 1:
        assert p >= metrics.pass_at_k(n, c, k - 1)


def test_pass_at_k_rejects_impossible_counts() -> None:
    with pytest.raises(ValueError):
        metrics.pass_at_k(3, 4, 1)


def test_grade_formula() -> None:
    assert metrics.grade(100.0, 100.0, None, 0, 10, 0.1) == 100.0
    got = metrics.grade(50.0, 40.0, 10000.0, 2, 10, 10.0)
    assert got == pytest.approx(0.45 * 50 + 0.20 * 40 + 0.15 * 50 + 0.10 * 80 + 0.10 * 50)
    assert metrics.grade(None, None, None, 0, 0, None) is None


def test_ves_counts_only_correct_answers() -> None:
    outcomes = [
        {"correct": True, "ves": 1.0},
        {"correct": True, "ves": 4.0},
        {"correct": False, "ves": None},
        {"correct": False, "ves": None},
    ]
    assert metrics.ves(outcomes) == pytest.approx(100.0 * 5.0 / 4)


def test_bootstrap_interval_is_deterministic_and_brackets_the_share() -> None:
    hits = [True] * 70 + [False] * 30
    lo, hi = metrics.bootstrap_interval(hits)  # type: ignore[misc]
    assert lo < 70.0 < hi and hi - lo < 25
    assert metrics.bootstrap_interval(hits) == (lo, hi)
    assert metrics.bootstrap_interval([]) is None


def test_mcnemar_exact() -> None:
    assert metrics.mcnemar_exact(0, 0) == 1.0
    assert metrics.mcnemar_exact(3, 3) == 1.0
    assert metrics.mcnemar_exact(10, 0) == pytest.approx(2 / 1024)
    assert metrics.mcnemar_exact(6, 1) == pytest.approx(2 * (1 + 7) / 128)


def test_exact_match_normalises_but_is_strict() -> None:
    assert metrics.exact_match("SELECT a FROM t", "select  a\nfrom t;")
    assert not metrics.exact_match("SELECT a FROM t", "SELECT t.a FROM t")
    assert not metrics.exact_match("SELECT a FROM t", None)
