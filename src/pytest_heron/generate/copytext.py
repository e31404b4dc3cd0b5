"""Render generated columns as PostgreSQL COPY text: one line per row, tab-separated, ``\\N``
for NULL. Rendering uses only integer arithmetic and fixed formats, so equal values always give
equal bytes."""

from __future__ import annotations

import numpy as np

from pytest_heron.generate.columns import Col

_ESCAPES = str.maketrans({"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"})


def render(col: Col) -> list[str]:
    """The COPY text of each value of a column."""
    v = col.values
    out: list[str]
    if col.kind == "int":
        out = v.astype(np.int64).astype(str).tolist()
    elif col.kind == "bool":
        out = np.where(v, "t", "f").tolist()
    elif col.kind == "text":
        out = [str(x).translate(_ESCAPES) for x in v.tolist()]
    elif col.kind == "dec":
        out = _decimals(v.astype(np.int64), col.scale)
    elif col.kind == "ts":
        iso = np.datetime_as_string(v.astype("datetime64[s]"), unit="s").tolist()
        out = [s.replace("T", " ") + "+00" for s in iso]
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
        plain: list[str] = values.astype(str).tolist()
        return plain
    unit = 10**scale
    out = []
    for x in values.tolist():
        sign = "-" if x < 0 else ""
        whole, frac = divmod(abs(x), unit)
        out.append(f"{sign}{whole}.{frac:0{scale}d}")
    return out


def encode(cols: list[Col]) -> bytes:
    """COPY text of a chunk: every row terminated by a newline."""
    rendered = [render(c) for c in cols]
    if not rendered or not rendered[0]:
        return b""
    lines = ["\t".join(row) for row in zip(*rendered, strict=True)]
    return ("\n".join(lines) + "\n").encode("utf-8")
