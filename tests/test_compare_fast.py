"""The whole-column layer of the comparator: codes agree with keys, fast and slow paths agree."""

from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_heron.compare import _canon, compare
from pytest_heron.compare import rows as rows_module
from pytest_heron.compare.columns import (
    Interner,
    aligned_equal,
    column_keys,
    equal_at,
    python_keys,
    table,
)

PROPS = settings(
    max_examples=200, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)

numbers = st.one_of(
    st.integers(-(2**70), 2**70),
    st.integers(-5, 5),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 1.0, 2.0**53, 2.0**53 + 2, 1e15, 0.1 + 0.2]),
    st.decimals(allow_nan=True, allow_infinity=True, places=None),
    st.decimals(min_value=-(10**6), max_value=10**6, places=2),
)
cells = st.one_of(numbers, st.none(), st.text(max_size=2), st.booleans(), st.dates())
# columns of one kind reach the numpy families; mixed ones reach the generic path
columns = st.one_of(
    st.lists(st.integers(-(2**70), 2**70), min_size=1, max_size=6),
    st.lists(st.floats(allow_nan=True), min_size=1, max_size=6),
    st.lists(st.decimals(allow_nan=True, places=None), min_size=1, max_size=6),
    st.lists(st.one_of(st.text(max_size=2), st.none()), min_size=1, max_size=6),
    st.lists(numbers, min_size=1, max_size=6),
    st.lists(cells, min_size=1, max_size=6),
    # one number type with NULLs, as nullable SQL columns give
    st.lists(st.one_of(st.integers(-(2**70), 2**70), st.none()), min_size=1, max_size=6),
    st.lists(st.one_of(st.floats(), st.none()), min_size=1, max_size=6),
    st.lists(st.one_of(st.decimals(places=None), st.none()), min_size=1, max_size=6),
    st.lists(st.one_of(st.decimals(-(10**20), 10**20, places=2), st.none()), max_size=6),
    st.lists(st.one_of(st.datetimes(), st.dates(), st.none(), st.binary(max_size=2))),
)


@PROPS
@given(columns, columns)
def test_equal_keys_get_equal_codes_and_compare_equal(a: list[Any], b: list[Any]) -> None:
    ka, _ = column_keys(a)
    kb, _ = column_keys(b)
    for i, x in enumerate(a):
        for j, y in enumerate(b):
            same = _canon(x) == _canon(y)
            if same:
                assert ka.codes[i] == kb.codes[j], (x, y)
            at_i, at_j = np.array([i], dtype=np.intp), np.array([j], dtype=np.intp)
            assert aligned_equal(ka, at_i, kb, at_j) is same, (x, y)


@PROPS
@given(columns)
def test_python_keys_are_the_canonical_keys(col: list[Any]) -> None:
    ck, keys = column_keys(col)
    from pytest_heron.compare.columns import python_keys

    assert python_keys(ck) == [_canon(v) for v in col]
    if keys is not None:
        assert keys == [_canon(v) for v in col]


@PROPS
@given(columns, columns)
def test_columns_numbered_by_one_interner_compare_by_their_keys(a: list[Any], b: list[Any]) -> None:
    interner = Interner()
    ka, _ = column_keys(a, interner)
    kb, _ = column_keys(b, interner)
    assert python_keys(ka) == [_canon(v) for v in a]
    for i, x in enumerate(a):
        for j, y in enumerate(b):
            same = _canon(x) == _canon(y)
            if same:
                assert ka.codes[i] == kb.codes[j], (x, y)
            at_i, at_j = np.array([i], dtype=np.intp), np.array([j], dtype=np.intp)
            assert aligned_equal(ka, at_i, kb, at_j) is same, (x, y)
            assert bool(equal_at(ka, at_i, kb, at_j)[0]) is same, (x, y)


def test_few_distinct_values_are_numbered_and_many_are_not() -> None:
    interner = Interner()
    statuses: list[object] = ["open", "paid", None, "shipped"] * 10_000
    numbered, _ = column_keys(statuses, interner)
    assert numbered.family == "n" and len(interner) == 4
    again, _ = column_keys(
        [str(s) if s is not None else None for s in reversed(statuses)], interner
    )
    assert again.family == "n" and len(interner) == 4  # equal values, other objects: no new ones
    everywhere = np.arange(len(statuses), dtype=np.intp)
    assert aligned_equal(numbered, everywhere, again, everywhere[::-1].copy())
    assert not aligned_equal(numbered, everywhere, again, everywhere)
    names: list[object] = [f"customer {k:05d}" for k in range(40_000)]
    many, _ = column_keys(names, interner)
    assert many.family == "o" and python_keys(many) == names
    # few distinct values first, many later: numbering stops part-way, and the keys stay whole
    late: list[object] = ["open"] * 20_000 + names
    mixed, _ = column_keys(late, interner)
    assert mixed.family == "o" and python_keys(mixed) == late
    # numbers from another interner never meet these: a side built alone numbers nothing
    alone, _ = column_keys(statuses)
    assert alone.family == "o"
    assert aligned_equal(numbered, everywhere, alone, everywhere)


