"""The binary COPY encoder: its byte layout decoded by a plain reader, and the values it stores
against the text COPY path in a real PostgreSQL table."""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

import numpy as np
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_heron.database.server import Server
from pytest_heron.generate import copybinary, copytext
from pytest_heron.generate.columns import Col

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_PG_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
_SECONDS = (-2_208_988_800 - 10**10, 253_402_300_799)  # year 1649 .. 9999-12-31 23:59:59
_DAYS = (-(10**5), 2_932_896)  # 1696 .. 9999-12-31
_TEXT = st.text(
    st.one_of(
        st.sampled_from(["\\", "\n", "\r", "\t", "é", "€", "😀", " ", "a", "N"]),
        st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
    ),
    max_size=12,
)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**6), 10**6) | _TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
    max_leaves=6,
).map(lambda v: json.dumps(v, ensure_ascii=False))


def _decode(stream: bytes, types: list[str]) -> list[list[Any]]:
    """A plain reader of binary COPY tuples (no header), one value at a time."""
    rows: list[list[Any]] = []
    at = 0
    while at < len(stream):
        (count,) = struct.unpack_from(">h", stream, at)
        assert count == len(types)
        at += 2
        row: list[Any] = []
        for sqltype in types:
            (length,) = struct.unpack_from(">i", stream, at)
            at += 4
            if length == -1:
                row.append(None)
                continue
            raw = stream[at : at + length]
            at += length
            row.append(_value(raw, sqltype))
        rows.append(row)
    return rows


def _value(raw: bytes, sqltype: str) -> Any:
    if sqltype == "int8":
        return struct.unpack(">q", raw)[0]
    if sqltype == "int4":
        return struct.unpack(">i", raw)[0]
    if sqltype == "bool":
        assert raw in (b"\x00", b"\x01")
        return raw == b"\x01"
    if sqltype == "date":
        return date(2000, 1, 1) + timedelta(days=struct.unpack(">i", raw)[0])
    if sqltype == "timestamptz":
        return _PG_EPOCH + timedelta(microseconds=struct.unpack(">q", raw)[0])
    if sqltype == "numeric":
        ndigits, weight, sign, dscale = struct.unpack_from(">hhHH", raw)
        digits = struct.unpack_from(f">{ndigits}h", raw, 8)
        assert len(raw) == 8 + 2 * ndigits
        assert sign in (0, 0x4000) and all(0 <= d < 10_000 for d in digits)
        value = sum(Decimal(d) * Decimal(10_000) ** (weight - i) for i, d in enumerate(digits))
        return (-value if sign else value), dscale
    if sqltype == "jsonb":
        assert raw[:1] == b"\x01"
        return raw[1:].decode()
    return raw.decode()


def _expected(col: Col, sqltype: str) -> list[Any]:
    out: list[Any] = []
    for value, null in zip(col.values.tolist(), col.nulls.tolist(), strict=True):
        if null:
            out.append(None)
        elif col.kind == "dec" or sqltype == "numeric":
            out.append((Decimal(int(value)).scaleb(-col.scale), col.scale))
        elif col.kind == "ts":
            out.append(_EPOCH + timedelta(seconds=int(value)))
        elif col.kind == "date":
            out.append(date(1970, 1, 1) + timedelta(days=int(value)))
        elif col.kind == "bool":
            out.append(bool(value))
        elif col.kind == "int":
            out.append(int(value))
        else:
            out.append(str(value))
    return out


@st.composite
def _columns(draw: st.DrawFn, rows: int) -> tuple[Col, str, str]:
    """A column, its catalog type name, and the SQL type to create it as."""
    kind = draw(st.sampled_from(["int", "dec", "bool", "text", "ts", "date"]))
    nulls = np.asarray(draw(st.lists(st.booleans(), min_size=rows, max_size=rows)), dtype=bool)
    scale = 0
    values: Any
    sqltype = {"bool": "bool", "ts": "timestamptz", "date": "date", "dec": "numeric"}.get(kind)
    if kind == "text":
        sqltype = draw(st.sampled_from(["text", "jsonb"]))
        texts = _JSON if sqltype == "jsonb" else _TEXT
        values = np.empty(rows, dtype=object)
        values[:] = draw(st.lists(texts, min_size=rows, max_size=rows))
    elif kind == "bool":
        values = np.asarray(draw(st.lists(st.booleans(), min_size=rows, max_size=rows)))
    else:
        if kind == "int":
            sqltype = draw(st.sampled_from(["int8", "int4", "numeric"]))
        bounds = {"ts": _SECONDS, "date": _DAYS, "int4": (-(2**31), 2**31 - 1)}.get(
            kind if kind != "int" else str(sqltype), (-(2**62), 2**62)
        )
        ints = st.one_of(st.integers(*bounds), st.integers(-20_000, 20_000))
        values = np.asarray(draw(st.lists(ints, min_size=rows, max_size=rows)), dtype=np.int64)
        scale = draw(st.integers(0, 9)) if kind == "dec" else 0
    create = str(sqltype)
    if sqltype == "numeric" and draw(st.booleans()):  # a typmod: both paths round to its scale
        create = f"numeric(40, {draw(st.integers(0, 10))})"
    return Col(kind, values, nulls, scale), str(sqltype), create


@st.composite
def _chunks(draw: st.DrawFn) -> list[tuple[Col, str, str]]:
    rows = draw(st.integers(1, 25))
    return draw(st.lists(_columns(rows), min_size=1, max_size=6))


