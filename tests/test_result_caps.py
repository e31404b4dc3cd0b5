"""Result caps that bound memory whatever the column types, on the tiny state.

Each hostile query returns far more than the (lowered) cap in arrays, jsonb or numbers, which
the old text-only count let through; it must be stopped with the cap named, and the Python
memory execute() held (tracemalloc peak) must stay near the cap, not near the result.
"""

from __future__ import annotations

import json
import tracemalloc
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_heron import sandbox
from pytest_heron.sandbox.execute import value_bytes, worst_cell_bytes

CAP = 8 * 1024 * 1024

HOSTILE = [
    # one row holding a 2,000,000-element array (~9 MB on the wire, ~80 MB decoded)
    (
        "one_huge_array",
        "SELECT array_agg(g) FROM generate_series(1, 1000) g, generate_series(1, 2000)",
    ),
    # many rows of modest int arrays: each chunk is small, the sum is not
    (
        "many_arrays",
        "SELECT array_agg(g) FROM generate_series(1, 200) g, generate_series(1, 3000) h GROUP BY h",
    ),
    # numeric arrays: a 104-byte Decimal per two wire characters
    ("numeric_array", "SELECT array_agg(1::numeric) FROM generate_series(1, 400000)"),
    # one jsonb document, and jsonb on every row
    ("one_jsonb", "SELECT jsonb_agg(jsonb_build_object('k', g)) FROM generate_series(1, 300000) g"),
    (
        "jsonb_rows",
        "SELECT jsonb_build_object('k', g, 'v', array[g, g]) FROM generate_series(1, 100000) g",
    ),
    # wide numeric rows: 20 Decimals a row
    (
        "wide_numeric",
        "SELECT " + ", ".join(["g::numeric"] * 20) + " FROM generate_series(1, 20000) g",
    ),
]


def _run(dsn: str, sql: str, **caps: Any) -> tuple[sandbox.ExecResult, int]:
    tracemalloc.start()
    try:
        got = sandbox.execute(dsn, sql, timeout_s=60, **caps)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return got, peak


@pytest.mark.parametrize(("name", "sql"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_hostile_results_are_stopped_near_the_byte_cap(
    name: str, sql: str, tiny_state: Any
) -> None:
    got, peak = _run(tiny_state.reader_dsn, sql, max_bytes=CAP)
    assert got.error_kind == "result_too_large", (got.error_kind, got.error)
    assert f"{CAP:,} bytes" in (got.error or "")
    assert got.rows == []
    assert peak < 2 * CAP, f"{name}: peak {peak:,} bytes for a cap of {CAP:,}"


def test_the_cell_cap_is_named(tiny_state: Any) -> None:
    sql = "SELECT " + ", ".join(["g"] * 10) + " FROM generate_series(1, 20000) g"
    got = sandbox.execute(tiny_state.reader_dsn, sql, timeout_s=30, max_cells=100_000)
    assert got.error_kind == "result_too_large" and "100,000 cells" in (got.error or "")


def test_the_row_cap_is_named(tiny_state: Any) -> None:
    got = sandbox.execute(
        tiny_state.reader_dsn,
        "SELECT g FROM generate_series(1, 20000) g",
        timeout_s=30,
        max_rows=9_999,
    )
    assert got.error_kind == "result_too_large" and "9,999 rows" in (got.error or "")


def test_results_under_the_caps_arrive_whole(tiny_state: Any) -> None:
    """Arrays, jsonb, numbers and text below the cap come back complete and in order, across
    several adaptive fetches (first one small)."""
    sql = (
        "SELECT g, g::numeric / 4, array[g, -g], jsonb_build_object('g', g), repeat('x', g % 7)"
        " FROM generate_series(1, 6000) g ORDER BY g"
    )
    got = sandbox.execute(tiny_state.reader_dsn, sql, timeout_s=30, max_bytes=CAP)
    assert got.ok, got.error
    assert len(got.rows) == 6000
    assert got.rows[0][:4] == (1, 0.25, [1, -1], {"g": 1})
    assert [r[0] for r in got.rows] == list(range(1, 6001))
    assert got.rows[-1][4] == "x" * (6000 % 7)


def test_an_empty_result_keeps_its_columns(tiny_state: Any) -> None:
    got = sandbox.execute(tiny_state.reader_dsn, "SELECT 1 AS a, 'b' AS b WHERE false", timeout_s=5)
    assert got.ok and got.columns == ["a", "b"] and got.rows == []


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner, max_size=4)
    ),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(_JSON)
def test_json_estimate_stays_under_its_wire_worst_case(value: Any) -> None:
    """The pre-decoding bound for jsonb holds for what the estimate counts once decoded, with
    the most compact text PostgreSQL could send."""
    wire = json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
    decoded = value_bytes(json.loads(wire))
    assert decoded is not None
    assert 8 + decoded <= worst_cell_bytes(3802, len(wire))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-(2**63), 2**63 - 1), max_size=50))
def test_int_array_estimate_stays_under_its_wire_worst_case(value: list[int]) -> None:
    wire = ("{" + ",".join(map(str, value)) + "}").encode()
    decoded = value_bytes(value)
    assert decoded is not None and 8 + decoded <= worst_cell_bytes(1016, len(wire))


@given(_JSON)
def test_the_estimate_is_deterministic_and_positive(value: Any) -> None:
    first = value_bytes(value)
    assert first is not None and first >= 0
    assert value_bytes(json.loads(json.dumps(value))) == first


def test_unknown_types_are_reported_as_unknown() -> None:
    assert value_bytes([1, object()]) is None
