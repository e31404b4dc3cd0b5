"""Whole columns at once: canonical keys as numpy arrays and 64-bit codes for the fast passes.

Every column gets a ``uint64`` *code* per value, such that equal canonical keys always get equal
codes, in any column of either side (numbers are coded from the float64 of their key, anything
else from the key's hash).  Codes only ever propose equality: a multiset of rows is accepted
only after the rows it pairs up are found to have equal keys (:func:`aligned_equal`), so a
collision costs time, never correctness.  Codes never decide the order of anything printed.

The exact keys of a column are kept in one of four *families*:

* ``"i"``: an ``int64`` array (a column of ints, or of integral Decimals);
* ``"f"``: the bits (``int64``) of a ``float64`` array of keys, -0.0 and NaN normalised (floats,
  Decimals with a fractional part, ints up to 2**53 mixed with them); a NULL of a nullable float
  or Decimal column is the bit pattern :data:`NULL_BITS`, a NaN no key ever has (every NaN key is
  normalised to one other pattern), so NULL equals only NULL and the family stays numeric;
* ``"n"``: numbers given by an :class:`Interner` shared by both sides (a column of text, NULLs,
  dates and the like with few distinct values: compared as integers, no Python call per value);
* ``"o"``: an object array of canonical keys (text, NULLs, anything else).
"""

from __future__ import annotations

import datetime as dt
import decimal
import operator
import uuid
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import chain, count, repeat
from typing import Any, Final, cast

import numpy as np
import numpy.typing as npt

from pytest_heron.compare.values import D_ONE, NAN_KEY, TWO20, TWO21, Row, canon_column

U64 = npt.NDArray[np.uint64]
I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
Obj = npt.NDArray[np.object_]

_EXACT_INT: Final = 2**53  # ints up to this magnitude are exact as float64
_INT64_MAX: Final = 2**63 - 1
_ROW_SEED: Final = np.uint64(0x9E37_79B9_7F4A_7C15)
_SIG_SALT: Final = np.uint64(0x5EED_C0DE_0BAD_F00D)
_M1: Final = np.uint64(0xBF58_476D_1CE4_E5B9)
_M2: Final = np.uint64(0x94D0_49BB_1331_11EB)
_S30: Final = np.uint64(30)
_S27: Final = np.uint64(27)
_S31: Final = np.uint64(31)
_MASK64: Final = 0xFFFF_FFFF_FFFF_FFFF
_NAN_BITS: Final = np.float64("nan").view(np.int64)
NULL_BITS: Final = np.int64(0x7FF0_0000_0000_4E55)  # a NaN payload that _float_bits never makes


def mix(z: U64) -> U64:
    """The splitmix64 finaliser, elementwise (a bijection of 64-bit words)."""
    with np.errstate(over="ignore"):
        z = (z ^ (z >> _S30)) * _M1
        z = (z ^ (z >> _S27)) * _M2
    return z ^ (z >> _S31)


@dataclass
class ColumnKeys:
    """Codes and exact keys of one column (see the module docstring)."""

    codes: U64
    exact: I64 | Obj
    family: str
    values: list[object] | None = None  # family "n": the values the numbers stand for


def _float_bits(keys: F64) -> I64:
    keys = keys + 0.0  # -0.0 becomes 0.0
    bits = keys.view(np.int64).copy()
    bits[np.isnan(keys)] = _NAN_BITS
    return bits


def _float_family(keys: F64) -> ColumnKeys:
    bits = _float_bits(keys)
    return ColumnKeys(mix(bits.view(np.uint64)), bits, "f")


def _int_family(ints: I64) -> ColumnKeys:
    bits = _float_bits(ints.astype(np.float64))
    return ColumnKeys(mix(bits.view(np.uint64)), ints, "i")


