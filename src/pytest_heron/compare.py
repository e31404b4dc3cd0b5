"""Result-set comparison used to score predicted SQL against gold SQL.

The policy is "strict on data, lenient on shape":

* rows form a multiset (duplicates count) and are compared without regard to order, unless the
  caller passes the sort keys of the gold query (see :func:`order_keys`);
* predicted columns are matched to gold columns by their content, never by name, so a prediction
  may list the columns in another order (and, with ``superset=True``, may carry extra columns);
* values are compared strictly except for numbers, which compare by value across ``int``,
  ``float`` and ``Decimal`` within a relative tolerance of ``1e-6`` (see :data:`REL_TOL`).

Everything here is pure computation: no database access and no file access.

How the comparison works
------------------------
Each value gets a *canonical key*: a hashable stand-in such that values that compare equal get
equal keys.  Numbers go through the nearest float onto a binary grid never coarser than the
tolerance (a step of 2**-20 below 1, 21 significant bits from 1 on), so equal keys mean "equal
within tolerance".  Two numbers within tolerance that fall on either side of a grid boundary get
different keys; rows left over after the exact pass are therefore re-paired with the real
tolerance (within groups of rows whose non-numeric parts agree: a sorted merge-like pass, then a
bounded bipartite matching).

Columns are paired through a content signature (an order-independent hash of the multiset of a
column's keys).  Only columns whose signatures tie are searched over, and ties are first ranked by
the signature of (already paired columns, candidate column) pairs, so the usual cost is one
verification.  A column without an equal signature gets candidates from a tolerance-aware test
(same non-numeric content; numbers equal within tolerance once both columns are sorted).  The
number of column mappings verified is bounded (see :func:`_mapping_try_cap`); every accepted
mapping is verified on whole rows.

Limits (only reachable by pathological inputs): at most 120 mappings are verified (fewer for big
results); on results above 10,000 cells only the 3 best-ranked mappings get the tolerant re-pairing;
it is skipped when more than 200,000 rows are left over, and its bipartite stage stops after
250,000 row comparisons.  Hitting a limit can only turn "equal" into "unequal", never the reverse.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import numbers
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import pairwise, repeat
from operator import itemgetter
from typing import Final, cast

import sqlglot
from sqlglot import exp
from sqlglot.optimizer.normalize_identifiers import normalize_identifiers

__all__ = ["REL_TOL", "Comparison", "compare", "order_keys"]

REL_TOL: Final = 1e-6
"""Numbers a and b are equal when ``|a - b| <= REL_TOL * max(1, |a|, |b|)``."""

_REPR_CAP: Final = 200
_SMALL_INT: Final = 2**21  # ints below this in magnitude are their own grid point
_TWO20: Final = float(2**20)
_TWO21: Final = float(2**21)
_SIG_SALT: Final = 0x5EED_C0DE
_MASK64: Final = 0xFFFF_FFFF_FFFF_FFFF

# Bounds that keep the worst case finite.  They only matter for pathological inputs.
_MAX_MAPPING_TRIES: Final = 120
_MAPPING_CELL_BUDGET: Final = 20_000_000
_MAX_SEARCH_NODES: Final = 100_000
_TOLERANT_TRIES: Final = 3  # mappings given the tolerant rescue on big results
_SMALL_CELLS: Final = 10_000  # results up to this many cells give it to every mapping
_PAIR_BUDGET: Final = 250_000
_MAX_TOLERANT_ROWS: Final = 200_000
_DIAG_MIN_SAMPLE: Final = 1_000
_DIAG_CELL_BUDGET: Final = 10_000_000

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
_D_ONE: Final = decimal.Decimal(1)
_D_TOL: Final = decimal.Decimal("1e-6")

# Tags of canonical keys.  Plain numbers, strings, bytes, None and the datetime/uuid types are
# their own keys; everything else is a tuple whose first item is one of these tags, so no two
# kinds of value can collide.
_NAN_KEY: Final = ("nan",)
_NUM_SLOT: Final = ("#",)

Row = tuple[object, ...]
Key = tuple[object, ...]


@dataclass(frozen=True)
class Comparison:
    """Outcome of :func:`compare`.

    ``reason`` is ``""`` when ``equal``; otherwise a short, human-readable counterexample.  Row
    and column numbers in reasons are 1-based.
    """

    equal: bool
    reason: str
    gold_rows: int
    pred_rows: int


# --------------------------------------------------------------------------------------------
# canonical keys


def _canon_float(x: float) -> object:
    # Binary grid: step 2**-20 (9.5e-7) below 1; from 1 on, 21 significant bits (a step of
    # 0.48e-6 to 0.95e-6 of the value).  Never coarser than the tolerance; every point is exact.
    if -1.0 < x < 1.0:
        return round(x * _TWO20) / _TWO20
    if x != x:
        return _NAN_KEY
    if x == math.inf or x == -math.inf:
        return x
    mantissa, exponent = math.frexp(x)
    try:
        return math.ldexp(round(mantissa * _TWO21), exponent - 21)
    except OverflowError:  # rounded up past the largest float
        return _big_key(decimal.Decimal(x))


def _canon_decimal(d: decimal.Decimal) -> object:
    # Through the nearest float, so that a Decimal and a float of equal value always agree.
    if d.is_finite():
        as_float = float(d)
        if as_float == math.inf or as_float == -math.inf:
            return _big_key(d)
        return _canon_float(as_float)
    if d.is_nan():
        return _NAN_KEY
    return -math.inf if d.is_signed() else math.inf


def _canon_int(n: int) -> object:
    if -_SMALL_INT < n < _SMALL_INT:
        return n
    try:
        as_float = float(n)
    except OverflowError:
        return _big_key(decimal.Decimal(n))
    return _canon_float(as_float)


def _big_key(d: decimal.Decimal) -> object:
    """Key of a finite number beyond the float range (7 significant digits, exact)."""
    return ("big", str(_SIG7.plus(d).normalize(_SIG7)))


def _canon(v: object) -> object:
    """Hashable key; equal keys imply equal values (numbers: equal within the tolerance)."""
    if v is None or type(v) is str:
        return v
    if type(v) is int:
        return v if -_SMALL_INT < v < _SMALL_INT else _canon_int(v)
    if type(v) is float:
        return _canon_float(v)
    if type(v) is decimal.Decimal:
        return _canon_decimal(v)
    return _canon_other(v)


def _canon_other(v: object) -> object:
    if isinstance(v, bool):
        return ("b", v)
    if isinstance(v, float):
        return _canon_float(float(v))
    if isinstance(v, int):
        return _canon_int(int(v))
    if isinstance(v, decimal.Decimal):
        return _canon_decimal(v)
    if isinstance(v, str):
        return str(v)
    if isinstance(v, bytes):
        return bytes(v)
    if isinstance(v, (bytearray, memoryview)):
        return bytes(v)
    if isinstance(v, list):
        return ("L", tuple(map(_canon, v)))
    if isinstance(v, tuple):
        return ("R", tuple(map(_canon, v)))
    if isinstance(v, dict):
        return ("D", frozenset((_canon(k), _canon(x)) for k, x in v.items()))
    if isinstance(v, (dt.date, dt.time, dt.timedelta, uuid.UUID)):
        return v  # datetime equality already compares aware values as instants
    if isinstance(v, numbers.Integral):
        return _canon_int(int(v))
    if isinstance(v, numbers.Real):
        return _canon_float(float(v))
    name = type(v).__qualname__
    try:
        hash(v)
    except Exception:
        return ("O", name, repr(v))
    return ("O", name, v)


_NONE_TYPE: Final = type(None)
_PLAIN_TYPES: Final = frozenset({str, _NONE_TYPE})
_NUMERIC_TYPES: Final = frozenset({int, float, decimal.Decimal, _NONE_TYPE})
_PLAIN_NUMBERS: Final = frozenset({int, float})


def _canon_column(col: list[object]) -> list[object]:
    """Canonical keys of one column; skips the per-value work for plain text/int columns."""
    kinds = set(map(type, col))
    if kinds <= _PLAIN_TYPES:
        return col
    if kinds == {int}:
        ints = cast("list[int]", col)
    elif kinds <= {int, str, _NONE_TYPE}:
        ints = [v for v in col if isinstance(v, int)]
    else:
        ints = None
    if ints is not None and (not ints or (min(ints) > -_SMALL_INT and max(ints) < _SMALL_INT)):
        return col
    if kinds == {float}:
        return list(map(_canon_float, cast("list[float]", col)))
    if kinds == {decimal.Decimal}:
        return list(map(_canon_decimal, cast("list[decimal.Decimal]", col)))
    return list(map(_canon, col))


def _coarse_column(col: list[object]) -> list[object]:
    kinds = set(map(type, col))
    if kinds <= _PLAIN_TYPES:
        return col
    if kinds <= _NUMERIC_TYPES:
        return [None if v is None else _NUM_SLOT for v in col]
    return list(map(_coarse, col))


def _coarse(v: object) -> object:
    """Like the canonical key, but every number becomes the same placeholder."""
    if v is None or isinstance(v, bool):
        return _canon(v)
    if _is_number(v):
        return _NUM_SLOT
    if isinstance(v, list):
        return ("L", tuple(map(_coarse, v)))
    if isinstance(v, tuple):
        return ("R", tuple(map(_coarse, v)))
    if isinstance(v, dict):
        return ("D", frozenset((_canon(k), _coarse(x)) for k, x in v.items()))
    return _canon(v)


def _signature(values: Sequence[object]) -> tuple[int, int]:
    """Order-independent hash of a multiset (equal multisets always give equal signatures).

    Each value is hashed together with a salt (tuple hashing mixes the bits, so small ints do not
    simply add up) and the hashes are summed.  Unequal multisets may collide; callers only use
    signatures to propose candidates or to reject, and verify every acceptance.
    """
    return len(values), sum(map(hash, zip(values, repeat(_SIG_SALT)))) & _MASK64


# --------------------------------------------------------------------------------------------
# tolerant value equality


def _is_number(v: object) -> bool:
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


def _finite_float(x: int | float | decimal.Decimal) -> float | None:
    try:
        f = float(x)
    except OverflowError:
        return None
    return None if math.isinf(f) else f


def _num_close(a: object, b: object) -> bool:
    x, y = _as_number(a), _as_number(b)
    nx, ny = _nan(x), _nan(y)
    if nx or ny:
        return nx and ny
    sx, sy = _inf_sign(x), _inf_sign(y)
    if sx or sy:
        return sx == sy
    fx, fy = _finite_float(x), _finite_float(y)
    if fx is not None and fy is not None:
        return abs(fx - fy) <= REL_TOL * max(1.0, abs(fx), abs(fy))
    dx, dy = decimal.Decimal(x), decimal.Decimal(y)
    scale = max(_D_ONE, _DCTX.abs(dx), _DCTX.abs(dy))
    return _DCTX.abs(_DCTX.subtract(dx, dy)) <= _DCTX.multiply(_D_TOL, scale)


def _num_equal(a: object, b: object) -> bool:
    """:func:`_num_close` with a shortcut for identical plain ints and floats."""
    if type(a) in _PLAIN_NUMBERS and type(b) in _PLAIN_NUMBERS and a == b:
        return True
    return _num_close(a, b)


def _value_close(a: object, b: object) -> bool:
    """The value rule of the module: numbers within tolerance, everything else exact."""
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    a_num, b_num = _is_number(a), _is_number(b)
    if a_num or b_num:
        return a_num and b_num and _num_close(a, b)
    if isinstance(a, list) or isinstance(b, list):
        return isinstance(a, list) and isinstance(b, list) and _seq_close(a, b)
    if isinstance(a, tuple) or isinstance(b, tuple):
        return isinstance(a, tuple) and isinstance(b, tuple) and _seq_close(a, b)
    if isinstance(a, dict) or isinstance(b, dict):
        if not (isinstance(a, dict) and isinstance(b, dict)):
            return False
        ka = {_canon(k): x for k, x in a.items()}
        kb = {_canon(k): x for k, x in b.items()}
        return ka.keys() == kb.keys() and all(_value_close(ka[k], kb[k]) for k in ka)
    try:
        return bool(_canon(a) == _canon(b))
    except Exception:
        return False


def _seq_close(a: Sequence[object], b: Sequence[object]) -> bool:
    return len(a) == len(b) and all(map(_value_close, a, b))


def _row_close(a: Row, b: Row) -> bool:
    return len(a) == len(b) and all(map(_value_close, a, b))


def _num_sort_key(v: object) -> tuple[int, float]:
    x = _as_number(v)
    if _nan(x):
        return (1, 0.0)
    sign = _inf_sign(x)
    if sign:
        return (0, sign * math.inf)
    f = _finite_float(x)
    if f is None:
        return (0, math.inf if x > 0 else -math.inf)
    return (0, f)


def _numeric_profile(col: list[object]) -> tuple[int, list[object]] | None:
    """(NULL count, the numbers sorted) if the column holds only numbers and NULLs, else None."""
    nums = [v for v in col if v is not None]
    kinds = set(map(type, nums))
    if kinds <= {int, float}:
        plain = cast("list[float]", nums)
        try:
            sortable = not any(map(math.isnan, plain))
        except OverflowError:  # ints beyond the float range: use the general path
            sortable = False
        if sortable:
            plain.sort()  # ints and floats order exactly against each other
            return len(col) - len(nums), nums
    if not all(map(_is_number, nums)):
        return None
    nums.sort(key=_num_sort_key)
    return len(col) - len(nums), nums


def _row_sort_key(row: Row) -> tuple[tuple[int, float], ...]:
    return tuple(_num_sort_key(v) for v in row if _is_number(v))


# --------------------------------------------------------------------------------------------
# bipartite matching (breadth-first augmenting paths: no recursion, any size)


def _max_matching(n_left: int, adj: Sequence[Sequence[int]]) -> list[int]:
    """Maximum matching; returns, per left vertex, its right vertex or -1."""
    match_left = [-1] * n_left
    match_right: dict[int, int] = {}
    for start in range(n_left):
        parent: dict[int, int] = {}
        queue = [start]
        head = 0
        free = -1
        while head < len(queue) and free < 0:
            u = queue[head]
            head += 1
            for v in adj[u]:
                if v in parent:
                    continue
                parent[v] = u
                owner = match_right.get(v, -1)
                if owner < 0:
                    free = v
                    break
                queue.append(owner)
        v = free
        while v >= 0:
            u = parent[v]
            previous = match_left[u]
            match_left[u] = v
            match_right[v] = u
            v = -1 if u == start else previous
    return match_left


# --------------------------------------------------------------------------------------------
# formatting of counterexamples


def _cap(text: str, limit: int = _REPR_CAP) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _fmt_value(v: object, depth: int = 0) -> str:
    if depth > 4:
        return "…"
    if v is None:
        return "NULL"
    if isinstance(v, str):
        return repr(v[:_REPR_CAP] + "…" if len(v) > _REPR_CAP else v)
    if isinstance(v, (bytes, bytearray, memoryview)):
        raw = bytes(v[:_REPR_CAP])
        return repr(raw) + ("…" if len(v) > _REPR_CAP else "")
    if isinstance(v, bool):
        return repr(v)
    if isinstance(v, decimal.Decimal):
        return str(v)
    if isinstance(v, dt.datetime):
        return v.isoformat(sep=" ")
    if isinstance(v, (dt.date, dt.time)):
        return v.isoformat()
    if isinstance(v, (dt.timedelta, uuid.UUID)):
        return str(v)
    if isinstance(v, list):
        return "[" + ", ".join(_fmt_value(x, depth + 1) for x in v[:20]) + "]"
    if isinstance(v, tuple):
        return _fmt_row(v, depth + 1)
    if isinstance(v, dict):
        items = list(v.items())[:20]
        inner = ", ".join(
            f"{_fmt_value(k, depth + 1)}: {_fmt_value(x, depth + 1)}" for k, x in items
        )
        return "{" + inner + "}"
    return _cap(repr(v))


def _fmt_row(row: Sequence[object], depth: int = 0) -> str:
    parts = [_fmt_value(v, depth) for v in row[:50]]
    if len(row) > 50:
        parts.append("…")
    body = ", ".join(parts) + ("," if len(parts) == 1 else "")
    return _cap("(" + body + ")")


# --------------------------------------------------------------------------------------------
# public API


def compare(
    gold: Sequence[Sequence[object]],
    pred: Sequence[Sequence[object]],
    *,
    order: tuple[int, ...] | None = None,
    superset: bool = False,
) -> Comparison:
    """Compare a predicted result set with the gold one.

    ``gold`` and ``pred`` are rows as psycopg returns them.  Rules:

    * Rows form a multiset: duplicates must match in multiplicity.
    * ``order is None``: row order is ignored.  ``order`` = indices of gold columns: gold is cut
      into consecutive runs of rows with equal values in those columns, and the prediction must
      consist of the same runs in the same sequence, each run equal as a multiset.
      ``order == ()`` (or invalid indices): exact row sequence.
    * Columns are matched by content.  The column count must be equal, unless ``superset`` is set,
      in which case the prediction may have extra columns (each gold column still needs its own
      predicted column).  A mapping is always verified on whole rows.
    * Numbers (int, float, Decimal, but not bool) are equal when
      ``|a - b| <= 1e-6 * max(1, |a|, |b|)``; NaN equals NaN, -0.0 equals 0.0, infinities equal
      by sign.  NULL only equals NULL.  Strings and bytes are exact.  Aware datetimes compare as
      instants; naive ones only equal naive ones; a date only equals a date.  Lists (and tuples)
      compare elementwise and dicts key by key with the same rules.  Other mixes are unequal.
    * Two empty results are equal, whatever their column counts (an empty result carries no
      columns to compare, and psycopg gives no rows to count them from).  An empty result never
      equals a non-empty one.

    Never raises: anything unexpected yields an unequal :class:`Comparison` with a reason.
    """
    n_gold = _safe_len(gold)
    n_pred = _safe_len(pred)
    try:
        gold_rows = _as_rows(gold)
        pred_rows = _as_rows(pred)
        n_gold, n_pred = len(gold_rows), len(pred_rows)
        reason = _compare_rows(gold_rows, pred_rows, order, superset)
    except Exception as exc:  # the scorer must keep going whatever the input is
        reason = _cap(f"results could not be compared ({type(exc).__name__}: {exc})")
    return Comparison(equal=not reason, reason=reason, gold_rows=n_gold, pred_rows=n_pred)


def _as_rows(rows: Sequence[Sequence[object]]) -> list[Row]:
    if type(rows) is list and set(map(type, rows)) <= {tuple}:
        return cast("list[Row]", rows)
    return [tuple(r) for r in rows]


def _safe_len(rows: object) -> int:
    try:
        return len(rows)  # type: ignore[arg-type]
    except Exception:
        return 0


def _width(rows: list[Row]) -> int:
    """Common row length; -1 when rows are ragged (0 rows: 0)."""
    if not rows:
        return 0
    lengths = set(map(len, rows))
    return lengths.pop() if len(lengths) == 1 else -1


def _normalise_order(order: object, width: int) -> tuple[int, ...] | None:
    if order is None:
        return None
    if not isinstance(order, Iterable):
        return ()
    keys = tuple(order)
    for k in keys:
        if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k < width:
            return ()
    return keys


def _compare_rows(
    gold: list[Row], pred: list[Row], order: tuple[int, ...] | None, superset: bool
) -> str:
    n_gold, n_pred = len(gold), len(pred)
    if n_gold == 0 and n_pred == 0:
        return ""
    g_width, p_width = _width(gold), _width(pred)
    if g_width < 0:
        return "gold rows do not all have the same number of columns"
    if p_width < 0:
        return "predicted rows do not all have the same number of columns"
    if n_gold == 0:
        return (
            f"row counts differ: gold 0, predicted {n_pred}; "
            f"first extra row (predicted, not in gold): {_fmt_row(pred[0])}"
        )
    if n_pred == 0:
        return (
            f"row counts differ: gold {n_gold}, predicted 0; "
            f"first missing row (in gold, not predicted): {_fmt_row(gold[0])}"
        )
    if p_width < g_width or (p_width != g_width and not superset):
        text = f"column count differs: gold {g_width}, predicted {p_width}"
        if n_gold != n_pred:
            text += f" (row counts differ too: gold {n_gold}, predicted {n_pred})"
        return text
    return _Matcher(gold, pred, g_width, p_width, _normalise_order(order, g_width)).run()


def _mapping_try_cap(n_rows: int, n_cols: int) -> int:
    """How many column mappings may be verified: 120, fewer for big results (at least 2)."""
    cells = max(1, n_rows * max(1, n_cols))
    return max(2, min(_MAX_MAPPING_TRIES, _MAPPING_CELL_BUDGET // cells))


class _Matcher:
    """State of one comparison of two non-empty results with compatible widths."""

    def __init__(
        self,
        gold: list[Row],
        pred: list[Row],
        g_width: int,
        p_width: int,
        order: tuple[int, ...] | None,
    ) -> None:
        self.gold = gold
        self.pred = pred
        self.g_width = g_width
        self.p_width = p_width
        self.order = order
        self.graw = [list(map(itemgetter(c), gold)) for c in range(g_width)]
        self.praw = [list(map(itemgetter(c), pred)) for c in range(p_width)]
        self.gcols = [_canon_column(c) for c in self.graw]
        self.pcols = [_canon_column(c) for c in self.praw]
        self.pair_budget = _PAIR_BUDGET
        self._gkeys: list[Key] | None = None
        self._gcount: Counter[Key] | None = None
        self._grow_sig: tuple[int, int] | None = None
        self._exact: dict[tuple[int, ...], bool] = {}
        self._gsig: list[tuple[int, int]] | None = None
        self._psig: list[tuple[int, int]] | None = None
        self._coarse_sig: dict[tuple[str, int], tuple[int, int]] = {}
        self._sorted_nums: dict[tuple[str, int], tuple[int, list[object]] | None] = {}

    # -- keys ---------------------------------------------------------------------------------

    def gold_keys(self) -> list[Key]:
        if self._gkeys is None:
            self._gkeys = self._keys(self.gcols, len(self.gold))
        return self._gkeys

    def gold_count(self) -> Counter[Key]:
        if self._gcount is None:
            self._gcount = Counter(self.gold_keys())
        return self._gcount

    def gold_row_signature(self) -> tuple[int, int]:
        if self._grow_sig is None:
            self._grow_sig = _signature(self.gold_keys())
        return self._grow_sig

    def pred_keys(self, mapping: tuple[int, ...]) -> list[Key]:
        return self._keys([self.pcols[j] for j in mapping], len(self.pred))

    @staticmethod
    def _keys(cols: list[list[object]], n: int) -> list[Key]:
        if not cols:
            return [()] * n
        return list(zip(*cols, strict=False))

    def aligned(self, j: int, mapping: tuple[int, ...]) -> Row:
        row = self.pred[j]
        return tuple(row[m] for m in mapping)

    # -- driver -------------------------------------------------------------------------------

    def run(self) -> str:
        n_gold, n_pred = len(self.gold), len(self.pred)
        if n_gold != n_pred:
            mapping = self.diagnostic_mapping()
            missing, extra = self.residue(
                range(n_gold), range(n_pred), self.gold_keys(), self.pred_keys(mapping), mapping
            )
            text = f"row counts differ: gold {n_gold}, predicted {n_pred}"
            if missing:
                text += "; " + self.missing_text(missing[0])
            elif extra:
                text += "; " + self.extra_text(extra[0])
            return text

        if self.g_width == self.p_width and self.exactly_equal(tuple(range(self.g_width))):
            return ""  # the usual case: same columns in the same order
        cap = _mapping_try_cap(n_gold, self.p_width)
        tried: set[tuple[int, ...]] = set()
        first_reason = ""
        unmatched: int | None = None
        previous: list[list[int]] | None = None
        for loose_everywhere in (False, True):
            cands = self.candidates(loose_everywhere)
            if cands == previous:
                break
            previous = cands
            missing_col = self.infeasible_column(cands)
            if missing_col is not None:
                unmatched = missing_col if unmatched is None else unmatched
                if not cands[missing_col]:
                    break  # not even a loose candidate: widening the others cannot help
                continue
            batch: list[tuple[int, ...]] = []
            for mapping in _assignments(cands, _MAX_SEARCH_NODES):
                if len(tried) >= cap:
                    break
                if mapping not in tried:
                    tried.add(mapping)
                    batch.append(mapping)
            # cheap exact test of every mapping first; the tolerant rescue only for the best few
            if any(self.exactly_equal(m) for m in batch):
                return ""
            rescue = len(batch) if n_gold * self.p_width <= _SMALL_CELLS else _TOLERANT_TRIES
            for mapping in batch[:rescue]:
                reason = self.verify(mapping)
                if not reason:
                    return ""
                first_reason = first_reason or reason
        if first_reason:
            return first_reason
        mapping = self.diagnostic_mapping()
        missing, extra = self.residue(
            range(n_gold), range(n_pred), self.gold_keys(), self.pred_keys(mapping), mapping
        )
        parts = []
        if self.g_width > 1 or not (missing or extra):
            col = unmatched if unmatched is not None else 0
            parts.append(
                f"no column of the prediction matches gold column {col + 1} "
                f"(values like {self.sample_values(col)})"
            )
        if missing:
            parts.append(self.missing_text(missing[0]))
        if extra and self.g_width == 1:
            parts.append(self.extra_text(extra[0]))
        return "; ".join(parts)

    # -- column candidates --------------------------------------------------------------------

    def signatures(self) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
        if self._gsig is None or self._psig is None:
            self._gsig = [_signature(c) for c in self.gcols]
            self._psig = [_signature(c) for c in self.pcols]
        return self._gsig, self._psig

    def candidates(self, loose_everywhere: bool) -> list[list[int]]:
        """Per gold column, the predicted columns that may hold it, best first."""
        gsig, psig = self.signatures()
        by_sig: dict[tuple[int, int], list[int]] = {}
        for j, s in enumerate(psig):
            by_sig.setdefault(s, []).append(j)
        exact = [list(by_sig.get(s, [])) for s in gsig]
        cands: list[list[int]] = []
        for i, found in enumerate(exact):
            if not found or loose_everywhere:
                extra = [
                    j for j in range(self.p_width) if j not in found and self.loose_match(i, j)
                ]
                found = found + extra
            cands.append(found)
        self.rank(cands, exact)
        return cands

    def rank(self, cands: list[list[int]], exact: list[list[int]]) -> None:
        """Order candidates: agreement with already-unique columns first, then position."""
        anchors = [(i, c[0]) for i, c in enumerate(exact) if len(c) == 1]
        n = len(self.gold)
        g_anchor: list[Key] | None = None
        p_anchor: list[Key] | None = None
        psig_cache: dict[int, tuple[int, int]] = {}
        for i, found in enumerate(cands):
            if len(found) < 2:
                continue
            agree: set[int] = set()
            if anchors and len(exact[i]) > 1:
                if g_anchor is None or p_anchor is None:
                    g_anchor = self._keys([self.gcols[a] for a, _ in anchors], n)
                    p_anchor = self._keys([self.pcols[b] for _, b in anchors], n)
                target = _signature(list(zip(g_anchor, self.gcols[i], strict=True)))
                for j in exact[i]:
                    if j not in psig_cache:
                        pairs = list(zip(p_anchor, self.pcols[j], strict=True))
                        psig_cache[j] = _signature(pairs)
                    if psig_cache[j] == target:
                        agree.add(j)
            exact_set = set(exact[i])
            found.sort(key=lambda j: (j not in agree, j not in exact_set, abs(j - i), j))

    def coarse_signature(self, side: str, col: int) -> tuple[int, int]:
        key = (side, col)
        if key not in self._coarse_sig:
            raw = self.graw[col] if side == "g" else self.praw[col]
            self._coarse_sig[key] = _signature(_coarse_column(raw))
        return self._coarse_sig[key]

    def numeric_profile(self, side: str, col: int) -> tuple[int, list[object]] | None:
        """(NULL count, numbers sorted) when a column holds only numbers and NULLs."""
        key = (side, col)
        if key not in self._sorted_nums:
            raw = self.graw[col] if side == "g" else self.praw[col]
            self._sorted_nums[key] = _numeric_profile(raw)
        return self._sorted_nums[key]

    def loose_match(self, i: int, j: int) -> bool:
        """Could gold column i equal predicted column j once the tolerance is applied?"""
        if self.coarse_signature("g", i) != self.coarse_signature("p", j):
            return False
        g_prof = self.numeric_profile("g", i)
        if g_prof is None:
            return True  # non-numeric parts agree exactly; rows are verified later
        p_prof = self.numeric_profile("p", j)
        if p_prof is None or g_prof[0] != p_prof[0] or len(g_prof[1]) != len(p_prof[1]):
            return False
        # sorted pairing is optimal for this tolerance (its intervals grow with the value)
        return all(map(_num_equal, g_prof[1], p_prof[1]))

    def infeasible_column(self, cands: list[list[int]]) -> int | None:
        """A gold column that no assignment of distinct predicted columns can cover."""
        matched = _max_matching(len(cands), cands)
        for i, j in enumerate(matched):
            if j < 0:
                return i
        return None

    def diagnostic_mapping(self) -> tuple[int, ...]:
        """A plausible column mapping for messages when no verified one exists.

        Pairs columns greedily by equal signature, then by the overlap of their distinct values
        (on a prefix of the rows when the tables are large), then by position.
        """
        gsig, psig = self.signatures()
        pairs = max(1, self.g_width * self.p_width)
        sample = max(_DIAG_MIN_SAMPLE, _DIAG_CELL_BUDGET // pairs)
        g_sets = [set(c[:sample]) for c in self.gcols]
        p_sets = [set(c[:sample]) for c in self.pcols]
        scored: list[tuple[bool, float, int, int, int]] = []
        for i, g_set in enumerate(g_sets):
            for j, p_set in enumerate(p_sets):
                common = len(g_set & p_set)
                overlap = common / max(1, len(g_set) + len(p_set) - common)
                scored.append((gsig[i] != psig[j], -overlap, abs(i - j), i, j))
        scored.sort()
        mapping = [-1] * self.g_width
        used: set[int] = set()
        for _, _, _, i, j in scored:
            if mapping[i] < 0 and j not in used:
                mapping[i] = j
                used.add(j)
        return tuple(mapping)

    # -- row verification ---------------------------------------------------------------------

    def exactly_equal(self, mapping: tuple[int, ...]) -> bool:
        """Equal without needing the tolerance rescue (canonical keys agree row for row)."""
        if mapping not in self._exact:
            self._exact[mapping] = self._exactly_equal(mapping)
        return self._exact[mapping]

    def _exactly_equal(self, mapping: tuple[int, ...]) -> bool:
        gkeys = self.gold_keys()
        pkeys = self.pred_keys(mapping)
        if self.order is not None:
            # equal runs in the same places imply equal multisets
            return gkeys == pkeys or not self.check_order(gkeys, pkeys, mapping, tolerant=False)
        if _signature(pkeys) != self.gold_row_signature():
            return False
        return bool(dict.__eq__(Counter(pkeys), self.gold_count()))

    def verify(self, mapping: tuple[int, ...]) -> str:
        """Empty string when the prediction, with its columns picked by ``mapping``, equals gold."""
        gkeys = self.gold_keys()
        pkeys = self.pred_keys(mapping)
        if self.order is not None and gkeys == pkeys:
            return ""
        pcount = Counter(pkeys)
        if not dict.__eq__(pcount, self.gold_count()):
            missing, extra = self.residue(
                range(len(gkeys)), range(len(pkeys)), gkeys, pkeys, mapping, pcount
            )
            if missing or extra:
                parts = []
                if missing:
                    parts.append(self.missing_text(missing[0]))
                if extra:
                    parts.append(self.extra_text(extra[0]))
                return "; ".join(parts)
        if self.order is None:
            return ""
        return self.check_order(gkeys, pkeys, mapping, tolerant=True)

    def residue(
        self,
        g_idx: Sequence[int],
        p_idx: Sequence[int],
        gkeys: list[Key],
        pkeys: list[Key],
        mapping: tuple[int, ...],
        pcount: Counter[Key] | None = None,
    ) -> tuple[list[int], list[int]]:
        """Rows (indices) left unpaired after exact and then tolerant pairing, in row order."""
        whole = len(g_idx) == len(gkeys) and len(p_idx) == len(pkeys)
        gcount = self.gold_count() if whole else Counter(gkeys[i] for i in g_idx)
        if pcount is None:
            pcount = Counter(pkeys[j] for j in p_idx)
        g_need: dict[Key, int] = {}
        p_need: dict[Key, int] = {}
        for key, _ in gcount.items() ^ pcount.items():  # keys whose counts differ (C-level)
            surplus = gcount.get(key, 0) - pcount.get(key, 0)
            if surplus > 0:
                g_need[key] = surplus
            elif surplus < 0:
                p_need[key] = -surplus
        g_left = _take(g_idx, gkeys, g_need)
        p_left = _take(p_idx, pkeys, p_need)
        if not g_left or not p_left:
            return g_left, p_left
        if len(g_left) > _MAX_TOLERANT_ROWS or len(p_left) > _MAX_TOLERANT_ROWS:
            return g_left, p_left
        return self.tolerant_pairing(g_left, p_left, mapping)

    def tolerant_pairing(
        self, g_left: list[int], p_left: list[int], mapping: tuple[int, ...]
    ) -> tuple[list[int], list[int]]:
        groups: dict[Key, tuple[list[int], list[int]]] = {}
        for i in g_left:
            groups.setdefault(tuple(map(_coarse, self.gold[i])), ([], []))[0].append(i)
        for j in p_left:
            coarse = tuple(map(_coarse, self.aligned(j, mapping)))
            groups.setdefault(coarse, ([], []))[1].append(j)
        g_rest: list[int] = []
        p_rest: list[int] = []
        for g_group, p_group in groups.values():
            if not g_group or not p_group:
                g_rest.extend(g_group)
                p_rest.extend(p_group)
                continue
            g_un, p_un = self.pair_group(g_group, p_group, mapping)
            g_rest.extend(g_un)
            p_rest.extend(p_un)
        g_rest.sort()
        p_rest.sort()
        return g_rest, p_rest

    def pair_group(
        self, g_group: list[int], p_group: list[int], mapping: tuple[int, ...]
    ) -> tuple[list[int], list[int]]:
        """Pair rows of one coarse group within tolerance; returns what stays unpaired."""
        g_rows = {i: self.gold[i] for i in g_group}
        p_rows = {j: self.aligned(j, mapping) for j in p_group}
        g_key = {i: _row_sort_key(r) for i, r in g_rows.items()}
        p_key = {j: _row_sort_key(r) for j, r in p_rows.items()}
        g_sorted = sorted(g_group, key=g_key.__getitem__)
        p_sorted = sorted(p_group, key=p_key.__getitem__)
        # Merge-like walk: optimal when rows have one number, a good first pass otherwise.
        limit = 2 * math.isqrt(self.pair_budget) + 2
        g_un: list[int] = []
        p_un: list[int] = []
        gi = pj = 0
        while gi < len(g_sorted) and pj < len(p_sorted):
            i, j = g_sorted[gi], p_sorted[pj]
            if _row_close(g_rows[i], p_rows[j]):
                gi += 1
                pj += 1
                continue
            if g_key[i] <= p_key[j]:
                g_un.append(i)
                gi += 1
            else:
                p_un.append(j)
                pj += 1
            if len(g_un) + len(p_un) > limit:  # too different for the bipartite pass anyway
                break
        g_un.extend(g_sorted[gi:])
        p_un.extend(p_sorted[pj:])
        if not g_un or not p_un:
            return g_un, p_un
        cost = len(g_un) * len(p_un)
        if cost > self.pair_budget:
            return g_un, p_un
        self.pair_budget -= cost
        adj = [[k for k, j in enumerate(p_un) if _row_close(g_rows[i], p_rows[j])] for i in g_un]
        matched = _max_matching(len(g_un), adj)
        taken = {k for k in matched if k >= 0}
        g_rest = [i for i, k in zip(g_un, matched, strict=True) if k < 0]
        p_rest = [j for k, j in enumerate(p_un) if k not in taken]
        return g_rest, p_rest

    def check_order(
        self, gkeys: list[Key], pkeys: list[Key], mapping: tuple[int, ...], *, tolerant: bool
    ) -> str:
        """Run-by-run check ("" when in order); without ``tolerant``, runs must match exactly."""
        n = len(gkeys)
        cols = self.order or ()
        first = next((k for k in range(n) if gkeys[k] != pkeys[k]), n)
        if not cols:
            for k in range(first, n):
                if gkeys[k] != pkeys[k] and (
                    not tolerant or not _row_close(self.gold[k], self.aligned(k, mapping))
                ):
                    return (
                        f"order differs at row {k + 1}: expected {_fmt_row(self.gold[k])}, "
                        f"got {_fmt_row(self.pred[k])}"
                    )
            return ""

        sort_keys = (
            self.gcols[cols[0]] if len(cols) == 1 else self._keys([self.gcols[c] for c in cols], n)
        )
        start = first  # runs before the first difference are identical: skip them
        while start > 0 and sort_keys[start - 1] == sort_keys[start]:
            start -= 1
        bounds = [start]
        bounds.extend(k for k in range(start + 1, n) if sort_keys[k] != sort_keys[k - 1])
        bounds.append(n)
        for start, end in pairwise(bounds):
            if gkeys[start:end] != pkeys[start:end] and not self.run_ok(
                start, end, gkeys, pkeys, mapping, tolerant
            ):
                return self.order_text(start, end, gkeys, pkeys, mapping)
        return ""

    def run_ok(
        self,
        start: int,
        end: int,
        gkeys: list[Key],
        pkeys: list[Key],
        mapping: tuple[int, ...],
        tolerant: bool,
    ) -> bool:
        if not tolerant:
            return bool(dict.__eq__(Counter(gkeys[start:end]), Counter(pkeys[start:end])))
        if end - start == 1:
            return _row_close(self.gold[start], self.aligned(start, mapping))
        span = range(start, end)
        missing, extra = self.residue(span, span, gkeys, pkeys, mapping)
        return not missing and not extra

    def order_text(
        self, start: int, end: int, gkeys: list[Key], pkeys: list[Key], mapping: tuple[int, ...]
    ) -> str:
        cols = self.order or ()
        expected = tuple(self.gold[start][c] for c in cols)
        for k in range(start, end):
            got_row = self.aligned(k, mapping)
            got = tuple(got_row[c] for c in cols)
            if not _row_close(expected, got):
                return (
                    f"order differs at row {k + 1}: expected a row with keys "
                    f"{_fmt_row(expected)}, got {_fmt_row(got)}"
                )
        # every key is right, so rows moved between runs that share a key
        span = range(start, end)
        missing, extra = self.residue(span, span, gkeys, pkeys, mapping)
        where = f"row {start + 1}" if end - start == 1 else f"rows {start + 1}-{end}"
        parts = [f"order differs in {where} (sort keys {_fmt_row(expected)})"]
        if missing:
            parts.append(self.missing_text(missing[0]))
        if extra:
            parts.append(self.extra_text(extra[0]))
        return "; ".join(parts)

    # -- messages -----------------------------------------------------------------------------

    def missing_text(self, i: int) -> str:
        return f"first missing row (in gold, not predicted): {_fmt_row(self.gold[i])}"

    def extra_text(self, j: int) -> str:
        return f"first extra row (predicted, not in gold): {_fmt_row(self.pred[j])}"

    def sample_values(self, col: int) -> str:
        seen: set[object] = set()
        shown: list[str] = []
        more = False
        for row, key in zip(self.gold, self.gcols[col], strict=True):
            if key in seen:
                continue
            if len(shown) == 3:
                more = True
                break
            seen.add(key)
            shown.append(_fmt_value(row[col]))
        return _cap(", ".join(shown) + (", ..." if more else ""), 120)


def _take(indices: Iterable[int], keys: list[Key], need: dict[Key, int]) -> list[int]:
    """The first rows (in order) whose keys are still needed, consuming ``need``."""
    out: list[int] = []
    remaining = sum(need.values())
    if not remaining:
        return out
    for i in indices:
        k = keys[i]
        if k in need and need[k] > 0:
            need[k] -= 1
            out.append(i)
            remaining -= 1
            if not remaining:
                break
    return out


def _assignments(cands: list[list[int]], max_nodes: int) -> Iterator[tuple[int, ...]]:
    """Injective choices of one candidate per gold column, in preference order (iterative)."""
    n = len(cands)
    if n == 0:
        yield ()
        return
    seq = sorted(range(n), key=lambda i: (len(cands[i]), i))
    choice = [0] * n
    current = [-1] * n
    used: set[int] = set()
    level = 0
    nodes = 0
    while level >= 0:
        col = seq[level]
        options = cands[col]
        if current[col] >= 0:
            used.discard(current[col])
            current[col] = -1
        placed = False
        while choice[level] < len(options):
            j = options[choice[level]]
            choice[level] += 1
            nodes += 1
            if nodes > max_nodes:
                return
            if j not in used:
                used.add(j)
                current[col] = j
                placed = True
                break
        if not placed:
            choice[level] = 0
            level -= 1
        elif level == n - 1:
            yield tuple(current)
        else:
            level += 1


# --------------------------------------------------------------------------------------------
# ORDER BY analysis


def order_keys(gold_sql: str) -> tuple[int, ...] | None:
    """Which output columns of the gold query (0-based) its top-level ORDER BY sorts on.

    ``None``: no top-level ORDER BY (compare as multisets).  ``()``: ordered, but at least one key
    could not be mapped to an output column (or the SQL does not parse, or the output columns are
    not known, as with ``SELECT *``), so the whole row order is enforced.  Only the ORDER BY of
    the outermost SELECT or set operation counts, never one inside a CTE or subquery.  Keys map by
    1-based ordinal, by output name (alias or column name), or by an expression equal to a
    projection's expression.  Never raises.
    """
    try:
        return _order_keys(gold_sql)
    except Exception:
        return ()


def _order_keys(sql: str) -> tuple[int, ...] | None:
    tree = sqlglot.parse_one(sql, read="postgres")
    if not isinstance(tree, exp.Query):
        return ()
    tree = normalize_identifiers(tree, dialect="postgres")
    node: exp.Query = tree
    while True:
        ordering = node.args.get("order")
        if isinstance(ordering, exp.Order):
            break
        inner = node.this if isinstance(node, exp.Subquery) else None
        if isinstance(inner, exp.Query):
            node = inner
            continue
        return None

    head: object = node  # the leftmost SELECT names the output columns
    while not isinstance(head, exp.Select):
        head = getattr(head, "this", None)
        if head is None or isinstance(head, str):
            return ()
    projections = list(head.expressions)
    for p in projections:
        if isinstance(p, exp.Star) or (isinstance(p, exp.Column) and isinstance(p.this, exp.Star)):
            return ()

    keys: list[int] = []
    for item in ordering.expressions:
        target = item.this if isinstance(item, exp.Ordered) else item
        index = _map_order_key(target, projections)
        if index is None:
            return ()
        keys.append(index)
    return tuple(keys)


def _map_order_key(target: exp.Expression, projections: list[exp.Expression]) -> int | None:
    if isinstance(target, exp.Literal):
        if target.is_string:
            return None
        try:
            ordinal = int(str(target.this))
        except ValueError:
            return None
        return ordinal - 1 if 1 <= ordinal <= len(projections) else None

    def bare(p: exp.Expression) -> exp.Expression:
        return p.this if isinstance(p, exp.Alias) else p

    if isinstance(target, exp.Column) and not target.table:
        for k, p in enumerate(projections):
            if isinstance(p, exp.Alias) and p.alias == target.name:
                return k
            if isinstance(p, exp.Column) and p.name == target.name:
                return k
    for k, p in enumerate(projections):
        if bare(p) == target:
            return k
    if isinstance(target, exp.Column) and not isinstance(target.this, exp.Star):
        for k, p in enumerate(projections):
            inner = bare(p)
            if (
                isinstance(inner, exp.Column)
                and inner.name == target.name
                and (not inner.table or not target.table or inner.table == target.table)
            ):
                return k
    return None


def value_key(value: object) -> object:
    """The hashable key the comparator uses for one value (equal keys: equal values)."""
    try:
        return _canon(value)
    except Exception:
        return ("unkeyable", repr(value))
