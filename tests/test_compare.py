"""Tests for pytest_heron.compare: hand-written cases, properties and ORDER BY analysis."""

from __future__ import annotations

import datetime as dt
import json
import random
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from pytest_heron.compare import Comparison, _canon, compare, order_keys
from wire import decode_rows

Rows = list[tuple[Any, ...]]

UTC = dt.UTC
PLUS2 = dt.timezone(dt.timedelta(hours=2))
U1 = uuid.UUID("12345678-1234-5678-1234-567812345678")
U2 = uuid.UUID("87654321-4321-8765-4321-876543218765")
NAN = float("nan")
INF = float("inf")


CASE_FILE = Path(__file__).parent / "data" / "compare_cases.json"
"""The hand-written cases, shared with the JavaScript port (tests/js/compare.test.mjs)."""


def _load_cases() -> list[Any]:
    out = []
    for c in json.loads(CASE_FILE.read_text(encoding="utf-8"))["cases"]:
        kwargs: dict[str, Any] = {}
        if "order" in c:
            kwargs["order"] = None if c["order"] is None else tuple(c["order"])
        if c.get("superset"):
            kwargs["superset"] = True
        gold, pred = decode_rows(c["gold"]), decode_rows(c["pred"])
        mentions = tuple(c.get("mentions", ()))
        out.append(pytest.param(gold, pred, kwargs, c["equal"], mentions, id=c["name"]))
    return out


CASES = _load_cases()


@pytest.mark.parametrize(("gold", "pred", "kwargs", "equal", "mentions"), CASES)
def test_cases(
    gold: Rows, pred: Rows, kwargs: dict[str, Any], equal: bool, mentions: tuple[str, ...]
) -> None:
    result = compare(gold, pred, **kwargs)
    assert isinstance(result, Comparison)
    assert result.equal is equal, result.reason
    assert result.gold_rows == len(gold)
    assert result.pred_rows == len(pred)
    if equal:
        assert result.reason == ""
    else:
        assert result.reason
        assert len(result.reason) < 700
    for text in mentions:
        assert text in result.reason


def test_reason_is_capped() -> None:
    long = "x" * 10_000
    result = compare([(long, 1)], [(long, 2)])
    assert not result.equal
    assert len(result.reason) < 700


def test_comparison_is_frozen() -> None:
    result = compare([(1,)], [(1,)])
    with pytest.raises(AttributeError):
        result.equal = False  # type: ignore[misc]


def test_many_tied_columns_stay_fast_and_correct() -> None:
    rng = random.Random(7)
    width = 8
    gold = [tuple(rng.randrange(3) for _ in range(width)) for _ in range(300)]
    perm = list(range(width))
    rng.shuffle(perm)
    pred = [tuple(r[k] for k in perm) for r in gold]
    rng.shuffle(pred)
    assert compare(gold, pred).equal
    broken = [*pred[:-1], tuple(reversed(pred[-1]))]
    if sorted(broken) != sorted(pred):
        assert not compare(gold, broken).equal


# --------------------------------------------------------------------------------------------
# properties

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**15), max_value=10**15),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.decimals(allow_nan=True, allow_infinity=True, places=None),
    st.text(max_size=4),
    st.binary(max_size=3),
    st.dates(),
    st.datetimes(),
    st.datetimes(
        timezones=st.builds(
            dt.timezone, st.timedeltas(dt.timedelta(hours=-12), dt.timedelta(hours=12))
        )
    ),
    st.times(),
    st.timedeltas(),
    st.uuids(),
)
values = st.one_of(
    scalars,
    st.lists(scalars, max_size=3),
    st.dictionaries(st.text(max_size=3), scalars, max_size=3),
)


@st.composite
def tables(draw: st.DrawFn, elements: st.SearchStrategy[Any] = values) -> Rows:
    width = draw(st.integers(min_value=1, max_value=4))
    rows = draw(st.lists(st.tuples(*[elements] * width), max_size=8))
    return rows


PROPS = settings(
    max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)


@PROPS
@given(tables())
def test_reflexive(rows: Rows) -> None:
    assert compare(rows, list(rows)).equal
    assert compare(rows, list(rows), order=()).equal
    if rows:
        assert compare(rows, list(rows), order=(0,)).equal


@PROPS
@given(tables(), st.data())
def test_symmetric(a: Rows, data: st.DataObject) -> None:
    width = len(a[0]) if a else 2
    mode = data.draw(st.sampled_from(["random", "shuffled", "edited"]))
    if mode == "random":
        b = data.draw(st.lists(st.tuples(*[values] * width), max_size=8))
    else:
        b = list(a)
        data.draw(st.randoms()).shuffle(b)
        if mode == "edited" and b:
            k = data.draw(st.integers(0, len(b) - 1))
            b[k] = data.draw(st.tuples(*[values] * width))
    if not a or not b:
        assume((not a and not b) or len((a or b)[0]) == width)
    assert compare(a, b).equal == compare(b, a).equal


