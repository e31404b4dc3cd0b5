"""The comparator's whole-column pass against its row-by-row reference, on generated inputs.

:meth:`RowChecker.exactly_equal` is the column-wise fast path (numpy codes sorted, paired rows
checked key by key); without it every mapping goes through :meth:`RowChecker.verify`, which
compares Python keys row by row (Counters, then the tolerant re-pairing). Switching the fast
path off must change neither the verdict nor the reason, on ordered and unordered results,
tie groups, NULLs, floats within the tolerance, mixed types, duplicate rows and permuted
columns. Row codes only propose pairs, so the fast path is also run with codes cut down to a few
bits (many collisions) or to none (every row collides): the keys of the rows paired must decide.
"""

from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal
from typing import Any
from unittest.mock import patch

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_heron.compare import Comparison, compare
from pytest_heron.compare import rows as rows_module
from pytest_heron.compare.rows import RowChecker

PROPS = settings(
    max_examples=300, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)

Row = tuple[Any, ...]

_cell = st.one_of(
    st.integers(-3, 3),
    st.integers(-(2**64), 2**64),
    st.floats(allow_nan=True, allow_infinity=True, width=64),
    st.sampled_from([0.1, 0.30000000000000004, 1.0, 1.0000000001, 2.0**21, 1e-7]),
    st.decimals(min_value=-1000, max_value=1000, places=2),
    st.decimals(allow_nan=True, allow_infinity=False, places=None),
    st.none(),
    st.booleans(),
    st.text(alphabet="ab", max_size=2),
    st.dates(min_value=dt.date(2024, 1, 1), max_value=dt.date(2024, 1, 3)),
    st.datetimes(
        min_value=dt.datetime(2024, 1, 1),
        max_value=dt.datetime(2024, 1, 2),
        timezones=st.sampled_from([dt.UTC, dt.timezone(dt.timedelta(hours=2))]),
    ),
)


def _nudge(value: Any, rnd: random.Random) -> Any:
    """A value the comparator calls equal (or, now and then, one it must tell apart)."""
    pick = rnd.random()
    if isinstance(value, bool) or value is None or isinstance(value, str | dt.date):
        return value if pick < 0.9 else "z"
    if isinstance(value, int):
        if pick < 0.3 and abs(value) < 2**53:
            return float(value)
        if pick < 0.5:
            return Decimal(value)
        return value if pick < 0.9 else value + 1
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            return value
        if pick < 0.5:
            return value * (1 + 1e-9)  # within the tolerance, maybe across a grid line
        return value if pick < 0.9 else value * (1 + 1e-3) + 1e-3
    if isinstance(value, Decimal):
        if not value.is_finite():
            return value
        return float(value) if pick < 0.4 else value
    return value


@st.composite
def _cases(draw: st.DrawFn) -> tuple[list[Row], list[Row], dict[str, Any]]:
    width = draw(st.integers(1, 4))
    n = draw(st.integers(1, 8))
    # a column draws from a few values of one strategy, or from anything: duplicates and ties
    columns: list[list[Any]] = []
    for _ in range(width):
        pool = draw(st.lists(_cell, min_size=1, max_size=4))
        columns.append([draw(st.sampled_from(pool)) for _ in range(n)])
    gold = list(zip(*columns, strict=True))
    rnd = draw(st.randoms(use_true_random=False))
    how = draw(st.sampled_from(["same", "shuffled", "nudged", "dropped", "duplicated", "other"]))
    pred = list(gold)
    if how != "same":
        rnd.shuffle(pred)
    if how == "nudged":
        pred = [tuple(_nudge(v, rnd) for v in row) for row in pred]
    elif how == "dropped" and len(pred) > 1:
        pred.pop()
    elif how == "duplicated":
        pred.append(pred[0])
        if len(pred) > 1 and rnd.random() < 0.5:
            pred.pop(1)  # the same count, one row twice and another one missing
    elif how == "other":
        pred = [tuple(draw(_cell) for _ in range(width)) for _ in range(len(gold))]
    superset = draw(st.booleans())
    perm = list(range(width))
    rnd.shuffle(perm)
    extra = superset and draw(st.booleans())
    pred = [tuple([row[k] for k in perm] + ([0] if extra else [])) for row in pred]
    options: dict[str, Any] = {"superset": superset}
    ordering = draw(st.sampled_from(["none", "sequence", "key", "ties"]))
    if ordering == "sequence":
        options["order"] = ()
    elif ordering == "key":
        options["order"] = (draw(st.integers(0, width - 1)),)
    elif ordering == "ties":
        steps = draw(st.lists(st.integers(0, 1), min_size=n - 1, max_size=n - 1))
        ties = [0]
        for step in steps:
            ties.append(ties[-1] + step)
        options["ties"] = ties
        options["order"] = draw(st.sampled_from([(), (0,)]))
    return gold, pred, options


def _reference(gold: list[Row], pred: list[Row], options: dict[str, Any]) -> Comparison:
    """The comparison with the whole-column pass switched off: Python keys decide alone."""
    with patch.object(RowChecker, "exactly_equal", lambda self, mapping: False):
        return compare(gold, pred, **options)


def _with_codes_cut(bits: int | None, gold: list[Row], pred: list[Row], **options: Any) -> Any:
    """The comparison with row codes kept to their low ``bits`` (None: as they are)."""
    if bits is None:
        return compare(gold, pred, **options)
    real = rows_module.row_codes
    keep = np.uint64((1 << bits) - 1)

    def cut(columns: Any, n: int) -> Any:
        return real(columns, n) & keep

    with patch.object(rows_module, "row_codes", cut):
        return compare(gold, pred, **options)


@PROPS
@given(_cases(), st.sampled_from([None, None, 2, 0]))
def test_the_column_wise_pass_gives_the_reference_verdict_and_reason(
    case: tuple[list[Row], list[Row], dict[str, Any]], bits: int | None
) -> None:
    gold, pred, options = case
    fast = _with_codes_cut(bits, gold, pred, **options)
    assert fast == _reference(gold, pred, options), (gold, pred, options, bits)


def test_the_reference_path_is_really_taken() -> None:
    # a result the column-wise pass accepts at once still compares equal with it switched off,
    # and a wrong one stays wrong with the same reason: the switch reaches the comparator
    gold: list[Row] = [(1, "a", 0.5), (2, "b", None), (2, "b", None)]
    pred: list[Row] = [(None, "b", 2), (0.5 * (1 + 1e-9), "a", 1), (None, "b", 2)]
    calls: list[tuple[int, ...]] = []

    def refuse(self: RowChecker, mapping: tuple[int, ...]) -> bool:
        calls.append(mapping)
        return False

    with patch.object(RowChecker, "exactly_equal", refuse):
        assert compare(gold, pred).equal
    assert calls  # the fast path was asked, and said no
    wrong = [(None, "b", 2), (0.5, "a", 1), (None, "b", 3)]
    assert compare(gold, wrong) == _reference(gold, wrong, {})
    assert not compare(gold, wrong).equal