def grid(x: F64) -> F64 | None:
    """Vectorised :func:`values.canon_float` (NaN stays NaN); None when a value overflows.

    Same steps: 2**-20 below 1, 21 significant bits up to 2**21, whole numbers from 2**21 on.
    Every step is computed for every value and the right one picked (cheaper than masking).
    """
    magnitude = np.abs(x)
    with np.errstate(invalid="ignore", over="ignore"):
        mantissa, exponent = np.frexp(x)
        out: F64 = np.ldexp(np.rint(mantissa * TWO21), exponent - 21)  # from 1 up to 2**21
        if not np.isfinite(out[np.isfinite(x)]).all():
            return None  # cannot happen below 2**21; kept as the contract says
        np.copyto(out, np.rint(x * TWO20) / TWO20, where=magnitude < 1.0)
        np.copyto(out, np.rint(x), where=magnitude >= TWO21)  # infinities included
    return out


_CHUNK: Final = 1 << 14  # values read per step: the second read of a step hits the cache
_NONE: Final = type(None)
_NULL_CODE: Final = mix(np.array([hash(None) & _MASK64], dtype=np.uint64))[0]


def _typed(col: list[object], kind: type, dtype: type[np.generic]) -> npt.NDArray[Any] | None:
    """The column as an array if every value is exactly of type ``kind`` (and fits).

    Two passes over the whole column: numbers are small, so the second pass mostly finds them
    in cache, and chunking (as text is read) costs more in copies than it saves.
    """
    if set(map(type, col)) != {kind}:
        return None
    try:
        return np.fromiter(col, dtype, len(col))
    except OverflowError:
        return None


# types that are their own canonical key and are coded by their hash
_HASHED: Final = frozenset(
    {str, _NONE, bytes, dt.date, dt.datetime, dt.time, dt.timedelta, uuid.UUID}
)


class Interner:
    """Numbers the distinct values of text-like columns, shared by both sides of one comparison.

    Equal values get the same number (a dict finds them: hash, then ``==``, which is the exact
    rule for the types of :data:`_HASHED`), so two columns numbered by the same interner compare
    as two integer arrays. Numbers mean nothing across interners, and their order depends on
    which column was read first: they are only ever tested for equality.
    """

    def __init__(self) -> None:
        self.number: defaultdict[object, int] = defaultdict(count().__next__)

    def __len__(self) -> int:
        return len(self.number)


_FEW_DISTINCT: Final = 256  # a column numbers its values while it adds at most this many ...
_DISTINCT_SHARE: Final = 16  # ... or one per this many rows, whichever is more
_PROBE: Final = 1024  # values numbered first: more than 64 new numbers among them stop it