@PROPS
@given(tables(), st.randoms())
def test_row_order_invariance_when_unordered(rows: Rows, rnd: random.Random) -> None:
    shuffled = list(rows)
    rnd.shuffle(shuffled)
    assert compare(rows, shuffled).equal


@st.composite
def tagged_tables(draw: st.DrawFn) -> Rows:
    """Exact values, each column from its own domain, so no column can stand in for another."""
    width = draw(st.integers(min_value=1, max_value=3))
    cells = [st.one_of(st.integers(100 * j - 3, 100 * j + 3), _letters(j)) for j in range(width)]
    return draw(st.lists(st.tuples(*cells), max_size=8))


def _letters(column: int) -> st.SearchStrategy[str]:
    return st.sampled_from([f"{c}@{column}" for c in "abc"])


@PROPS
@given(tagged_tables(), st.randoms(), st.data())
def test_row_order_enforced_when_ordered(
    rows: Rows, rnd: random.Random, data: st.DataObject
) -> None:
    assume(len(rows) >= 2)
    key = data.draw(st.integers(0, len(rows[0]) - 1))
    # gold produced by ORDER BY is sorted on its key, so equal keys are adjacent
    rows = sorted(rows, key=lambda r: (type(r[key]).__name__, r[key]))
    shuffled = list(rows)
    rnd.shuffle(shuffled)
    keys_changed = [r[key] for r in rows] != [r[key] for r in shuffled]
    result = compare(rows, shuffled, order=(key,))
    assert result.equal is (not keys_changed)
    if keys_changed:
        assert "order differs" in result.reason
    full = compare(rows, shuffled, order=())
    assert full.equal is (rows == shuffled)


@PROPS
@given(tagged_tables(), st.data())
def test_duplicate_sensitive(rows: Rows, data: st.DataObject) -> None:
    assume(rows)
    k = data.draw(st.integers(0, len(rows) - 1))
    assert not compare(rows, [*rows, rows[k]]).equal
    assert not compare([*rows, rows[k]], rows).equal
    # same row count, one row replaced by a copy of a different row
    j = data.draw(st.integers(0, len(rows) - 1))
    assume(rows[j] != rows[k])
    changed = list(rows)
    changed[j] = rows[k]
    assert not compare(rows, changed).equal


@PROPS
@given(tables(), st.randoms())
def test_column_permutation_invariant(rows: Rows, rnd: random.Random) -> None:
    assume(rows)
    perm = list(range(len(rows[0])))
    rnd.shuffle(perm)
    permuted = [tuple(r[p] for p in perm) for r in rows]
    rnd.shuffle(permuted)
    assert compare(rows, permuted).equal
    extra = [(*r, "extra") for r in permuted]
    assert compare(rows, extra, superset=True).equal
    assert not compare(rows, extra).equal


class _Weird:
    def __eq__(self, other: object) -> bool:
        raise RuntimeError("no comparing me")

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        raise RuntimeError("no printing me")


anything = st.one_of(
    values,
    st.just(Decimal("sNaN")),
    st.just(object()),
    st.just(_Weird()),
    st.complex_numbers(),
    st.frozensets(st.integers(), max_size=2),
    st.tuples(st.integers(), st.text(max_size=2)),
    st.recursive(
        st.integers() | st.text(max_size=2), lambda c: st.lists(c, max_size=2), max_leaves=5
    ),
)


@PROPS
@given(
    st.lists(st.lists(anything, max_size=3).map(tuple), max_size=5),
    st.lists(st.lists(anything, max_size=3).map(tuple), max_size=5),
    st.one_of(st.none(), st.tuples(st.integers(-2, 4)), st.just(())),
    st.booleans(),
)
def test_never_raises(
    gold: Rows, pred: Rows, order: tuple[int, ...] | None, superset: bool
) -> None:
    result = compare(gold, pred, order=order, superset=superset)
    assert isinstance(result, Comparison)
    assert isinstance(result.equal, bool)
    assert isinstance(result.reason, str)
    assert result.equal == (result.reason == "")


def test_never_raises_on_non_sequences() -> None:
    assert not compare(None, [(1,)]).equal  # type: ignore[arg-type]
    assert not compare([(1,)], 5).equal  # type: ignore[arg-type]