def test_a_text_column_of_few_values_compares_exactly() -> None:
    rng = random.Random(5)
    gold = [
        (k, rng.choice(["open", "paid", "shipped"]), rng.choice(["a", None])) for k in range(50_000)
    ]
    pred = [("".join(r[1]), r[0], r[2]) for r in gold]  # new text objects, columns moved
    rng.shuffle(pred)
    assert compare(gold, pred).equal
    swapped = list(pred)
    at = next(i for i, r in enumerate(swapped) if r[0] == "open")
    swapped[at] = ("paid", *swapped[at][1:])
    result = compare(gold, swapped)
    assert not result.equal and "first missing row" in result.reason


def test_table_reads_rows_like_tuples() -> None:
    t = table([(1, "a"), [2, "b"], "xy"])  # any sequence of the right length is a row
    assert t is not None and t.width == 2 and list(t) == [(1, "a"), (2, "b"), ("x", "y")]
    assert table([(1,), (1, 2)]) is None
    assert table([]) is not None
    gen = table([iter([1, 2]), iter([3, 4])])  # rows without a length
    assert gen is not None and list(gen) == [(1, 2), (3, 4)]


def _big(n: int, seed: int) -> list[tuple[Any, ...]]:
    rng = random.Random(seed)
    return [
        (
            rng.randrange(n // 3),
            rng.choice(["open", "paid", None]),
            round(rng.lognormvariate(3, 1), 2),
            Decimal(rng.randrange(10**6)).scaleb(-2),
            dt.datetime(2024, 1, 1, tzinfo=dt.UTC) + dt.timedelta(minutes=rng.randrange(10**5)),
        )
        for _ in range(n)
    ]


def test_big_results_shuffled_and_permuted() -> None:
    gold = _big(20_000, 1)
    gold += gold[:500]  # duplicate rows
    pred = [(r[4], r[2], r[0], r[3], r[1]) for r in gold]
    random.Random(2).shuffle(pred)
    assert compare(gold, pred).equal
    changed = list(pred)
    changed[7] = (changed[7][0], changed[7][1] + 1.0, *changed[7][2:])
    result = compare(gold, changed)
    assert not result.equal and "first missing row" in result.reason
    one_less_duplicate = [*pred[:-1], pred[0]] if pred[-1] != pred[0] else pred
    if sorted(map(repr, one_less_duplicate)) != sorted(map(repr, pred)):
        assert not compare(gold, one_less_duplicate).equal


def test_big_results_across_number_types() -> None:
    ints = [(k % 997, 2**60 + k) for k in range(60_000)]  # 120,000 codes: the big-result path
    as_decimals = [(Decimal(a), Decimal(b)) for a, b in reversed(ints)]
    assert compare(ints, as_decimals).equal
    as_floats = [(float(a), b) for a, b in ints]  # small ints as floats: equal
    assert compare(ints, as_floats).equal
    near = [(a, b + 1) if k == 123 else (a, b) for k, (a, b) in enumerate(ints)]
    assert not compare(ints, near).equal  # integers are exact, even at 2**60
    loose = [(a, float(b)) for a, b in ints]  # a float is involved: within the tolerance
    assert compare(ints, loose).equal


def test_big_ordered_results() -> None:
    gold = sorted(_big(20_000, 3), key=lambda r: r[0])
    same = [tuple(r) for r in gold]
    assert compare(gold, same, order=(0,)).equal
    ties_moved = list(same)
    k = next(i for i in range(len(gold) - 1) if gold[i][0] == gold[i + 1][0] != None)  # noqa: E711
    ties_moved[k], ties_moved[k + 1] = ties_moved[k + 1], ties_moved[k]
    assert compare(gold, ties_moved, order=(0,)).equal
    assert compare(gold, ties_moved, order=()).equal is (ties_moved == gold)
    out_of_order = [*same[1:], same[0]]
    assert not compare(gold, out_of_order, order=(0,)).equal


@pytest.mark.parametrize("order", [None, (0,)])
def test_code_collisions_fall_back_to_exact_keys(
    monkeypatch: pytest.MonkeyPatch, order: tuple[int, ...] | None
) -> None:
    """Every row given the same code: the exact Python-level pass must decide alone."""

    def collide(columns: list[Any], n: int) -> Any:
        return np.zeros(n, dtype=np.uint64)

    monkeypatch.setattr(rows_module, "row_codes", collide)
    gold = [(1, "a"), (1, "b"), (2, "c")]
    assert compare(gold, [(1, "b"), (1, "a"), (2, "c")], order=order).equal
    assert not compare(gold, [(1, "b"), (1, "b"), (2, "c")], order=order).equal
    assert not compare(gold, [(2, "c"), (1, "a"), (1, "b")], order=(0,)).equal


near_integers = st.builds(
    lambda i, tiny: Decimal(i) + Decimal(tiny).scaleb(-30),
    st.integers(-(2**60), 2**60),
    st.integers(-3, 3),
)


@PROPS
@given(st.lists(st.one_of(near_integers, st.none()), min_size=1, max_size=6))
def test_decimals_whose_float_is_whole_are_tested_exactly(col: list[Any]) -> None:
    # only values with a whole float get the exact integrality test: a fraction of 1e-30 on a
    # big integer (whose float is whole) must still be keyed as a fraction, an integer as itself
    ck, _ = column_keys(col)
    from pytest_heron.compare.columns import python_keys

    assert python_keys(ck) == [_canon(v) for v in col]
