"""Canonical keys of single values and the tolerant value rule.

A value's *canonical key* is a hashable stand-in such that equal keys imply equal values under
the comparator's rules (the converse need not hold: see the tolerant re-pairing in ``rows``).

* Integers are exact: a Python ``int`` and an integral ``Decimal`` are their own integer value.
  Two integers compare exactly, whatever their size.
* A ``float`` or a ``Decimal`` with a fractional part goes through the nearest float onto a binary
  grid never coarser than the tolerance (a step of 2**-20 below 1, 21 significant bits from 1
  to 2**21, whole numbers from 2**21 on); whenever one of two numbers is such a value, they are
  equal within :data:`REL_TOL`.
* Against an integer, such a value must also *round to* it (:func:`num_close`): its nearest
  float, rounded half to even, is the integer (beyond 2**53, where floats are coarser than
  integers, it is the float nearest to the integer).  The grid's step never exceeds 1 and rounds
  half to even, so an integer key and a grid key are only ever equal when this holds too.
* NaN (float or Decimal) has one key; infinities are their float; bools are tagged so that they
  never equal numbers; containers are keyed element by element.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import numbers
import uuid
from collections.abc import Sequence
from typing import Final, cast

REL_TOL: Final = 1e-6
"""Numbers a and b, one of them not an integer, are equal when
``|a - b| <= REL_TOL * max(1, |a|, |b|)``; two integers must be equal, and a non-integer must
round to an integer to equal it (see :func:`num_close`)."""

TWO20: Final = float(2**20)
TWO21: Final = float(2**21)
_EXACT_INT: Final = float(2**53)  # below this, every integer is exactly a float
_BIG_DIGITS: Final = 400  # integral Decimals with more digits are keyed by their text

_DCTX: Final = decimal.Context(
    prec=60,
    rounding=decimal.ROUND_HALF_EVEN,
    Emax=decimal.MAX_EMAX,
    Emin=decimal.MIN_EMIN,
    traps=[],
)
_SIG7: Final = decimal.Context(
    prec=7,
    rounding=decimal.ROUND_HALF_EVEN,
    Emax=decimal.MAX_EMAX,
    Emin=decimal.MIN_EMIN,
    traps=[],
)
D_ONE: Final = decimal.Decimal(1)
_D_TOL: Final = decimal.Decimal("1e-6")
_D_HALF: Final = decimal.Decimal("0.5")

# Plain numbers, strings, bytes, None and the datetime/uuid types are their own keys; everything
# else is a tuple whose first item is a tag, so no two kinds of value can collide.
NAN_KEY: Final = ("nan",)
NUM_SLOT: Final = ("#",)

Row = tuple[object, ...]
Key = tuple[object, ...]


def canon_float(x: float) -> object:
    """Grid key of a float: step 2**-20 below 1, 21 significant bits up to 2**21, then 1.

    From 2**21 on, 21 significant bits would be a step above 1: the key is the nearest whole
    number instead (finer than the tolerance, so still safe), so that a float's key can only
    equal an integer's key when the float rounds to that integer.
    """
    if -1.0 < x < 1.0:
        return round(x * TWO20) / TWO20
    if x != x:
        return NAN_KEY
    if x == math.inf or x == -math.inf:
        return x
    if not -TWO21 < x < TWO21:
        return x if not -_EXACT_INT < x < _EXACT_INT else float(round(x))
    mantissa, exponent = math.frexp(x)
    try:
        return math.ldexp(round(mantissa * TWO21), exponent - 21)
    except OverflowError:  # rounded up past the largest float
        return _big_key(decimal.Decimal(x))


def is_integral_decimal(d: decimal.Decimal) -> bool:
    return d.is_finite() and d == d.to_integral_value()


def canon_decimal(d: decimal.Decimal) -> object:
    if d.is_finite():
        if is_integral_decimal(d):  # an integer: exact, like an int
            if d.adjusted() < _BIG_DIGITS:
                return int(d)
            return ("int", str(d.normalize(decimal.Context(prec=len(d.as_tuple().digits)))))
        # through the nearest float, so that a Decimal and a float of equal value agree
        as_float = float(d)
        if as_float == math.inf or as_float == -math.inf:
            return _big_key(d)
        return canon_float(as_float)
    if d.is_nan():
        return NAN_KEY
    return -math.inf if d.is_signed() else math.inf


def _big_key(d: decimal.Decimal) -> object:
    """Key of a non-integral number beyond the float range (7 significant digits)."""
    return ("big", str(_SIG7.plus(d).normalize(_SIG7)))


def canon(v: object) -> object:
    """Hashable key; equal keys imply equal values (numbers: equal within the tolerance)."""
    if v is None or type(v) is str or type(v) is int:
        return v
    if type(v) is float:
        return canon_float(v)
    if type(v) is decimal.Decimal:
        return canon_decimal(v)
    return _canon_other(v)


def _canon_other(v: object) -> object:
    if isinstance(v, bool):
        return ("b", v)
    if isinstance(v, float):
        return canon_float(float(v))
    if isinstance(v, int):
        return int(v)
    if isinstance(v, decimal.Decimal):
        return canon_decimal(v)
    if isinstance(v, str):
        return str(v)
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v)
    if isinstance(v, list):
        return ("L", tuple(map(canon, v)))
    if isinstance(v, tuple):
        return ("R", tuple(map(canon, v)))
    if isinstance(v, dict):
        return ("D", frozenset((canon(k), canon(x)) for k, x in v.items()))
    if isinstance(v, (dt.date, dt.time, dt.timedelta, uuid.UUID)):
        return v  # datetime equality already compares aware values as instants
    if isinstance(v, numbers.Integral):
        return int(v)
    if isinstance(v, numbers.Real):
        return canon_float(float(v))
    name = type(v).__qualname__
    try:
        hash(v)
    except Exception:
        return ("O", name, repr(v))
    return ("O", name, v)


def canon_column(col: list[object]) -> list[object]:
    """Canonical keys of one column; plain text and int columns are their own keys."""
    kinds = set(map(type, col))
    if kinds <= _OWN_KEYS:
        return col
    if kinds == {float}:
        return list(map(canon_float, cast("list[float]", col)))
    return list(map(canon, col))


NONE_TYPE: Final = type(None)
_OWN_KEYS: Final = frozenset({str, int, NONE_TYPE})
NUMERIC_TYPES: Final = frozenset({int, float, decimal.Decimal, NONE_TYPE})
_PLAIN_NUMBERS: Final = frozenset({int, float})


def coarse_column(col: list[object]) -> list[object]:
    kinds = set(map(type, col))
    if kinds <= {str, NONE_TYPE}:
        return col
    if kinds <= NUMERIC_TYPES:
        return [None if v is None else NUM_SLOT for v in col]
    return list(map(coarse, col))


def coarse(v: object) -> object:
    """Like the canonical key, but every number becomes the same placeholder."""
    if v is None or isinstance(v, bool):
        return canon(v)
    if is_number(v):
        return NUM_SLOT
    if isinstance(v, list):
        return ("L", tuple(map(coarse, v)))
    if isinstance(v, tuple):
        return ("R", tuple(map(coarse, v)))
    if isinstance(v, dict):
        return ("D", frozenset((canon(k), coarse(x)) for k, x in v.items()))
    return canon(v)


def value_key(value: object) -> object:
    """The hashable key the comparator uses for one value (equal keys: equal values)."""
    try:
        return canon(value)
    except Exception:
        return ("unkeyable", repr(value))


# --------------------------------------------------------------------------------------------
# tolerant value equality


def is_number(v: object) -> bool:
    if isinstance(v, bool):
        return False
    return isinstance(v, (int, float, decimal.Decimal, numbers.Real))


def _as_number(v: object) -> int | float | decimal.Decimal:
    if isinstance(v, (int, float, decimal.Decimal)):
        return v
    if isinstance(v, numbers.Integral):
        return int(v)
    if isinstance(v, numbers.Real):
        return float(v)
    raise TypeError(type(v).__qualname__)


def _nan(x: int | float | decimal.Decimal) -> bool:
    if isinstance(x, decimal.Decimal):
        return x.is_nan()
    return isinstance(x, float) and x != x


def _inf_sign(x: int | float | decimal.Decimal) -> int:
    if isinstance(x, decimal.Decimal):
        return (-1 if x.is_signed() else 1) if x.is_infinite() else 0
    if isinstance(x, float) and math.isinf(x):
        return -1 if x < 0 else 1
    return 0


def _integral(x: int | float | decimal.Decimal) -> bool:
    """An integer in the sense of the rule: an int, or a Decimal without a fractional part."""
    if isinstance(x, int):
        return True
    return isinstance(x, decimal.Decimal) and is_integral_decimal(x)


def _finite_float(x: int | float | decimal.Decimal) -> float | None:
    try:
        f = float(x)
    except OverflowError:
        return None
    return None if math.isinf(f) else f


def num_close(a: object, b: object) -> bool:
    x, y = _as_number(a), _as_number(b)
    nx, ny = _nan(x), _nan(y)
    if nx or ny:
        return nx and ny
    sx, sy = _inf_sign(x), _inf_sign(y)
    if sx or sy:
        return sx == sy
    ix, iy = _integral(x), _integral(y)
    if ix and iy:
        return bool(x == y)  # int/Decimal comparisons are exact in Python
    fx, fy = _finite_float(x), _finite_float(y)
    if fx is not None and fy is not None:
        if abs(fx - fy) > REL_TOL * max(1.0, abs(fx), abs(fy)):
            return False
        if ix or iy:  # an integer: the other number must round to it
            whole, other = (fx, fy) if ix else (fy, fx)
            if -_EXACT_INT < whole < _EXACT_INT:  # ``whole`` is the integer itself
                return round(other) == whole  # half to even, like the grid: one integer each
            return other == whole  # beyond 2**53: the float nearest to the integer
        return True
    dx, dy = decimal.Decimal(x), decimal.Decimal(y)
    diff = _DCTX.abs(_DCTX.subtract(dx, dy))
    if (ix or iy) and diff > _D_HALF:
        return False
    scale = max(D_ONE, _DCTX.abs(dx), _DCTX.abs(dy))
    return diff <= _DCTX.multiply(_D_TOL, scale)


def num_equal(a: object, b: object) -> bool:
    """:func:`num_close` with a shortcut for identical plain ints and floats."""
    if type(a) in _PLAIN_NUMBERS and type(b) in _PLAIN_NUMBERS and a == b:
        return True
    return num_close(a, b)


def value_close(a: object, b: object) -> bool:
    """The value rule: numbers within tolerance (integers exactly), everything else exact."""
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    a_num, b_num = is_number(a), is_number(b)
    if a_num or b_num:
        return a_num and b_num and num_close(a, b)
    if isinstance(a, list) or isinstance(b, list):
        return isinstance(a, list) and isinstance(b, list) and _seq_close(a, b)
    if isinstance(a, tuple) or isinstance(b, tuple):
        return isinstance(a, tuple) and isinstance(b, tuple) and _seq_close(a, b)
    if isinstance(a, dict) or isinstance(b, dict):
        if not (isinstance(a, dict) and isinstance(b, dict)):
            return False
        ka = {canon(k): x for k, x in a.items()}
        kb = {canon(k): x for k, x in b.items()}
        return ka.keys() == kb.keys() and all(value_close(ka[k], kb[k]) for k in ka)
    try:
        return bool(canon(a) == canon(b))
    except Exception:
        return False


def _seq_close(a: Sequence[object], b: Sequence[object]) -> bool:
    return len(a) == len(b) and all(map(value_close, a, b))


def row_close(a: Row, b: Row) -> bool:
    return len(a) == len(b) and all(map(value_close, a, b))


def num_sort_key(v: object) -> tuple[int, object]:
    """Orders numbers by their exact value (int, float and Decimal compare exactly); NaN last."""
    x = _as_number(v)
    if _nan(x):
        return (1, 0)
    sign = _inf_sign(x)
    if sign:
        return (0, sign * math.inf)
    return (0, x)


def numeric_profile(col: list[object]) -> tuple[int, list[object]] | None:
    """(NULL count, the numbers sorted) if the column holds only numbers and NULLs, else None."""
    nums = [v for v in col if v is not None]
    kinds = set(map(type, nums))
    if kinds <= _PLAIN_NUMBERS:
        plain = cast("list[float]", nums)
        try:
            sortable = not any(map(math.isnan, plain))
        except OverflowError:  # ints beyond the float range: use the general path
            sortable = False
        if sortable:
            plain.sort()  # ints and floats order exactly against each other
            return len(col) - len(nums), nums
    if not all(map(is_number, nums)):
        return None
    nums.sort(key=num_sort_key)
    return len(col) - len(nums), nums


def row_sort_key(row: Row) -> tuple[tuple[int, object], ...]:
    return tuple(num_sort_key(v) for v in row if is_number(v))
