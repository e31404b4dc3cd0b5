"""The generator's pure parts: streams, apportionment, spec validation, chunk invariance, text
columns rendered a column at a time."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_heron.core.errors import SpecError
from pytest_heron.generate import Generator, load_bundle, streams
from pytest_heron.generate.copytext import encode
from pytest_heron.generate.spec import SAFE_LOADER, Bundle, _column, _load_bundle, _table
from pytest_heron.generate.texts import formatted, word_texts


@given(st.integers(0, 2**31), st.integers(0, 10**9), st.integers(1, 500))
@settings(max_examples=50, deadline=None)
def test_draws_do_not_depend_on_which_rows_are_drawn_together(
    seed: int, start: int, n: int
) -> None:
    key = streams.stream_key(seed, "t", "c")
    rows = np.arange(start, start + n, dtype=np.int64)
    whole = streams.mix(key, rows)
    one_by_one = np.concatenate([streams.mix(key, rows[i : i + 1]) for i in range(n)])
    assert (whole == one_by_one).all()


def test_streams_differ_by_seed_and_name() -> None:
    rows = np.arange(1000, dtype=np.int64)
    a = streams.mix(streams.stream_key(42, "t", "c"), rows)
    assert (a != streams.mix(streams.stream_key(43, "t", "c"), rows)).mean() > 0.99
    assert (a != streams.mix(streams.stream_key(42, "t", "d"), rows)).mean() > 0.99


def test_known_values_are_stable_across_versions() -> None:
    # Guards the byte format of every stream: a change here changes every generated value.
    key = streams.stream_key(42, "core.tenants", "name")
    assert key == streams.stream_key(42, "core.tenants", "name")
    assert streams.mix(0, np.arange(3, dtype=np.int64)).tolist() == [
        0,
        16294208416658607535,
        7960286522194355700,
    ]


@given(
    st.integers(0, 10**6),
    st.lists(st.floats(0.01, 100), min_size=1, max_size=50),
    st.integers(0, 3),
)
@settings(max_examples=200, deadline=None)
def test_apportion_sums_and_respects_minimum(
    total: int, weights: list[float], minimum: int
) -> None:
    parts = streams.apportion(total, weights, minimum)
    assert sum(parts) == total
    assert len(parts) == len(weights)
    if total >= minimum * len(weights):
        assert min(parts) >= minimum


@given(st.integers(0, 2**31), st.integers(1, 1000), st.floats(0.5, 3.0))
@settings(max_examples=100, deadline=None)
def test_skewed_stays_in_range_and_favours_low_indexes(seed: int, n: int, s: float) -> None:
    rows = np.arange(2000, dtype=np.int64)
    idx = streams.skewed(streams.stream_key(seed, "x"), rows, n, s)
    assert idx.min() >= 0 and idx.max() < n
    if n >= 10:
        assert (idx < n // 2).mean() > 0.5


def test_every_way_of_reading_heron_data_gives_the_same_bundle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import yaml

    assert SAFE_LOADER is yaml.CSafeLoader  # libyaml is installed here: the fast path is tested
    monkeypatch.setenv("HERON_CACHE_DIR", str(tmp_path))
    read = _load_bundle  # load_bundle() without its per-process cache
    pure = read(yaml.SafeLoader, False)
    fast = read(SAFE_LOADER, False)
    written = read(SAFE_LOADER, True)  # parses, then writes the disk cache
    (cached,) = (tmp_path / "parsed").iterdir()
    from_disk = read(SAFE_LOADER, True)
    for other in (fast, written, from_disk, load_bundle()):
        assert other == pure and repr(other) == repr(pure)  # repr: same types, order, floats
    cached.write_bytes(b"not marshal")  # a broken cache file is parsed again, not trusted
    assert read(SAFE_LOADER, True) == pure
    assert cached.read_bytes() != b"not marshal"  # and rewritten


def test_unknown_kind_names_table_and_column() -> None:
    with pytest.raises(SpecError, match=r"orders\.orders\.status: unknown kind 'colour'"):
        _column("orders.orders", "status", {"kind": "colour"})


def test_missing_parameter_is_named() -> None:
    with pytest.raises(SpecError, match=r"kind 'int' needs min, max"):
        _column("a.b", "c", {"kind": "int"})


def test_rows_must_be_count_or_per() -> None:
    with pytest.raises(SpecError, match="rows must be"):
        _table("a", "b", {"rows": {"count": 1, "per": "a.c"}, "columns": {"id": {"kind": "id"}}})


def test_chunks_concatenate_to_the_whole_table() -> None:
    gen = Generator(load_bundle(), "tiny", 42)
    for fq, n in gen.row_counts().items():
        if n < 3:
            continue
        whole = encode(gen.chunk(fq, 0, n))
        mid = n // 3
        parts = encode(gen.chunk(fq, 0, mid)) + encode(gen.chunk(fq, mid, n))
        assert whole == parts, fq


def test_every_tenant_scoped_table_gives_every_tenant_rows() -> None:
    gen = Generator(load_bundle(), "tiny", 42)
    for fq in load_bundle().tables:
        plan = gen.plan(fq)
        if plan.tenant_offsets is not None and plan.spec.rows and "count" in plan.spec.rows:
            sizes = np.diff(plan.tenant_offsets)
            assert (sizes > 0).all(), fq


def test_scale_row_totals_grow_by_their_factors() -> None:
    bundle = load_bundle()
    tiny = sum(Generator(bundle, "tiny", 42).row_counts().values())
    small = sum(Generator(bundle, "small", 42).row_counts().values())
    assert 10 * tiny < small < 30 * tiny


def _bundle(tables: dict[str, Any]) -> Bundle:
    """A throw-away bundle of tables in schema ``core`` (the tenant table included)."""
    specs = {f"core.{name}": _table("core", name, raw) for name, raw in tables.items()}
    return Bundle(
        scales={"tiny": {"rows": 1, "tenants": 1}},
        history=("2022-01-01", "2026-01-01"),
        modules=(),
        pools=load_bundle().pools,
        data_version="test",
        tables=specs,
    )


TOY = {
    "tenants": {
        "rows": {"count": 6, "grow": "tenants"},
        "columns": {
            "id": {"kind": "id"},
            "name": {"kind": "pool", "pool": "companies", "unique": True, "stable": True},
            "size": {"kind": "int", "min": 1, "max": 1000},
        },
    },
    "items": {
        "rows": {"count": 300, "grow": "rows", "by": "tenant"},
        "columns": {
            "id": {"kind": "id"},
            "tenant_id": {"kind": "tenant"},
            "parent_item_id": {"kind": "ref", "ref": "core.items", "earlier": True},
            "status": {"kind": "choice", "values": ["open", "closed"]},
            "closed_at": {
                "kind": "timestamp",
                "start": "2022-01-01",
                "end": "2023-01-01",
                "only_when": {"status": ["closed"]},
            },
            "price": {"kind": "int", "min": 100, "max": 10000},
            "cost": {"kind": "copy", "of": "price", "factor": [0.5, 0.85]},
        },
    },
    "lines": {
        "rows": {"per": "core.items", "min": 1, "max": 3},
        "columns": {
            "id": {"kind": "id"},
            "item_id": {"kind": "parent"},
            "item_copy": {"kind": "copy", "of": "item_id"},
            "status_direct": {"kind": "copy", "of": "item_id.status"},
            "status_via_copy": {"kind": "copy", "of": "item_copy.status"},
        },
    },
}


def _table_values(gen: Generator, fq: str) -> dict[str, Any]:
    spec = gen.bundle.table(fq)
    cols = gen.chunk(fq, 0, gen.plan(fq).n)
    return {name: col for name, col in zip(spec.column_names, cols, strict=True)}


def test_earlier_self_reference_points_back_within_the_tenant() -> None:
    gen = Generator(_bundle(TOY), "tiny", 7)
    v = _table_values(gen, "core.items")
    ids, tenants, parents = v["id"].values, v["tenant_id"].values, v["parent_item_id"]
    present = ~parents.nulls
    assert present.any() and parents.nulls.any()
    assert (parents.values[present] < ids[present]).all()
    assert (tenants[parents.values[present] - 1] == tenants[present]).all()


def test_only_when_nulls_follow_the_other_column() -> None:
    v = _table_values(Generator(_bundle(TOY), "tiny", 7), "core.items")
    closed = v["status"].values == "closed"
    assert (v["closed_at"].nulls == ~closed).all()


def test_copy_factor_stays_in_range() -> None:
    v = _table_values(Generator(_bundle(TOY), "tiny", 7), "core.items")
    ratio = v["cost"].values / v["price"].values
    assert ratio.min() >= 0.49 and ratio.max() <= 0.86


def test_copy_through_a_copied_key_equals_the_direct_copy() -> None:
    v = _table_values(Generator(_bundle(TOY), "tiny", 7), "core.lines")
    assert (v["status_direct"].values == v["status_via_copy"].values).all()


def test_stable_columns_ignore_the_seed_and_unique_pools_do_not_repeat() -> None:
    one = _table_values(Generator(_bundle(TOY), "tiny", 1), "core.tenants")
    two = _table_values(Generator(_bundle(TOY), "tiny", 2), "core.tenants")
    assert one["name"].values.tolist() == two["name"].values.tolist()
    assert len(set(one["name"].values.tolist())) == 6
    assert one["size"].values.tolist() != two["size"].values.tolist()


@given(st.integers(0, 2**40), st.integers(1, 600))
@settings(max_examples=100, deadline=None)
def test_permuted_is_a_permutation(key: int, n: int) -> None:
    idx = streams.permuted(key, np.arange(n, dtype=np.int64), n)
    assert sorted(idx.tolist()) == list(range(n))


@given(
    parents=st.integers(0, 60),
    bounds=st.tuples(st.integers(0, 3), st.integers(0, 3)).map(sorted),
    block=st.integers(1, 9),
)
@settings(max_examples=150, deadline=None)
def test_blocked_child_offsets_equal_the_full_prefix_sums(
    parents: int, bounds: list[int], block: int
) -> None:
    from pytest_heron.generate.columns import ChildOffsets

    lo, hi = bounds
    key = streams.stream_key(7, "t.children", "__children")
    counts = streams.integers(key, np.arange(parents, dtype=np.int64), lo, hi)
    full = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    original = ChildOffsets.BLOCK
    ChildOffsets.BLOCK = block  # small blocks so every boundary case is reached
    try:
        offsets = ChildOffsets(key, parents, lo, hi)
        assert offsets.total == int(full[-1])
        assert offsets.at(np.arange(parents + 1)).tolist() == full.tolist()
        rows = np.arange(int(full[-1]), dtype=np.int64)
        expected = np.searchsorted(full, rows, side="right") - 1
        assert offsets.parent_of(rows).tolist() == expected.tolist()
        assert offsets.parent_of(rows[::-1]).tolist() == expected[::-1].tolist()
    finally:
        ChildOffsets.BLOCK = original


_LITERAL = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=6)
_FIELD = st.one_of(
    st.tuples(
        st.sampled_from(["", "d", "06d", "3d", "x", "08x", "010d", ">5"]),
        st.lists(st.integers(-(10**12), 10**12), min_size=3, max_size=3),
    ),
    st.tuples(st.just(""), st.lists(_LITERAL, min_size=3, max_size=3)),
    st.tuples(st.just(""), st.lists(st.booleans(), min_size=3, max_size=3)),
    # a value holding the separator: rendered value by value
    st.tuples(st.just(""), st.just(["a\x00b", "c", ""])),
)


@given(st.lists(st.tuples(_LITERAL, _FIELD), max_size=4), _LITERAL)
@settings(max_examples=200, deadline=None)
def test_formatted_columns_render_as_format_does_value_by_value(
    parts: list[tuple[str, tuple[str, list[Any]]]], last: str
) -> None:
    literals = [lit for lit, _ in parts] + [last]
    fields = [(spec, np.asarray(values)) for _, (spec, values) in parts]
    if any(values.dtype.kind == "U" for _, values in fields):  # strings as the generator has them
        fields = [(s, v.astype(object) if v.dtype.kind == "U" else v) for s, v in fields]
    got = formatted(literals, fields, 3)
    for row in range(3):
        want = literals[0]
        for (spec, values), lit in zip(fields, literals[1:], strict=True):
            value = values.tolist()[row]
            want += (format(value, spec) if spec else str(value)) + lit
        assert got[row] == want


_WORD = st.text(st.characters(codec="ascii", exclude_characters="\x00"), min_size=1, max_size=5)


@given(
    st.lists(_WORD, min_size=1, max_size=6)
    | st.lists(st.text(st.characters(codec="utf-8"), min_size=1, max_size=4), min_size=1),
    st.integers(0, 4),
    st.integers(0, 5),
    st.data(),
)
@settings(max_examples=200, deadline=None)
def test_word_texts_join_and_capitalize_as_str_methods_do(
    pool: list[str], width: int, rows: int, data: st.DataObject
) -> None:
    picks = np.asarray(
        data.draw(
            st.lists(
                st.lists(st.integers(0, len(pool) - 1), min_size=width, max_size=width),
                min_size=rows,
                max_size=rows,
            )
        ),
        dtype=np.int64,
    ).reshape(rows, width)
    counts = np.asarray(
        data.draw(st.lists(st.integers(0, width), min_size=rows, max_size=rows)), dtype=np.int64
    )
    got = word_texts(tuple(pool), picks, counts).tolist()
    want = [" ".join(pool[p] for p in picks[r, : counts[r]]).capitalize() for r in range(rows)]
    assert got == want