def _hashed_codes(
    col: list[object], interner: Interner | None = None
) -> tuple[U64, Obj | I64, str] | None:
    """Codes, exact keys and family of a column of text, NULLs, dates and the like (None if it
    holds anything else). One chunk at a time: each value is read a few times while in cache.

    With an ``interner``, a column of few distinct values gets their numbers (family ``"n"``);
    once it has added too many new ones it falls back to an object array (``"o"``).
    """
    n = len(col)
    out = np.empty(n, dtype=np.int64)
    numbers: I64 | None = None if interner is None else np.empty(n, dtype=np.int64)
    exact: Obj | None = None if interner is not None else np.empty(n, dtype=object)
    allowed = max(_FEW_DISTINCT, n // _DISTINCT_SHARE)
    for start in range(0, n, _CHUNK):
        part = col[start : start + _CHUNK]
        if not set(map(type, part)) <= _HASHED:
            return None
        out[start : start + len(part)] = np.fromiter(map(hash, part), np.int64, len(part))
        if numbers is not None and interner is not None:
            before = len(interner)
            number = interner.number.__getitem__
            if start == 0:  # a probe first: most columns of many values stop here, cheaply
                probe = numbers[: min(_PROBE, len(part))]
                probe[:] = np.fromiter(map(number, part[:_PROBE]), np.int64, len(probe))
                fresh = len(interner) - before
                if fresh <= _PROBE // _DISTINCT_SHARE:
                    rest = part[_PROBE:]
                    numbers[len(probe) : len(part)] = np.fromiter(
                        map(number, rest), np.int64, len(rest)
                    )
                else:
                    allowed = -1
            else:
                got = map(number, part)
                numbers[start : start + len(part)] = np.fromiter(got, np.int64, len(part))
            allowed -= len(interner) - before
            if allowed >= 0:
                continue
            numbers = None  # too many distinct values: objects from here on
            exact = np.empty(n, dtype=object)
            exact[:start] = col[:start]
        assert exact is not None
        exact[start : start + len(part)] = part
    codes = mix(out.view(np.uint64))
    if numbers is not None:
        return codes, numbers, "n"
    assert exact is not None
    return codes, exact, "o"


def column_keys(
    col: list[object], interner: Interner | None = None
) -> tuple[ColumnKeys, list[object] | None]:
    """Codes and exact keys of a column, plus its Python keys when they had to be built.

    Columns keyed with the same ``interner`` (or none) can be compared with each other; mixing
    columns numbered by two interners would compare unrelated numbers (see :class:`Side`).
    """
    first = type(col[0]) if col else _NONE
    if first is int:
        ints = _typed(col, int, np.int64)
        if ints is not None:
            return _int_family(ints), col
    elif first is float:
        floats = _typed(col, float, np.float64)
        keys = None if floats is None else grid(floats)
        if keys is not None:
            return _float_family(keys), None
    if first in _HASHED:
        hashed = _hashed_codes(col, interner)
        if hashed is not None:
            codes, exact, family = hashed
            return ColumnKeys(codes, exact, family, col if family == "n" else None), col
    kinds = set(map(type, col))
    numeric = kinds - {_NONE}
    if len(numeric) == 1 and numeric <= {int, float, decimal.Decimal}:
        made = _numeric_column(col, numeric.pop(), _NONE in kinds)
        if made is not None:
            return made
    keys_list = canon_column(col)
    return generic_keys(keys_list), keys_list


def _numeric_column(
    col: list[object], kind: type, has_null: bool
) -> tuple[ColumnKeys, list[object] | None] | None:
    """A column of one number type, maybe with NULLs; None to leave it to the generic path."""
    if kind is decimal.Decimal:
        made = _decimal_column(col)
        return None if made is None else (made, None)
    values = [v for v in col if v is not None] if has_null else col
    own_keys: list[object] | None = None
    if kind is int:
        ints = _typed(values, int, np.int64)
        if ints is None:
            return None
        if not has_null:
            return _int_family(ints), col
        floats: F64 | None = ints.astype(np.float64)
        own_keys = col
    else:
        floats = _typed(values, float, np.float64)
        floats = None if floats is None else grid(floats)
    if floats is None:
        return None
    if not has_null:
        return _float_family(floats), None
    nulls = np.fromiter(map(operator.is_, col, repeat(None)), dtype=bool, count=len(col))
    codes = np.empty(len(col), dtype=np.uint64)
    codes[nulls] = _NULL_CODE
    bits = _float_bits(floats)
    codes[~nulls] = mix(bits.view(np.uint64))
    if own_keys is not None:
        return ColumnKeys(codes, _objects(own_keys), "o"), own_keys
    exact = np.full(len(col), NULL_BITS, dtype=np.int64)
    exact[~nulls] = bits
    return ColumnKeys(codes, exact, "f"), None


_REMAINDER: Final = decimal.Context(prec=28, traps=[decimal.InvalidOperation])


def _decimal_column(col: list[object]) -> ColumnKeys | None:
    """Keys of a column of Decimals and NULLs in the ``"f"`` family: integers as themselves
    (exact up to 2**53), other values gridded, NULLs as :data:`NULL_BITS`.

    None when a value needs the per-value path: an infinity or signalling NaN, an integer part
    too long for the remainder, an integer beyond 2**53.
    """
    cells = _objects(col)
    try:
        floats = cells.astype(np.float64)  # a NULL becomes NaN, a Decimal its nearest float
    except ValueError:  # a signalling NaN
        return None
    if np.isinf(floats).any():
        return None
    # An integral Decimal has an integral nearest float (floats from 2**52 on are all whole), so
    # only the values whose float is whole need the exact test (NaN and NULL are not whole).
    maybe = np.flatnonzero(floats == np.rint(floats))
    integral = np.zeros(len(col), dtype=bool)
    if maybe.size:
        picked = cast("list[decimal.Decimal]", cells[maybe].tolist())
        try:
            fractions = list(map(_REMAINDER.remainder, picked, repeat(D_ONE)))
        except decimal.InvalidOperation:  # an integer part longer than the context's precision
            return None
        integral[maybe] = np.fromiter(map(operator.not_, fractions), dtype=bool, count=maybe.size)
    if (np.abs(floats[integral]) > _EXACT_INT).any():
        return None
    keys = grid(floats)
    if keys is None:
        return None
    keys[integral] = floats[integral]
    bits = _float_bits(keys)
    codes = mix(bits.view(np.uint64))
    nan_at = np.flatnonzero(np.isnan(floats))
    if nan_at.size:  # NULLs among them (a Decimal NaN keeps the NaN key)
        nulls = nan_at[np.fromiter(map(operator.is_, cells[nan_at], repeat(None)), bool)]
        bits[nulls] = NULL_BITS
        codes[nulls] = _NULL_CODE
    return ColumnKeys(codes, bits, "f")


def _float_keys(keys: F64) -> list[object]:
    """Python keys from float64 keys (NaN becomes the NaN key, :data:`NULL_BITS` None)."""
    out: list[object] = keys.tolist()
    at = np.flatnonzero(np.isnan(keys))
    if at.size:
        nulls = keys.view(np.int64)[at] == NULL_BITS
        for i, null in zip(at.tolist(), nulls.tolist(), strict=True):
            out[i] = None if null else NAN_KEY
    return out


def _objects(keys: list[object]) -> Obj:
    return np.fromiter(keys, dtype=object, count=len(keys))


def generic_keys(keys: list[object]) -> ColumnKeys:
    """Codes and exact keys from a list of canonical keys of any kinds."""
    n = len(keys)
    kinds = set(map(type, keys))
    if kinds <= {int, float}:
        ints = [k for k in keys if type(k) is int]
        if kinds == {int} and (not ints or (min(ints) >= -_INT64_MAX and max(ints) <= _INT64_MAX)):
            return _int_family(np.array(keys, dtype=np.int64))
        if not ints or (min(ints) >= -_EXACT_INT and max(ints) <= _EXACT_INT):
            return _float_family(np.array(keys, dtype=np.float64))
    elif not kinds & {int, float} and (tuple not in kinds or NAN_KEY not in keys):
        hashes = np.fromiter(map(hash, keys), dtype=np.int64, count=n)  # no number among them
        return ColumnKeys(mix(hashes.view(np.uint64)), _objects(keys), "o")
    codes = np.empty(n, dtype=np.uint64)
    num_at: list[int] = []
    num_vals: list[float] = []
    hashed: list[int] = []
    for i, k in enumerate(keys):
        t = type(k)
        if t is int or t is float:
            try:
                num_vals.append(float(k))  # type: ignore[arg-type]
            except OverflowError:  # an int beyond the float range: only ints can equal it
                hashed.append(hash(k) & _MASK64)
                continue
            num_at.append(i)
            hashed.append(0)
        elif t is tuple and k == NAN_KEY:
            num_at.append(i)
            num_vals.append(float("nan"))
            hashed.append(0)
        else:
            hashed.append(hash(k) & _MASK64)
    codes[:] = mix(np.array(hashed, dtype=np.uint64))
    if num_at:
        bits = _float_bits(np.array(num_vals, dtype=np.float64))
        codes[np.array(num_at, dtype=np.intp)] = mix(bits.view(np.uint64))
    return ColumnKeys(codes, _objects(keys), "o")


def signature(codes: U64) -> tuple[int, int]:
    """Order-independent hash of a column's multiset of keys (equal multisets: equal result)."""
    return len(codes), int(mix(codes ^ _SIG_SALT).sum(dtype=np.uint64))


def _weight(position: int) -> np.uint64:
    """An odd multiplier per column position (odd: multiplying by it is a bijection)."""
    return np.uint64(int(mix(np.array([position + 1], dtype=np.uint64))[0]) | 1)


def row_codes(columns: list[U64], n: int) -> U64:
    """One code per row from the codes of its columns, in the given column order: the columns'
    codes weighted by position and summed (mod 2**64), then mixed once."""
    out = np.full(n, _ROW_SEED, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for position, codes in enumerate(columns):
            out += codes * _weight(position)
    return mix(out)


def python_keys(ck: ColumnKeys) -> list[object]:
    """The canonical keys of a column as Python objects (equal to what ``canon`` gives)."""
    if ck.family == "o":
        return list(ck.exact)
    if ck.family == "n":
        assert ck.values is not None
        return list(ck.values)
    if ck.family == "i":
        return ck.exact.tolist()  # type: ignore[no-any-return]
    return _float_keys(ck.exact.view(np.float64))


def aligned_equal(
    a: ColumnKeys, ia: npt.NDArray[np.intp], b: ColumnKeys, ib: npt.NDArray[np.intp]
) -> bool:
    """Whether ``a``'s keys at ``ia`` equal ``b``'s keys at ``ib``, position by position."""
    if a.family == b.family and a.family != "o":
        return bool(np.array_equal(a.exact[ia], b.exact[ib]))
    if {a.family, b.family} == {"i", "f"}:
        ints, floats = (a, b) if a.family == "i" else (b, a)
        i_idx, f_idx = (ia, ib) if a.family == "i" else (ib, ia)
        picked = ints.exact[i_idx]
        if picked.size and max(-int(picked.min()), int(picked.max())) > _EXACT_INT:
            return _objects_equal(a, ia, b, ib)
        as_bits = _float_bits(picked.astype(np.float64))
        return bool(np.array_equal(as_bits, floats.exact[f_idx]))
    return _objects_equal(a, ia, b, ib)


def equal_at(
    a: ColumnKeys, ia: npt.NDArray[np.intp], b: ColumnKeys, ib: npt.NDArray[np.intp]
) -> npt.NDArray[np.bool_]:
    """Per position, whether ``a``'s key at ``ia`` equals ``b``'s key at ``ib`` (exactly)."""
    if a.family == b.family and a.family != "o":
        return np.asarray(a.exact[ia] == b.exact[ib], dtype=bool)
    if {a.family, b.family} == {"i", "f"}:
        ints, floats = (a, b) if a.family == "i" else (b, a)
        i_idx, f_idx = (ia, ib) if a.family == "i" else (ib, ia)
        picked = ints.exact[i_idx]
        if not picked.size or max(-int(picked.min()), int(picked.max())) <= _EXACT_INT:
            as_bits = _float_bits(picked.astype(np.float64))
            return np.asarray(as_bits == floats.exact[f_idx], dtype=bool)
    left = _objects(python_keys(a)) if a.family != "o" else a.exact
    right = _objects(python_keys(b)) if b.family != "o" else b.exact
    return np.fromiter(
        (x == y for x, y in zip(left[ia], right[ib], strict=True)), dtype=bool, count=len(ia)
    )


def adjacent_equal(ck: ColumnKeys) -> npt.NDArray[np.bool_]:
    """Per row after the first, whether its key equals the key of the row before (exactly)."""
    exact = ck.exact
    return np.asarray(exact[1:] == exact[:-1], dtype=bool)


def _objects_equal(
    a: ColumnKeys, ia: npt.NDArray[np.intp], b: ColumnKeys, ib: npt.NDArray[np.intp]
) -> bool:
    left = _objects(python_keys(a)) if a.family != "o" else a.exact
    right = _objects(python_keys(b)) if b.family != "o" else b.exact
    return bool((_at(left, ia) == _at(right, ib)).all())


def _at(values: npt.NDArray[Any], at: npt.NDArray[np.intp]) -> npt.NDArray[Any]:
    """``values[at]``, without the copy when ``at`` is every position in order (the common
    case of one side of a check: copying an object array touches every object once more)."""
    n = len(values)
    if n < 2:
        return values[at]
    if len(at) == n and at[0] == 0 and at[-1] == n - 1 and bool((at[1:] - at[:-1] == 1).all()):
        return values
    return values[at]


class Table:
    """A result's cells in one flat list, row after row; indexing gives a row as a tuple."""

    def __init__(self, cells: list[object], n: int, width: int) -> None:
        self.cells = cells
        self.n = n
        self.width = width

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> Row:
        if not 0 <= i < self.n:
            raise IndexError(i)
        w = self.width
        return tuple(self.cells[i * w : (i + 1) * w])

    def __iter__(self) -> Iterator[Row]:
        return map(self.__getitem__, range(self.n))

    def column(self, c: int) -> list[object]:
        return self.cells[c :: self.width]


def table(rows: Sequence[Sequence[object]]) -> Table | None:
    """Rows as a :class:`Table` (each row read as ``tuple(row)`` would); None if ragged.

    Reads the rows once, a chunk at a time, whatever the width: on big results the cost is memory
    traffic, so the number of passes over the rows is what counts.
    """
    if type(rows) is not list:
        rows = list(rows)
    n = len(rows)
    lengths: set[int] = set()
    cells: list[object] = []
    try:
        for start in range(0, n, _CHUNK):
            part = rows[start : start + _CHUNK]
            lengths.update(map(len, part))
            cells.extend(chain.from_iterable(part))
    except TypeError:  # rows without a length: read them as tuples
        return table([tuple(r) for r in rows])
    if len(lengths) > 1:
        return None
    width = lengths.pop() if lengths else 0
    if len(cells) != n * width:  # rows whose items disagree with their length
        return table([tuple(r) for r in rows])
    return Table(cells, n, width)


class Side:
    """The columns of one result (gold or predicted), each computed once and on demand.

    The two sides of a comparison share one :class:`Interner` (:func:`sides`); a side built
    alone numbers nothing, so its columns compare with any other side's.
    """

    def __init__(self, rows: Table, interner: Interner | None = None) -> None:
        self.rows = rows
        self.interner = interner
        self.n = len(rows)
        self.width = rows.width
        self._raw: dict[int, list[object]] = {}
        self._ck: dict[int, ColumnKeys] = {}
        self._keys: dict[int, list[object]] = {}
        self._sig: dict[int, tuple[int, int]] = {}

    def raw(self, c: int) -> list[object]:
        """The values of column ``c`` as they came."""
        if c not in self._raw:
            self._raw[c] = self.rows.column(c)
        return self._raw[c]

    def ck(self, c: int) -> ColumnKeys:
        if c not in self._ck:
            ck, keys = column_keys(self.raw(c), self.interner)
            self._ck[c] = ck
            if keys is not None:
                self._keys[c] = keys
        return self._ck[c]

    def keys(self, c: int) -> list[object]:
        """Canonical keys of column ``c`` as Python objects (for the row-by-row passes)."""
        if c not in self._keys:
            self._keys[c] = python_keys(self.ck(c))
        return self._keys[c]

    def codes(self, c: int) -> U64:
        return self.ck(c).codes

    def signature(self, c: int) -> tuple[int, int]:
        if c not in self._sig:
            self._sig[c] = signature(self.codes(c))
        return self._sig[c]


def sides(gold: Table, pred: Table) -> tuple[Side, Side]:
    """The two sides of one comparison, numbering text-like values with one shared interner."""
    interner = Interner()
    return Side(gold, interner), Side(pred, interner)
