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
    out: list[str]
    if col.kind == "int":
        out = v.astype(np.int64).astype(_STR).tolist()
    elif col.kind == "bool":
        out = np.where(v, "t", "f").tolist()
    elif col.kind == "text":
        out = _escape([str(x) for x in v.tolist()])
    elif col.kind == "dec":
        out = _decimals(v.astype(np.int64), col.scale)
    elif col.kind == "ts":
        iso = np.datetime_as_string(v.astype("datetime64[s]"), unit="s").astype(_STR)
        out = np.strings.add(np.strings.replace(iso, "T", " "), "+00").tolist()
    elif col.kind == "date":
        out = np.datetime_as_string(v.astype("datetime64[D]"), unit="D").tolist()
    else:
        raise ValueError(f"unknown column kind {col.kind!r}")
    if col.nulls.any():
        for i in np.flatnonzero(col.nulls).tolist():
            out[i] = "\\N"
    return out


def _decimals(values: np.ndarray, scale: int) -> list[str]:
    if scale == 0:
        plain: list[str] = values.astype(_STR).tolist()
        return plain
    unit = 10**scale
    magnitude = np.abs(values)
    whole = (magnitude // unit).astype(_STR)
    frac = np.strings.zfill((magnitude % unit).astype(_STR), scale)
    text = np.strings.add(np.strings.add(whole, "."), frac)
    text = np.where(values < 0, np.strings.add("-", text), text)
    rendered: list[str] = text.tolist()
    return rendered


def encode(cols: list[Col]) -> bytes:
    """COPY text of a chunk: every row terminated by a newline."""
    rendered = [render(c) for c in cols]
    if not rendered or not rendered[0]:
        return b""
    return ("\n".join(map("\t".join, zip(*rendered, strict=True))) + "\n").encode("utf-8")