finite = st.floats(min_value=-1e300, max_value=1e300, allow_nan=False, allow_subnormal=True)
float_cells = st.one_of(finite, st.integers(-50, 50), st.text(max_size=2), st.none())


@PROPS
@given(tables(float_cells), st.data())
def test_small_float_perturbation_keeps_equality(rows: Rows, data: st.DataObject) -> None:
    rnd = data.draw(st.randoms())

    def nudge(v: Any) -> Any:
        if isinstance(v, float):
            return v * (1 + rnd.uniform(-1e-7, 1e-7))
        return v

    perturbed = [tuple(nudge(v) for v in r) for r in rows]
    rnd.shuffle(perturbed)
    assert compare(rows, perturbed).equal


@PROPS
@given(tables(float_cells), st.data())
def test_large_float_perturbation_breaks_equality(rows: Rows, data: st.DataObject) -> None:
    spots = [(i, j) for i, r in enumerate(rows) for j, v in enumerate(r) if isinstance(v, float)]
    assume(spots)
    i, j = data.draw(st.sampled_from(spots))
    old = rows[i][j]
    step = data.draw(st.floats(min_value=1e-4, max_value=1.0)) * max(1.0, abs(old))
    new = old + step if data.draw(st.booleans()) else old - step
    # the new value must not be close to any value of its column, or it could pair elsewhere
    column = [r[j] for r in rows if isinstance(r[j], (int, float))]
    assume(all(abs(new - v) > 2e-6 * max(1.0, abs(new), abs(v)) for v in column))
    changed = list(rows)
    changed[i] = (*rows[i][:j], new, *rows[i][j + 1 :])
    assert not compare(rows, changed).equal


MID = 100.5 / 2**20  # halfway between two points of the grid used for grouping


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (MID + 1e-9, MID - 1e-9),
        (MID + 1e-9, Decimal(MID) - Decimal("1e-9")),
        (3 * 2**10 + 2**-10 + 1e-5, 3 * 2**10 + 2**-10 - 1e-5),  # 21 significant bits, above 1
        (3 * 2**30 + 0.5 + 1e-3, 3 * 2**30 + 0.5 - 1e-3),  # whole numbers, from 2**21 on
    ],
)
def test_values_straddling_a_grid_boundary_still_match(a: Any, b: Any) -> None:
    assert _canon(a) != _canon(b)  # the case really exercises the tolerant re-pairing
    assert compare([(a,), (0.25,)], [(0.25,), (b,)]).equal
    assert compare([(1, a, "x"), (2, 7.5, "y")], [("y", 7.5, 2), ("x", b, 1)]).equal
    assert compare([(1, a), (2, 5.0)], [(1, b), (2, 5.0)], order=(1,)).equal
    assert compare([(a, "k")], [(b, "k")], order=()).equal
    assert not compare([(a,), (a,)], [(b,), (0.5,)]).equal


def test_perturbed_large_table() -> None:
    rng = random.Random(3)
    gold = [(i, rng.random() * 10 ** rng.randrange(-3, 6), f"k{i % 17}") for i in range(3000)]
    pred = [(k, v * (1 + rng.uniform(-1e-7, 1e-7)), i) for i, v, k in gold]
    rng.shuffle(pred)
    assert compare(gold, pred).equal


