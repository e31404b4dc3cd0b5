"""Text columns rendered a column at a time: format templates and word texts. Pure functions,
no I/O; equal to rendering value by value (``format``, ``str.join``, ``str.capitalize``), which
``tests/test_generator.py`` checks."""

from __future__ import annotations

import re
from functools import cache
from typing import Any

import numpy as np
import numpy.typing as npt

I64 = npt.NDArray[np.int64]

# Format specs the %-operator spells the same (``format(v, "06d") == "%06d" % v``).
_PRINTF_SPEC = re.compile(r"0?\d*[dx]")
_END = "\x00"  # ends each value in a joined column (PostgreSQL text cannot hold it)


@cache
def pool_array(pool: tuple[str, ...]) -> npt.NDArray[Any]:
    """A pool as an object array (to pick from with an index array); one per pool."""
    return np.asarray(pool, dtype=object)


def formatted(
    literals: list[str], fields: list[tuple[str, npt.NDArray[Any]]], n: int
) -> npt.NDArray[Any]:
    """``n`` values of a format template: ``literals[0] field[0] literals[1] ... literals[-1]``,
    each field rendered with ``format(value, spec)`` (``str(value)`` without a spec).

    All rows are rendered by one %-operation on the template repeated ``n`` times, when every
    spec has a %-spelling that renders alike (an integer spec of integer values); otherwise
    value by value."""
    if not fields:
        return np.asarray([literals[0]] * n, dtype=object)
    specs = [spec for spec, _ in fields]
    if all(
        not spec or (_PRINTF_SPEC.fullmatch(spec) and values.dtype.kind in "iu")
        for spec, values in fields
    ):
        row = literals[0].replace("%", "%%")
        for spec, lit in zip(specs, literals[1:], strict=True):
            row += f"%{spec}" if spec else "%s"
            row += lit.replace("%", "%%")
        grid = np.empty((n, len(fields)), dtype=object)
        for j, (_, values) in enumerate(fields):
            grid[:, j] = values.tolist()  # Python ints, strs, ...: what str() and format() see
        joined = ((row + _END) * n) % tuple(grid.ravel().tolist())
        if joined.count(_END) == n:  # no value held the separator itself
            return np.asarray(joined.split(_END)[:-1], dtype=object)
    texts = [
        [format(v, spec) for v in values.tolist()] if spec else [str(v) for v in values.tolist()]
        for spec, values in fields
    ]
    columns: list[list[str]] = []
    for j, column in enumerate(texts):
        if literals[j]:
            columns.append([literals[j]] * n)
        columns.append(column)
    if literals[-1]:
        columns.append([literals[-1]] * n)
    return np.asarray(["".join(row) for row in zip(*columns, strict=True)], dtype=object)


@cache
def _cased(pool: tuple[str, ...]) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
    """A pool's words capitalized and lower-cased, as object arrays; one pair per pool."""
    return (
        np.asarray([w.capitalize() for w in pool], dtype=object),
        np.asarray([w.lower() for w in pool], dtype=object),
    )


def word_texts(pool: tuple[str, ...], picks: I64, counts: I64) -> npt.NDArray[Any]:
    """Per row, ``" ".join(pool[picks[row, :counts[row]]]).capitalize()``.

    For ASCII words that is the first word capitalized and the others lower-cased, joined: the
    words and a separator after each are laid out in one object matrix, the kept cells of all
    rows are joined once and split at the row ends. Other words go value by value."""
    n, width = picks.shape
    joinable = all(w.isascii() and _END not in w for w in pool)
    if not joinable or n == 0:
        words = np.asarray(pool, dtype=object)[picks].tolist()
        out = [" ".join(r[:k]).capitalize() for r, k in zip(words, counts.tolist(), strict=True)]
        return np.asarray(out, dtype=object)
    cells = np.empty((n, 2 * width + 1), dtype=object)
    if width:
        capitalized, lower = _cased(pool)
        cells[:, 0] = capitalized[picks[:, 0]]
        for j in range(1, width):
            cells[:, 2 * j] = lower[picks[:, j]]
        cells[:, 1 : 2 * width : 2] = " "
    cells[:, -1] = _END
    at = np.arange(2 * width + 1)
    # word j is kept when j < n; the space after word j when j < n - 1; the end always
    keep = np.where(at % 2 == 0, at // 2 < counts[:, None], at // 2 < counts[:, None] - 1)
    keep[:, -1] = True
    joined = "".join(cells[keep].tolist())
    return np.asarray(joined.split(_END)[:-1], dtype=object)
