"""The COPY text encoder against a plain reference: same bytes for every kind of column."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_heron.generate.columns import Col
from pytest_heron.generate.copytext import encode, render, utf8_rows

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ESCAPES = str.maketrans({"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"})


def _reference(col: Col) -> list[str]:
    """One value at a time, with the standard library: what PostgreSQL's COPY text expects."""
    out: list[str] = []
    for value, null in zip(col.values.tolist(), col.nulls.tolist(), strict=True):
        if null:
            out.append("\\N")
        elif col.kind == "text":
            out.append(str(value).translate(_ESCAPES))
        elif col.kind == "int":
            out.append(str(int(value)))
        elif col.kind == "bool":
            out.append("t" if value else "f")
        elif col.kind == "dec":
            v = int(value)
            whole, frac = divmod(abs(v), 10**col.scale)
            text = f"{whole}.{frac:0{col.scale}d}" if col.scale else str(whole)
            out.append(("-" if v < 0 else "") + text)
        elif col.kind == "ts":
            out.append((_EPOCH + timedelta(seconds=int(value))).strftime("%Y-%m-%dT%H:%M:%S"))
        elif col.kind == "date":
            out.append((date(1970, 1, 1) + timedelta(days=int(value))).isoformat())
    return out


def _reference_encode(cols: list[Col]) -> bytes:
    rows = zip(*(_reference(c) for c in cols), strict=True)
    return "".join("\t".join(row) + "\n" for row in rows).encode()


_SECONDS = (-2_208_988_800 - 10**10, 253_402_300_799)  # year 1649 .. 9999-12-31 23:59:59
_DAYS = (-(10**5), 2_932_896)  # 1696 .. 9999-12-31
# Anything PostgreSQL text can hold (no NUL, no lone surrogates), plus the characters COPY
# escapes and multi-byte ones, often.
_TEXT = st.text(
    st.one_of(
        st.sampled_from(["\\", "\n", "\r", "\t", "é", "€", "😀", " ", "a"]),
        st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
    ),
    max_size=12,
)


@st.composite
def _columns(draw: st.DrawFn, rows: int) -> Col:
    kind = draw(st.sampled_from(["int", "dec", "bool", "text", "ts", "date"]))
    nulls = np.asarray(draw(st.lists(st.booleans(), min_size=rows, max_size=rows)), dtype=bool)
    scale = 0
    values: Any
    if kind == "text":
        values = np.asarray(draw(st.lists(_TEXT, min_size=rows, max_size=rows)), dtype=object)
        values = values.reshape(rows)
    elif kind == "bool":
        values = np.asarray(draw(st.lists(st.booleans(), min_size=rows, max_size=rows)))
    else:
        bounds = {"ts": _SECONDS, "date": _DAYS}.get(kind, (-(2**62), 2**62))
        ints = st.one_of(st.integers(*bounds), st.integers(-1000, 1000))
        values = np.asarray(draw(st.lists(ints, min_size=rows, max_size=rows)), dtype=np.int64)
        scale = draw(st.integers(0, 8)) if kind == "dec" else 0
    return Col(kind, values, nulls, scale)


@st.composite
def _chunks(draw: st.DrawFn) -> list[Col]:
    rows = draw(st.integers(1, 30))
    return draw(st.lists(_columns(rows), min_size=1, max_size=6))


@given(_chunks())
@settings(max_examples=400, deadline=None)
def test_encode_matches_the_reference(cols: list[Col]) -> None:
    assert encode(cols) == _reference_encode(cols)


@given(_chunks())
@settings(max_examples=100, deadline=None)
def test_render_matches_the_reference(cols: list[Col]) -> None:
    for col in cols:
        assert render(col) == _reference(col)


def test_edges() -> None:
    ints = Col(
        "int", np.array([0, -1, 9, 10, 9999, 10_000, -(2**63) + 1, 2**63 - 1]), np.zeros(8, bool)
    )
    assert render(ints) == _reference(ints)
    decs = Col("dec", np.array([0, -5, 5, 100, -100, 123456]), np.zeros(6, bool), 2)
    assert render(decs) == ["0.00", "-0.05", "0.05", "1.00", "-1.00", "1234.56"]
    bools = Col("bool", np.array([True, False]), np.array([False, True]))
    assert render(bools) == ["t", "\\N"]
    days = Col("date", np.array([-25_567, -25_568, 47_481, 47_482, 0]), np.zeros(5, bool))
    assert render(days) == [
        "1900-01-01",
        "1899-12-31",
        "2099-12-31",
        "2100-01-01",
        "1970-01-01",
    ]
    empty = Col("text", np.array(["", "x", ""], dtype=object), np.array([False, False, True]))
    assert encode([empty]) == b"\nx\n\\N\n"
    assert encode([Col("int", np.zeros(0, np.int64), np.zeros(0, bool))]) == b""


def test_years_outside_four_digits_are_refused() -> None:
    far = Col("date", np.array([3_000_000]), np.zeros(1, bool))
    with pytest.raises(ValueError, match="1000-9999"):
        encode([far])


@given(st.lists(_TEXT | st.text("a\x00é", max_size=4) | st.integers(-(10**9), 10**9), max_size=20))
@settings(max_examples=60, deadline=None)
def test_utf8_rows_are_each_value_s_bytes(values: list[str | int]) -> None:
    """Padded rows, kept-byte mask and byte lengths agree with encoding value by value (values
    that are not strings are written as ``str`` writes them; a NUL inside a string, which the
    generator never makes, takes the slower path and is still its own byte)."""
    block, keep, sizes = utf8_rows(values)
    assert block.shape[0] == keep.shape[0] == len(sizes) == len(values)
    for row, kept, size, value in zip(block, keep, sizes.tolist(), values, strict=True):
        assert bytes(row[kept]) == str(value).encode() and size == len(str(value).encode())
        assert not row[~kept].any()  # the padding is NUL
