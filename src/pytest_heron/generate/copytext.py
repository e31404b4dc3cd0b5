"""Render generated columns as PostgreSQL COPY text: one line per row, tab-separated, ``\\N``
for NULL. Rendering uses only integer arithmetic and fixed formats, so equal values always give
equal bytes.

The whole chunk is built as one byte matrix, a row per table row: every column renders into a
block of fixed width, padded with NUL bytes anywhere inside the block, with tab and newline
columns between the blocks. NUL cannot occur in PostgreSQL text, so dropping every NUL byte of
the matrix (one vectorised compress) leaves exactly the COPY text. Nothing loops per row in
Python except reading text values out of their object array.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np
import numpy.typing as npt

from pytest_heron.generate.columns import Col

_ESCAPES = str.maketrans({"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"})
_SPECIAL = ("\\", "\n", "\r", "\t")
_ZERO = ord("0")
_NULL = np.frombuffer(b"\\N", dtype=np.uint8)

Block = npt.NDArray[np.uint8]
Mask = npt.NDArray[np.bool_]


def _escape(values: list[str]) -> list[str]:
    """COPY-escape text values; one pass over all of them, and none when nothing needs it."""
    joined = "\x00".join(values)  # NUL cannot occur in PostgreSQL text
    if not any(ch in joined for ch in _SPECIAL):
        return values
    return joined.translate(_ESCAPES).split("\x00")


def utf8_parts(strings: list[Any], prefix: str = "") -> tuple[Block, npt.NDArray[np.int64]]:
    """The UTF-8 bytes of ``prefix + string`` for each string, back to back, and the length of
    each in bytes. Non-strings are converted with ``str`` first.

    Per column, not per value: the strings are joined with NUL (PostgreSQL text cannot hold
    it) and encoded once; the byte lengths are the gaps between the NULs, and the bytes are
    the blob without them.

    >>> data, sizes = utf8_parts(["ab", "", "é"])
    >>> bytes(data), sizes.tolist()
    (b'ab\xc3\xa9', [2, 0, 2])
    """
    count = len(strings)
    if not count:
        return np.zeros(0, dtype=np.uint8), np.zeros(0, dtype=np.int64)
    glue = "\x00" + prefix
    try:
        joined = prefix + glue.join(strings)
    except TypeError:  # a value that is not a str
        strings = [str(x) for x in strings]
        joined = prefix + glue.join(strings)
    raw = np.frombuffer(joined.encode(), dtype=np.uint8)
    ends = np.flatnonzero(raw == 0)
    if len(ends) == count - 1:
        sizes = np.diff(ends, prepend=-1, append=len(raw)) - 1
        return np.delete(raw, ends), sizes.astype(np.int64)
    # a string holds a NUL itself: count and join without separators
    parts = [(prefix + x).encode() for x in strings]
    sizes = np.fromiter((len(x) for x in parts), dtype=np.int64, count=count)
    return np.frombuffer(b"".join(parts), dtype=np.uint8), sizes


def utf8_rows(strings: list[Any]) -> tuple[Block, Mask, npt.NDArray[np.int64]]:
    """UTF-8 bytes of each string, NUL-padded to the longest, a row per string; with the mask
    of the bytes that belong to the string and each string's length in bytes
    (:func:`utf8_parts` laid out in rows). (A string holding NUL is padded like the others,
    but its NUL bytes count as its own; COPY would refuse it.)

    >>> block, keep, sizes = utf8_rows(["ab", "", "é"])
    >>> block.tolist(), sizes.tolist()
    ([[97, 98], [0, 0], [195, 169]], [2, 0, 2])
    """
    count = len(strings)
    if not count:
        empty = np.zeros((0, 1), dtype=np.uint8)
        return empty, empty.astype(bool), np.zeros(0, dtype=np.int64)
    data, sizes = utf8_parts(strings)
    width = max(1, int(sizes.max()))
    keep = np.arange(width) < sizes[:, None]
    out = np.zeros((count, width), dtype=np.uint8)
    out[keep] = data
    return out, keep, sizes


def utf8_block(strings: list[Any]) -> Block:
    """The padded UTF-8 rows of :func:`utf8_rows` alone."""
    return utf8_rows(strings)[0]


def _text(values: npt.NDArray[Any]) -> Block:
    """The COPY-escaped text of each value as :func:`utf8_block`."""
    return utf8_block(_escape([str(x) for x in values.tolist()]))


_PAIRS = np.array([[_ZERO + i // 10, _ZERO + i % 10] for i in range(100)], dtype=np.uint8)
_LIMB = 10_000  # digits are looked up four at a time


def _fill(out: Block, at: int, values: npt.NDArray[np.int64], width: int) -> None:
    """Write ``values`` (non-negative) as ``width`` zero-padded digits into ``out[:, at:]``
    (used to build the lookup tables below, and for dates outside their range)."""
    rest = values
    end = at + width
    while end - at >= 2:
        rest, low = np.divmod(rest, 100)
        out[:, end - 2 : end] = _PAIRS[low]
        end -= 2
    if end > at:
        out[:, at] = (rest % 10).astype(np.uint8) + _ZERO


@cache
def _limbs() -> Block:
    """Four-digit renderings of 0..9999 in three variants, a block of 10,000 rows each:
    leading zeros dropped and 0 empty (a leading limb), zero-padded (a limb below a non-zero
    one), leading zeros dropped and 0 as "0" (the last limb of a number)."""
    n = np.arange(_LIMB, dtype=np.int64)
    padded = np.empty((_LIMB, 4), dtype=np.uint8)
    _fill(padded, 0, n, 4)
    leading = padded.copy()
    leading[np.arange(4) < 4 - (1 + np.searchsorted([10, 100, 1000], n, side="right"))[:, None]] = 0
    last = leading.copy()
    leading[0] = 0
    return np.vstack([leading, padded, last])


def _digits(magnitude: npt.NDArray[np.int64], width: int, *, pad: bool) -> Block:
    """Decimal digits of non-negative integers in ``ceil(width / 4) * 4`` columns, or exactly
    ``width`` when ``pad`` (zero-padded). Without ``pad`` leading zeros are NUL (dropped), and 0
    gives "0"."""
    table = _limbs()
    count = -(-width // 4)
    pieces: list[Block] = []
    rest = magnitude
    for i in range(count):
        rest, limb = rest // _LIMB, rest % _LIMB
        if pad:
            index = limb + _LIMB
        else:
            index = limb + np.where(rest > 0, _LIMB, 2 * _LIMB if i == 0 else 0)
        pieces.append(table.take(index, axis=0))
    out = np.hstack(pieces[::-1])
    return out[:, out.shape[1] - width :] if pad else out


def _width(magnitude: npt.NDArray[np.int64]) -> int:
    return len(str(int(magnitude.max()))) if len(magnitude) else 1


def _integers(values: npt.NDArray[np.int64]) -> Block:
    magnitude = np.abs(values)
    sign = np.where(values < 0, ord("-"), 0).astype(np.uint8)[:, None]
    return np.hstack([sign, _digits(magnitude, _width(magnitude), pad=False)])


def _decimals(values: npt.NDArray[np.int64], scale: int) -> Block:
    if scale == 0:
        return _integers(values)
    unit = 10**scale
    magnitude = np.abs(values)
    whole = magnitude // unit
    sign = np.where(values < 0, ord("-"), 0).astype(np.uint8)[:, None]
    dot = np.full((len(values), 1), ord("."), dtype=np.uint8)
    return np.hstack(
        [
            sign,
            _digits(whole, _width(whole), pad=False),
            dot,
            _digits(magnitude % unit, scale, pad=True),
        ]
    )


def _calendar(days: npt.NDArray[np.int64]) -> Block:
    """``YYYY-MM-DD`` of days since 1970-01-01 (years 1000 to 9999), computed."""
    as_days = days.astype("datetime64[D]")
    years = as_days.astype("datetime64[Y]")
    months = as_days.astype("datetime64[M]")
    year = years.astype(np.int64) + 1970
    if len(year) and (year.min() < 1000 or year.max() > 9999):
        raise ValueError("dates outside the years 1000-9999 cannot be rendered")
    out = np.empty((len(days), 10), dtype=np.uint8)
    _fill(out, 0, year, 4)
    out[:, 4] = out[:, 7] = ord("-")
    _fill(out, 5, (months - years).astype(np.int64) + 1, 2)
    _fill(out, 8, (as_days - months).astype(np.int64) + 1, 2)
    return out


_FIRST_DAY, _LAST_DAY = -25_567, 47_481  # 1900-01-01 and 2099-12-31


@cache
def _days() -> Block:
    """``YYYY-MM-DD`` of every day of 1900-2099, looked up instead of computed."""
    return _calendar(np.arange(_FIRST_DAY, _LAST_DAY + 1, dtype=np.int64))


@cache
def _clock() -> Block:
    """``HH:MM:SS`` of every second of a day."""
    seconds = np.arange(86_400, dtype=np.int64)
    out = np.empty((86_400, 8), dtype=np.uint8)
    out[:, 2] = out[:, 5] = ord(":")
    _fill(out, 0, seconds // 3600, 2)
    _fill(out, 3, seconds // 60 % 60, 2)
    _fill(out, 6, seconds % 60, 2)
    return out


def _dates(days: npt.NDArray[np.int64]) -> Block:
    if len(days) and days.min() >= _FIRST_DAY and days.max() <= _LAST_DAY:
        return _days().take(days - _FIRST_DAY, axis=0)
    return _calendar(days)


def _timestamps(seconds: npt.NDArray[np.int64]) -> Block:
    """ISO 8601 with a "T" and no offset: the COPY session runs with TimeZone = UTC."""
    days, clock = seconds // 86_400, seconds % 86_400
    out = np.empty((len(seconds), 19), dtype=np.uint8)
    out[:, :10] = _dates(days)
    out[:, 10] = ord("T")
    out[:, 11:] = _clock().take(clock, axis=0)
    return out


def block(col: Col) -> Block:
    """The COPY text of each value of a column, one NUL-padded row of bytes per value."""
    v = col.values
    if col.kind == "text":
        out = _text(v)
    elif col.kind == "int":
        out = _integers(v.astype(np.int64))
    elif col.kind == "bool":
        out = np.where(v, ord("t"), ord("f")).astype(np.uint8)[:, None]
    elif col.kind == "dec":
        out = _decimals(v.astype(np.int64), col.scale)
    elif col.kind == "ts":
        out = _timestamps(v.astype("datetime64[s]").astype(np.int64))
    elif col.kind == "date":
        out = _dates(v.astype("datetime64[D]").astype(np.int64))
    else:
        raise ValueError(f"unknown column kind {col.kind!r}")
    nulls = np.asarray(col.nulls, dtype=bool)
    if nulls.any():
        if out.shape[1] < 2:
            out = np.hstack([out, np.zeros((len(out), 2 - out.shape[1]), dtype=np.uint8)])
        out[nulls] = 0
        out[nulls, :2] = _NULL
    return out


def render(col: Col) -> list[str]:
    """The COPY text of each value of a column, as strings (for tests and debugging)."""
    return [bytes(row[row != 0]).decode() for row in block(col)]


def encode(cols: list[Col]) -> bytes:
    """COPY text of a chunk: every row terminated by a newline."""
    if not cols or len(cols[0].values) == 0:
        return b""
    rows = len(cols[0].values)
    blocks = [block(c) for c in cols]
    width = sum(b.shape[1] for b in blocks) + len(blocks)
    matrix = np.empty((rows, width), dtype=np.uint8)
    at = 0
    for i, b in enumerate(blocks):
        if b.shape[0] != rows:
            raise ValueError("columns of a chunk differ in length")
        matrix[:, at : at + b.shape[1]] = b
        at += b.shape[1]
        matrix[:, at] = ord("\n") if i == len(blocks) - 1 else ord("\t")
        at += 1
    out: bytes = matrix[matrix != 0].tobytes()
    return out