# --------------------------------------------------------------------------------------------
# order_keys


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        pytest.param("SELECT a, b FROM t", None, id="no order by"),
        pytest.param("SELECT a, b FROM t ORDER BY 2", (1,), id="ordinal"),
        pytest.param("SELECT a, b FROM t ORDER BY 2 DESC, 1", (1, 0), id="two ordinals"),
        pytest.param("SELECT a, b FROM t ORDER BY 3", (), id="ordinal out of range"),
        pytest.param("SELECT a, count(*) AS n FROM t GROUP BY a ORDER BY n DESC", (1,), id="alias"),
        pytest.param('SELECT a AS "Total" FROM t ORDER BY "Total"', (0,), id="quoted alias"),
        pytest.param("SELECT A FROM t ORDER BY a", (0,), id="case-folded name"),
        pytest.param("SELECT t.a FROM t ORDER BY a", (0,), id="output column name"),
        pytest.param("SELECT t.a AS x FROM t ORDER BY t.a", (0,), id="qualified column"),
        pytest.param("SELECT b AS a, a AS c FROM t ORDER BY a", (0,), id="output name wins"),
        pytest.param("SELECT a, sum(b) FROM t GROUP BY a ORDER BY SUM(b)", (1,), id="expression"),
        pytest.param(
            "SELECT a, b + 1 AS c FROM t ORDER BY b + 1", (1,), id="expression ignoring alias"
        ),
        pytest.param(
            "SELECT date_trunc('month', d) AS m, count(*) FROM t GROUP BY 1 ORDER BY m, 2",
            (0, 1),
            id="alias and ordinal",
        ),
        pytest.param("SELECT a FROM t ORDER BY b", (), id="key not in projection"),
        pytest.param("SELECT a FROM t ORDER BY a, random()", (), id="one key unmappable"),
        pytest.param(
            "WITH c AS (SELECT a FROM t ORDER BY a) SELECT a FROM c", None, id="order in cte only"
        ),
        pytest.param(
            "SELECT x.a FROM (SELECT a FROM t ORDER BY a LIMIT 5) x", None, id="order in subquery"
        ),
        pytest.param(
            "WITH c AS (SELECT a, b FROM t ORDER BY b) SELECT a, b FROM c ORDER BY 1",
            (0,),
            id="cte and top level",
        ),
        pytest.param(
            "SELECT a, b FROM t UNION ALL SELECT c, d FROM u ORDER BY 2", (1,), id="union ordinal"
        ),
        pytest.param(
            "SELECT a AS k FROM t UNION SELECT b FROM u ORDER BY k", (0,), id="union output name"
        ),
        pytest.param("SELECT a FROM t UNION SELECT b FROM u", None, id="union unordered"),
        pytest.param(
            "(SELECT a FROM t ORDER BY a) UNION (SELECT b FROM u)",
            None,
            id="order inside a union branch",
        ),
        pytest.param("(SELECT a, b FROM t ORDER BY b)", (1,), id="parenthesised query"),
        pytest.param("SELECT * FROM t ORDER BY 1", (0,), id="star, ordinal"),
        pytest.param("SELECT * FROM t ORDER BY a", (), id="star, name"),
        pytest.param("SELECT t.* FROM t ORDER BY a", (), id="qualified star"),
        pytest.param("SELECT a FROM t ORDER BY a LIMIT 10", (0,), id="with limit"),
        pytest.param("SELEC a FRM t", (), id="unparseable"),
        pytest.param("", (), id="empty"),
        pytest.param("SELECT 1; SELECT 2", (), id="two statements"),
    ],
)
def test_order_keys(sql: str, expected: tuple[int, ...] | None) -> None:
    assert order_keys(sql) == expected


@settings(max_examples=100, deadline=None, database=None)
@given(st.text(max_size=40))
def test_order_keys_never_raises(sql: str) -> None:
    result = order_keys(sql)
    assert result is None or (isinstance(result, tuple) and all(isinstance(k, int) for k in result))


def test_order_keys_feeds_compare() -> None:
    sql = "SELECT region, sum(amount) AS total FROM sales GROUP BY region ORDER BY total DESC"
    keys = order_keys(sql)
    assert keys == (1,)
    gold = [("north", 30), ("south", 20), ("east", 20), ("west", 5)]
    assert compare(
        gold, [(30, "north"), (20, "east"), (20, "south"), (5, "west")], order=keys
    ).equal
    assert not compare(
        gold, [(20, "east"), (30, "north"), (20, "south"), (5, "west")], order=keys
    ).equal


# --------------------------------------------------------------------------------------------
# a float against an integer: the float must round to it (DECISIONS.md, 2026-12-01)


@given(
    st.integers(-(2**53) + 1, 2**53 - 1),
    st.one_of(
        st.floats(-2.0, 2.0),
        st.sampled_from([0.5, -0.5, 0.5000001, -0.4999999, 500.0, -500.0]),
        st.floats(-1e-5, 1e-5),
    ),
)
def test_a_float_equals_an_integer_only_when_it_rounds_to_it(whole: int, delta: float) -> None:
    near = float(whole) + delta

    def rule(i: int, f: float) -> bool:  # rounds to it (half to even) and within the tolerance
        if abs(i) >= 2**53:  # floats are coarser than integers: the float nearest to it
            return f == float(i)
        return round(f) == i and abs(f - i) <= 1e-6 * max(1.0, abs(f), abs(i))

    expected = rule(whole, near)
    assert compare([(whole,)], [(near,)]).equal is expected, (whole, near)
    assert compare([(near,)], [(Decimal(whole),)]).equal is expected, (whole, near)
    if _canon(near) == _canon(whole):  # equal keys must never mean more than the rule allows
        assert expected, (whole, near)
    # the whole-column path (a column of ints against a column of floats) agrees
    ints = [(whole + k,) for k in range(3)]
    floats = [(near + k,) for k in range(3)]
    assert compare(ints, floats).equal is all(rule(whole + k, near + k) for k in range(3))
