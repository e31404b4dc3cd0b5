"""Render generated columns as PostgreSQL binary COPY (``COPY ... FROM STDIN (FORMAT binary)``).

The server parses binary values much faster than text ones (text timestamptz and numeric input
is slow), and the values stored are the same: each type's binary receive function builds the
same datum its text input function builds from :mod:`.copytext`'s rendering (see
``tests/test_copybinary.py``, which loads both into one table and compares).

Stream layout (PostgreSQL docs, "COPY", binary format): the :data:`HEADER` (signature, int32
flags 0, int32 header-extension length 0), then per row an int16 field count and per field an
int32 byte length (-1 for NULL, with no bytes) and the value's bytes, then :data:`TRAILER`
(int16 -1). Everything is big-endian. psycopg's ``Copy.write`` passes raw bytes through
unchanged in binary mode, so the caller writes the header and trailer itself.

As in :mod:`.copytext`, a chunk is one byte matrix with a row per table row, built column by
column, plus a mask of the bytes that belong to the stream; one vectorised compress
(``matrix[mask]``) leaves the stream. A text column's UTF-8 bytes (:func:`.copytext.utf8_parts`,
which also gives the byte lengths the length fields need) are placed straight into its block of
the matrix, padded to the longest value, and only they are kept; fixed-width values are all
kept; a NULL keeps only its length field.

Values per target type (the SQL type comes from the catalog; the generator's kinds do not say
whether an integer column is int4 or int8):

* int8 / int4: the integer, 8 / 4 bytes (an int column of type numeric: a numeric of scale 0).
* bool: one byte, 1 or 0.
* date: int32 days since 2000-01-01.
* timestamptz: int64 microseconds since 2000-01-01 00:00 UTC.
* numeric: int16 ndigits, int16 weight, int16 sign (0x0000 or 0x4000), int16 dscale, then
  ndigits base-10000 int16 digits. Every value of a chunk gets the same number of digit
  groups; ``numeric_recv`` strips leading and trailing zero groups (``make_result``), as text
  input does. ``dscale`` is the column's scale, the number of decimals the text rendering
  prints, so an unconstrained ``numeric`` keeps the same display scale; a ``numeric(p, s)``
  column rounds to ``s`` in both paths (``apply_typmod``).
* text / varchar: the UTF-8 bytes, unescaped. jsonb: a version byte 1, then the JSON text.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from pytest_heron.generate.columns import Col
from pytest_heron.generate.copytext import utf8_parts

Block = npt.NDArray[np.uint8]
Mask = npt.NDArray[np.bool_]

HEADER = b"PGCOPY\n\xff\r\n\x00" + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x00"
TRAILER = b"\xff\xff"

# Days and seconds from 1970-01-01 (the generator's epoch) to 2000-01-01 (PostgreSQL's).
_PG_EPOCH_DAYS = 10_957
_PG_EPOCH_SECONDS = _PG_EPOCH_DAYS * 86_400
_NBASE = 10_000
_NUMERIC_NEG = 0x4000

# The (generator kind, catalog type name) pairs this module encodes. Any other pair (a domain,
# an int kind into a text column, ...) makes the loader use text COPY for that table.
SUPPORTED: frozenset[tuple[str, str]] = frozenset(
    {
        ("int", "int8"),
        ("int", "int4"),
        ("int", "numeric"),
        ("dec", "numeric"),
        ("bool", "bool"),
        ("ts", "timestamptz"),
        ("date", "date"),
        ("text", "text"),
        ("text", "varchar"),
        ("text", "jsonb"),
    }
)


def supported(kinds: list[str], types: list[str]) -> bool:
    """Whether every column (generator kind, catalog type name) can be sent in binary."""
    return len(kinds) == len(types) and all(
        (k, t) in SUPPORTED for k, t in zip(kinds, types, strict=True)
    )


def _fixed(values: npt.NDArray[Any], dtype: str) -> Block:
    """Big-endian bytes of fixed-width values (one per row, or a row of them), one row per
    row."""
    wide = np.ascontiguousarray(values.astype(dtype))
    return wide.view(np.uint8).reshape(len(values), -1)


def _int4(values: npt.NDArray[np.int64], nulls: Mask) -> Block:
    live = values[~nulls]
    if len(live) and (live.min() < -(2**31) or live.max() >= 2**31):
        raise ValueError("an integer value is outside the int4 range")
    return _fixed(np.where(nulls, 0, values), ">i4")


def _groups(magnitude: npt.NDArray[np.int64], count: int) -> npt.NDArray[np.int64]:
    """``count`` base-10000 digits of non-negative integers, most significant first."""
    out = np.empty((len(magnitude), count), dtype=np.int64)
    rest = magnitude
    for i in range(count - 1, -1, -1):
        rest, out[:, i] = np.divmod(rest, _NBASE)
    return out


def _numeric(values: npt.NDArray[np.int64], scale: int) -> Block:
    """Binary numeric of ``values / 10**scale`` with display scale ``scale``."""
    if scale < 0 or scale > 16:  # the aligned decimals must fit in an int64
        raise ValueError(f"numeric scale {scale} is outside 0-16")
    rows = len(values)
    negative = values < 0
    # abs of the int64 minimum overflows; as uint64 it is exact.
    magnitude = np.abs(values.astype(np.int64)).astype(np.uint64)
    unit = np.uint64(10**scale)
    whole = (magnitude // unit).astype(np.int64)
    fraction = (magnitude % unit).astype(np.int64)
    top = int(whole.max()) if rows else 0
    whole_groups = max(1, -(-len(str(top)) // 4))
    frac_groups = -(-scale // 4)
    # Align the decimals on a group boundary: 12.5 with scale 1 -> groups 0012 | 5000.
    frac = _groups(fraction * 10 ** (4 * frac_groups - scale), frac_groups)
    digits = np.hstack([_groups(whole, whole_groups), frac])
    head = np.empty((rows, 4), dtype=np.int64)
    head[:, 0] = whole_groups + frac_groups
    head[:, 1] = whole_groups - 1
    head[:, 2] = np.where(negative, _NUMERIC_NEG, 0)
    head[:, 3] = scale
    return _fixed(np.hstack([head, digits]), ">i2")


def _data(col: Col, sqltype: str) -> tuple[Block, npt.NDArray[np.int64] | None]:
    """The bytes of each value of a column and, for text, each value's length in bytes.

    Fixed-width types: a row of bytes per value (NULLs' bytes arbitrary), lengths None. Text:
    the values' bytes back to back (:func:`.copytext.utf8_parts`) with their lengths."""
    v = col.values
    if (col.kind, sqltype) not in SUPPORTED:
        raise ValueError(f"no binary encoding of a {col.kind} column as {sqltype}")
    if col.kind == "text":
        # UTF-8 unescaped (binary COPY takes text as it is); jsonb: a version byte 1 first
        return utf8_parts(v.tolist(), "\x01" if sqltype == "jsonb" else "")
    if col.kind == "int" and sqltype == "numeric":  # like the text "12": display scale 0
        return _numeric(v.astype(np.int64), 0), None
    if col.kind == "int":
        if sqltype == "int4":
            return _int4(v.astype(np.int64), np.asarray(col.nulls, dtype=bool)), None
        return _fixed(v, ">i8"), None
    if col.kind == "bool":
        return np.asarray(v, dtype=bool).astype(np.uint8)[:, None], None
    if col.kind == "dec":
        return _numeric(v.astype(np.int64), col.scale), None
    if col.kind == "ts":
        seconds = v.astype("datetime64[s]").astype(np.int64)
        return _fixed((seconds - _PG_EPOCH_SECONDS) * 1_000_000, ">i8"), None
    days = v.astype("datetime64[D]").astype(np.int64)
    return _fixed(days - _PG_EPOCH_DAYS, ">i4"), None


def _width(data: Block, sizes: npt.NDArray[np.int64] | None) -> int:
    """Bytes a field's values take in the chunk's matrix (text: the longest value's)."""
    if sizes is None:
        return int(data.shape[1])
    return max(1, int(sizes.max())) if len(sizes) else 1


# Rows encoded at a time: a chunk of 50,000 rows makes a matrix and a mask of several MB each,
# which left the CPU's cache on every pass; blocks of 8,192 rows encoded small's chunks in
# 2.2-2.8 s against 2.9-3.4 s whole, in one process. The stored values are the same; the wire
# bytes can differ (a numeric's digit groups are counted per block).
BLOCK_ROWS = 8192


def _rows(col: Col, start: int, stop: int) -> Col:
    """Rows ``[start, stop)`` of a column (views, not copies)."""
    nulls = np.asarray(col.nulls, dtype=bool)
    return Col(col.kind, col.values[start:stop], nulls[start:stop], col.scale)


_NULL_LENGTH = np.frombuffer(b"\xff\xff\xff\xff", dtype=np.uint8)


def encode(cols: list[Col], sqltypes: list[str]) -> bytes:
    """The tuples of a chunk in binary COPY format (without :data:`HEADER` and
    :data:`TRAILER`, which frame the whole stream once).

    Each field (length, then bytes) is written straight into the chunk's matrix; the mask of
    kept bytes exists only when a text column or a NULL needs it."""
    if not cols or len(cols[0].values) == 0:
        return b""
    if len(cols) != len(sqltypes):
        raise ValueError("one SQL type per column is needed")
    rows = len(cols[0].values)
    if rows > BLOCK_ROWS:  # a block's matrix and mask stay in the CPU's cache
        return b"".join(
            encode([_rows(c, start, start + BLOCK_ROWS) for c in cols], sqltypes)
            for start in range(0, rows, BLOCK_ROWS)
        )
    fields = [_data(c, t) for c, t in zip(cols, sqltypes, strict=True)]
    widths = [_width(data, sizes) for data, sizes in fields]
    width = 2 + sum(4 + w for w in widths)
    matrix = np.empty((rows, width), dtype=np.uint8)
    mask: Mask | None = None
    matrix[:, :2] = np.frombuffer(len(cols).to_bytes(2, "big"), dtype=np.uint8)
    at = 2
    for col, (data, sizes), w in zip(cols, fields, widths, strict=True):
        if len(col.nulls) != rows or (len(sizes) if sizes is not None else len(data)) != rows:
            raise ValueError("columns of a chunk differ in length")
        nulls = np.asarray(col.nulls, dtype=bool)
        some_null = bool(nulls.any())
        if sizes is None:
            matrix[:, at : at + 4] = np.frombuffer(w.to_bytes(4, "big"), dtype=np.uint8)
            matrix[:, at + 4 : at + 4 + w] = data
        else:
            matrix[:, at : at + 4] = _fixed(sizes, ">i4")
        if some_null:
            matrix[nulls, at : at + 4] = _NULL_LENGTH
        if sizes is not None or some_null:
            if mask is None:
                mask = np.ones((rows, width), dtype=bool)
            if sizes is not None:  # a text value's own bytes, placed straight into its rows
                own = np.arange(w) < sizes[:, None]
                mask[:, at + 4 : at + 4 + w] = own
                matrix[:, at + 4 : at + 4 + w][own] = data
            if some_null:
                mask[nulls, at + 4 : at + 4 + w] = False
        at += 4 + w
    out: bytes = matrix.tobytes() if mask is None else matrix[mask].tobytes()
    return out
