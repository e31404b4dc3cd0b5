"""Render generated columns as PostgreSQL COPY text: one line per row, tab-separated, ``\\N``
for NULL. Rendering uses only integer arithmetic and fixed formats, so equal values always give
equal bytes. Hot paths are vectorised with numpy's variable-width string dtype."""

from __future__ import annotations

import numpy as np
from numpy.dtypes import StringDType

from pytest_heron.generate.columns import Col

_ESCAPES = str.maketrans({"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"})
_SPECIAL = ("\\", "\n", "\r", "\t")
_STR = StringDType()


def _escape(values: list[str]) -> list[str]:
    """COPY-escape text values; one pass over all of them, and none when nothing needs it."""
    joined = "\x00".join(values)  # NUL cannot occur in PostgreSQL text
    if not any(ch in joined for ch in _SPECIAL):
        return values
    return joined.translate(_ESCAPES).split("\x00")


def render(col: Col) -> list[str]:
    """The COPY text of each value of a column."""
    v = col.values
    if col.kind == "text":
        text = _escape([str(x) for x in v.tolist()])
        if col.nulls.any():
            text = ["\\N" if null else x for x, null in zip(text, col.nulls.tolist(), strict=True)]
        return text
    if col.kind == "int":
        arr = v.astype(np.int64).astype(_STR)
    elif col.kind == "bool":
        arr = np.where(v, "t", "f").astype(_STR)
    elif col.kind == "dec":
        arr = _decimals(v.astype(np.int64), col.scale)
    elif col.kind == "ts":
        # ISO 8601 with a "T" and no offset: the COPY session runs with TimeZone = UTC.
        arr = np.datetime_as_string(v.astype("datetime64[s]"), unit="s").astype(_STR)
    elif col.kind == "date":
        arr = np.datetime_as_string(v.astype("datetime64[D]"), unit="D").astype(_STR)
    else:
        raise ValueError(f"unknown column kind {col.kind!r}")
    if col.nulls.any():
        arr = np.where(col.nulls, "\\N", arr).astype(_STR)
    out: list[str] = arr.tolist()
    return out


def _decimals(values: np.ndarray, scale: int) -> np.ndarray:
    if scale == 0:
        return values.astype(_STR)
    unit = 10**scale
    magnitude = np.abs(values)
    whole = (magnitude // unit).astype(_STR)
    frac = np.strings.zfill((magnitude % unit).astype(_STR), scale)
    text = np.strings.add(np.strings.add(whole, "."), frac)
    return np.where(values < 0, np.strings.add("-", text), text)


def encode(cols: list[Col]) -> bytes:
    """COPY text of a chunk: every row terminated by a newline."""
    rendered = [render(c) for c in cols]
    if not rendered or not rendered[0]:
        return b""
    return ("\n".join(map("\t".join, zip(*rendered, strict=True))) + "\n").encode("utf-8")