@given(_chunks())
@settings(max_examples=300, deadline=None)
def test_the_stream_decodes_to_the_values(chunk: list[tuple[Col, str, str]]) -> None:
    cols = [c for c, _, _ in chunk]
    types = [t for _, t, _ in chunk]
    decoded = _decode(copybinary.encode(cols, types), types)
    expected = [_expected(c, t) for c, t in zip(cols, types, strict=True)]
    assert decoded == [list(row) for row in zip(*expected, strict=True)]


@given(_chunks(), st.integers(1, 7))
@settings(max_examples=100, deadline=None)
def test_a_chunk_encoded_in_blocks_of_rows_is_the_same_stream(
    chunk: list[tuple[Col, str, str]], block: int
) -> None:
    """encode() works through a long chunk BLOCK_ROWS rows at a time: the stream decodes to the
    values the whole chunk's does (not always the same bytes: a numeric's digit groups are
    counted per block, and the server strips the leading zero ones)."""
    cols = [c for c, _, _ in chunk]
    types = [t for _, t, _ in chunk]
    whole = copybinary.encode(cols, types)
    saved = copybinary.BLOCK_ROWS
    copybinary.BLOCK_ROWS = block
    try:
        assert _decode(copybinary.encode(cols, types), types) == _decode(whole, types)
    finally:
        copybinary.BLOCK_ROWS = saved


def test_known_bytes() -> None:
    none = np.zeros(1, dtype=bool)
    cols = [
        Col("int", np.array([5]), none),
        Col("int", np.array([-1]), none),
        Col("bool", np.array([True]), none),
        Col("text", np.array(["é"], dtype=object), none),
        Col("text", np.array(["x"], dtype=object), np.ones(1, dtype=bool)),
        Col("date", np.array([10_958]), none),  # 2000-01-02
        Col("ts", np.array([946_684_801]), none),  # 2000-01-01 00:00:01 UTC
        Col("dec", np.array([-1250]), none, 2),  # -12.50
        Col("text", np.array(["[1]"], dtype=object), none),
    ]
    types = ["int8", "int4", "bool", "text", "text", "date", "timestamptz", "numeric", "jsonb"]
    assert copybinary.encode(cols, types) == (
        b"\x00\x09"
        + b"\x00\x00\x00\x08" + (5).to_bytes(8, "big")
        + b"\x00\x00\x00\x04\xff\xff\xff\xff"
        + b"\x00\x00\x00\x01\x01"
        + b"\x00\x00\x00\x02" + "é".encode()
        + b"\xff\xff\xff\xff"
        + b"\x00\x00\x00\x04\x00\x00\x00\x01"
        + b"\x00\x00\x00\x08" + (1_000_000).to_bytes(8, "big")
        + b"\x00\x00\x00\x0c" + struct.pack(">hhHHhh", 2, 0, 0x4000, 2, 12, 5000)
        + b"\x00\x00\x00\x04\x01[1]"
    )  # fmt: skip
    assert b"PGCOPY\n\xff\r\n\x00" + bytes(8) == copybinary.HEADER
    assert struct.pack(">h", -1) == copybinary.TRAILER
    assert copybinary.encode([Col("int", np.zeros(0, np.int64), np.zeros(0, bool))], ["int8"]) == (
        b""
    )


def test_refusals() -> None:
    big = Col("int", np.array([2**31]), np.zeros(1, dtype=bool))
    with pytest.raises(ValueError, match="int4 range"):
        copybinary.encode([big], ["int4"])
    assert copybinary.encode([big], ["int8"])
    with pytest.raises(ValueError, match="no binary encoding"):
        copybinary.encode([big], ["text"])
    assert not copybinary.supported(["int"], ["text"])
    assert not copybinary.supported(["int", "int"], ["int8"])
    assert copybinary.supported(["int", "text", "dec"], ["int4", "jsonb", "numeric"])


@pytest.fixture(scope="module")
def conn(server: Server) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(server.admin_dsn, autocommit=True, client_encoding="utf8") as c:
        c.execute("SET TimeZone = 'UTC'")  # text COPY sends timestamps without an offset
        yield c


def _load(
    conn: psycopg.Connection[Any], table: str, cols: list[Col], types: list[str], binary: bool
) -> None:
    names = ", ".join(f"c{i}" for i in range(len(cols)))
    fmt = " (FORMAT binary)" if binary else ""
    with conn.cursor().copy(f"COPY {table} ({names}) FROM STDIN{fmt}") as copy:
        if binary:
            copy.write(copybinary.HEADER)
            copy.write(copybinary.encode(cols, types))
            copy.write(copybinary.TRAILER)
        else:
            copy.write(copytext.encode(cols))


@given(_chunks())
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_binary_and_text_copy_store_the_same_values(
    conn: psycopg.Connection[Any], chunk: list[tuple[Col, str, str]]
) -> None:
    cols = [c for c, _, _ in chunk]
    types = [t for _, t, _ in chunk]
    rows = len(cols[0].values)
    order = Col("int", np.arange(rows, dtype=np.int64), np.zeros(rows, dtype=bool))
    columns = ", ".join(f"c{i} {create}" for i, (_, _, create) in enumerate(chunk))
    with conn.transaction(force_rollback=True):
        for table in ("via_text", "via_binary"):
            conn.execute(f"CREATE TEMP TABLE {table} (c{len(cols)} int8, {columns})")
        _load(conn, "via_text", [*cols, order], [*types, "int8"], binary=False)
        _load(conn, "via_binary", [*cols, order], [*types, "int8"], binary=True)
        read = "SELECT t::text, pg_column_size(t.*) FROM {} t ORDER BY c{}"
        text = conn.execute(read.format("via_text", len(cols))).fetchall()
        binary = conn.execute(read.format("via_binary", len(cols))).fetchall()
    assert binary == text
    assert len(text) == rows
