"""Column values for any rows of any table: the generator's core, with no I/O.

:class:`Generator` answers ``values(table, column, rows)`` for arbitrary 0-based row numbers.
Because every draw comes from a counter-based stream (:mod:`.streams`), the value of a cell does
not depend on which other rows are generated with it; that is what lets a child table copy a
parent's column, or a chunk be generated in another process, and still give the same bytes.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt

from pytest_heron.core.errors import SpecError
from pytest_heron.generate import streams
from pytest_heron.generate.spec import TENANT_TABLE, Bundle, ColumnSpec, TableSpec
from pytest_heron.generate.texts import formatted, pool_array, word_texts

I64 = npt.NDArray[np.int64]
Mask = npt.NDArray[np.bool_]

_DAY = 86400
_EPOCH = date(1970, 1, 1)
# Month weights for `season: true`: more business in Q4, less in high summer.
_SEASON = (1.0, 0.9, 1.0, 1.0, 1.0, 0.95, 0.8, 0.8, 1.0, 1.1, 1.3, 1.45)
# Seed of the streams of columns marked `stable: true` (the same values in every state).
STABLE_SEED = 0
_FIELD = re.compile(r"\{(@?\w+)(?::([^}]*))?\}")


@dataclass(frozen=True)
class Col:
    """Generated values of one column: ``kind`` is int, dec, bool, text, ts (epoch seconds) or
    date (epoch days); ``scale`` is the number of decimals of a ``dec`` column."""

    kind: str
    values: npt.NDArray[Any]
    nulls: Mask
    scale: int = 0


def _days(text: str) -> int:
    return (date.fromisoformat(str(text)) - _EPOCH).days


class ChildOffsets:
    """Where each parent's children start in a ``per:`` table, in memory O(parents / BLOCK).

    The child count of parent ``p`` is a pure function of ``(seed, table, p)``, so only the running
    total at every BLOCK-th parent is kept; the offsets inside a block are recomputed from the
    counts when a chunk needs them (a chunk covers consecutive rows, so one or two blocks). The
    values are exactly those of the full prefix-sum array ``[0, c0, c0 + c1, ...]``.
    """

    BLOCK = 1 << 16

    def __init__(self, key: int, parents: int, lo: int, hi: int) -> None:
        self.key, self.parents, self.lo, self.hi = key, parents, lo, hi
        starts = [0]
        for first in range(0, parents, self.BLOCK):
            starts.append(starts[-1] + int(self._counts(first).sum()))
        self.block_starts = np.asarray(starts, dtype=np.int64)
        self.total = int(self.block_starts[-1])
        self._recent: dict[int, I64] = {}

    def _counts(self, first: int) -> I64:
        stop = min(self.parents, first + self.BLOCK)
        return streams.integers(self.key, np.arange(first, stop, dtype=np.int64), self.lo, self.hi)

    def _prefix(self, block: int) -> I64:
        """Offsets of parents ``block * BLOCK`` through the block's end (inclusive)."""
        if block not in self._recent:
            if len(self._recent) >= 4:
                self._recent.pop(next(iter(self._recent)))
            counts = self._counts(block * self.BLOCK)
            self._recent[block] = self.block_starts[block] + np.concatenate(
                ([0], np.cumsum(counts))
            ).astype(np.int64)
        return self._recent[block]

    def at(self, parents: I64) -> I64:
        """``off[p]`` for each ``p`` in ``[0, parents]``."""
        parents = np.asarray(parents, dtype=np.int64)
        out = np.empty(parents.shape, dtype=np.int64)
        blocks = np.minimum(parents // self.BLOCK, max(0, len(self.block_starts) - 2))
        for block in np.unique(blocks).tolist():
            mask = blocks == block
            out[mask] = self._prefix(block)[parents[mask] - block * self.BLOCK]
        return out

    def parent_of(self, rows: I64) -> I64:
        """The parent ``p`` with ``off[p] <= row < off[p + 1]`` of each child row."""
        rows = np.asarray(rows, dtype=np.int64)
        out = np.empty(rows.shape, dtype=np.int64)
        last = max(0, len(self.block_starts) - 2)
        blocks = np.minimum(np.searchsorted(self.block_starts, rows, side="right") - 1, last)
        for block in np.unique(blocks).tolist():
            mask = blocks == block
            within = np.searchsorted(self._prefix(block), rows[mask], side="right") - 1
            out[mask] = block * self.BLOCK + within
        return out


class _LastAnswer:
    """The last answer computed for a rows array, given again while the same array object is
    asked about (chunks' rows arrays are never changed in place)."""

    def __init__(self) -> None:
        self._last: tuple[I64, I64] | None = None

    def get(self, rows: I64, compute: Callable[[], I64]) -> I64:
        last = self._last
        if last is not None and last[0] is rows:
            return last[1]
        found = compute()
        self._last = (rows, found)
        return found


class TablePlan:
    """How many rows a table has at one scale, and how they are grouped by tenant and parent."""

    def __init__(self, gen: Generator, spec: TableSpec) -> None:
        self.gen = gen
        self.spec = spec
        self.parent: TablePlan | None = None
        self.children: ChildOffsets | None = None  # child rows of parent p: [off[p], off[p + 1])
        self.tenant_offsets: I64 | None = None  # rows of tenant t (1-based): [off[t-1], off[t])
        self.keys: list[Any] | None = None  # lookup tables: the key of each row
        # The columns of one chunk ask for the tenants and the parents of the same rows array
        # many times (tenant, ref, parent, index and copied columns): the last answer is kept.
        self._tenants = _LastAnswer()
        self._parents = _LastAnswer()
        rows = spec.rows
        if spec.data is not None:
            self.n = len(spec.data)
            first = spec.column_names[0]
            self.keys = [r[first] for r in spec.data]
        elif rows is not None and "per" in rows:
            self.parent = gen.plan(rows["per"])
            lo, hi = int(rows.get("min", 1)), int(rows.get("max", 1))
            if not 0 <= lo <= hi:
                raise SpecError(f"{spec.fq}: rows.per needs 0 <= min <= max")
            key = streams.stream_key(gen.seed, spec.fq, "__children")
            self.children = ChildOffsets(key, self.parent.n, lo, hi)
            self.n = self.children.total
            if self.parent.tenant_offsets is not None:
                self.tenant_offsets = self.children.at(self.parent.tenant_offsets)
        else:
            assert rows is not None
            factor = 1 if rows.get("grow") == "fixed" else gen.factors[rows.get("grow", "rows")]
            self.n = int(rows["count"]) * factor
            if spec.fq == TENANT_TABLE:
                self.tenant_offsets = np.arange(self.n + 1, dtype=np.int64)
            elif rows.get("by") == "tenant":
                t = gen.tenants
                sizes = streams.apportion(self.n, [1.0 / k for k in range(1, t + 1)], minimum=1)
                self.tenant_offsets = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)

    @property
    def scoped(self) -> bool:
        return self.tenant_offsets is not None

    def tenant_of(self, rows: I64) -> I64:
        offsets = self.tenant_offsets
        assert offsets is not None
        return self._tenants.get(
            rows, lambda: np.searchsorted(offsets, rows, side="right").astype(np.int64)
        )

    def parent_of(self, rows: I64) -> I64:
        """0-based parent row of each row of a ``per:`` table."""
        children = self.children
        assert children is not None
        return self._parents.get(rows, lambda: children.parent_of(rows))

    def first_sibling(self, rows: I64) -> I64:
        """The first row with the same parent as each row of a ``per:`` table."""
        assert self.children is not None
        return self.children.at(self.parent_of(rows))

    def key_col(self, rows: I64) -> Col:
        """The key (primary key value) of each row."""
        if self.keys is None:
            return Col("int", rows + 1, np.zeros(rows.shape, dtype=bool))
        every = self._every_key
        if every is not None and len(rows):
            return Col(every.kind, every.values[rows], every.nulls[rows], every.scale)
        return _literal_col([self.keys[i] for i in rows.tolist()])

    @cached_property
    def _every_key(self) -> Col | None:
        """Every key as one column, when any rows' keys type alike (all strings or all
        integers: a subset of them is typed the same by :func:`_literal_col`), else None."""
        keys = self.keys or []
        if keys and (all(type(k) is str for k in keys) or all(type(k) is int for k in keys)):
            return _literal_col(keys)
        return None

    @cached_property
    def _key_rows(self) -> dict[Any, int]:
        return {k: i for i, k in enumerate(self.keys or [])}

    def rows_of_keys(self, keys: Col) -> I64:
        if self.keys is None:
            return np.where(keys.nulls, 0, keys.values.astype(np.int64) - 1).astype(np.int64)
        index = self._key_rows
        out = [
            0 if null else index[k]
            for k, null in zip(keys.values.tolist(), keys.nulls.tolist(), strict=True)
        ]
        return np.asarray(out, dtype=np.int64)


def _literal_col(values: list[Any]) -> Col:
    nulls = np.asarray([v is None for v in values], dtype=bool)
    present = [v for v in values if v is not None]
    if present and all(isinstance(v, bool) for v in present):
        return Col("bool", np.asarray([bool(v) for v in values], dtype=bool), nulls)
    if present and all(isinstance(v, int) and not isinstance(v, bool) for v in present):
        return Col("int", np.asarray([v or 0 for v in values], dtype=np.int64), nulls)
    if present and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present):
        decs = [Decimal(str(v)) if v is not None else Decimal(0) for v in values]
        scale = max(-d.as_tuple().exponent for d in decs)  # type: ignore[operator]
        scaled = [int(d.scaleb(scale)) for d in decs]
        return Col("dec", np.asarray(scaled, dtype=np.int64), nulls, int(scale))
    return Col(
        "text", np.asarray(["" if v is None else str(v) for v in values], dtype=object), nulls
    )


class Generator:
    """Values for one ``(scale, seed)``."""

    def __init__(self, bundle: Bundle, scale: str, seed: int) -> None:
        if scale not in bundle.scales:
            raise SpecError(f"unknown scale {scale!r}; known: {', '.join(bundle.scales)}")
        self.bundle = bundle
        self.scale = scale
        self.seed = seed
        self.factors = bundle.scales[scale]
        self._plans: dict[str, TablePlan] = {}
        self._lookups: dict[str, Col] = {}

    @cached_property
    def tenants(self) -> int:
        return self.plan(TENANT_TABLE).n

    def plan(self, fq: str) -> TablePlan:
        if fq not in self._plans:
            self._plans[fq] = TablePlan(self, self.bundle.table(fq))
        return self._plans[fq]

    def lookup_column(self, fq: str, name: str) -> Col:
        """A whole column of a lookup table (typed from all its rows, so chunks agree)."""
        key = f"{fq}.{name}"
        if key not in self._lookups:
            data = self.bundle.table(fq).data
            assert data is not None
            self._lookups[key] = _literal_col([row[name] for row in data])
        return self._lookups[key]

    def ref_target(self, spec: TableSpec, column: str) -> str:
        """The table a key column points at (following ``copy`` columns to their source)."""
        c = spec.column(column)
        if c.kind == "ref":
            return str(c.params["ref"])
        if c.kind == "tenant":
            return TENANT_TABLE
        if c.kind == "parent" and spec.rows and "per" in spec.rows:
            return str(spec.rows["per"])
        if c.kind == "copy":
            of = str(c.params["of"])
            if "." not in of:
                return self.ref_target(spec, of)
            fk, col = of.split(".", 1)
            return self.ref_target(self.bundle.table(self.ref_target(spec, fk)), col)
        raise SpecError(
            f"{spec.fq}.{column}: not a key column (ref, tenant, parent or a copy "
            "of one), so it cannot be followed with 'column.other'"
        )

    def row_counts(self) -> dict[str, int]:
        return {fq: self.plan(fq).n for fq in self.bundle.tables}

    def key(self, spec: TableSpec, column: str, purpose: str = "") -> int:
        return streams.stream_key(self.seed, spec.fq, column, purpose)

    # -- evaluation ---------------------------------------------------------------------------

    def chunk(self, fq: str, start: int, stop: int) -> list[Col]:
        """Every column of rows ``[start, stop)`` of a table, in DDL order."""
        spec = self.bundle.table(fq)
        rows = np.arange(start, stop, dtype=np.int64)
        ev = _Eval(self, spec, rows)
        return [ev.col(name) for name in spec.column_names]

    def values(self, fq: str, column: str, rows: I64) -> Col:
        return _Eval(self, self.bundle.table(fq), rows).col(column)


class _Eval:
    """Evaluates the columns of one table for one array of rows, memoising within the call."""

    def __init__(self, gen: Generator, spec: TableSpec, rows: I64) -> None:
        self.gen = gen
        self.spec = spec
        self.plan = gen.plan(spec.fq)
        self.rows = rows
        self.memo: dict[str, Col] = {}
        self.busy: list[str] = []
        # per foreign-key column: the referenced rows' evaluation, where each row is in it, nulls
        self.parents: dict[str, tuple[_Eval, I64, Mask]] = {}

    def col(self, name: str) -> Col:
        if name in self.memo:
            return self.memo[name]
        if name in self.busy:
            raise SpecError(f"{self.spec.fq}: columns depend on each other in a cycle: {self.busy}")
        self.busy.append(name)
        if self.spec.data is not None:
            full = self.gen.lookup_column(self.spec.fq, name)
            result = Col(full.kind, full.values[self.rows], full.nulls[self.rows], full.scale)
        else:
            c = self.spec.column(name)
            result = self._compute(c)
            if c.null > 0:
                extra = streams.chance(self._key(name, "null"), self.rows, c.null)
                result = Col(result.kind, result.values, result.nulls | extra, result.scale)
            for other, allowed in (c.params.get("only_when") or {}).items():
                cond = self.col(other)
                keep = np.isin(cond.values, np.asarray(list(allowed), dtype=cond.values.dtype))
                result = Col(
                    result.kind, result.values, result.nulls | ~keep | cond.nulls, result.scale
                )
        self.busy.pop()
        self.memo[name] = result
        return result

    def _key(self, column: str, purpose: str = "") -> int:
        """The stream key of a column; ``stable`` columns ignore the seed."""
        c = self.spec.column(column)
        seed = STABLE_SEED if c.stable else self.gen.seed
        return streams.stream_key(seed, self.spec.fq, column, purpose)

    def _none(self) -> Mask:
        return np.zeros(self.rows.shape, dtype=bool)

    def _deref(self, dotted: str) -> Col:
        """``column`` of this row, or ``fk_column.column`` of the row the FK points at."""
        if "." not in dotted:
            return self.col(dotted)
        fk_name, target = dotted.split(".", 1)
        parent, where, nulls = self._referenced(fk_name, dotted)
        got = parent.col(target)
        return Col(got.kind, got.values[where], got.nulls[where] | nulls, got.scale)

    def _referenced(self, fk_name: str, dotted: str) -> tuple[_Eval, I64, Mask]:
        """The evaluation of the rows ``fk_name`` points at (each distinct row once: an order's
        items share it; values never depend on the rows computed with them), kept for reuse."""
        if fk_name in self.parents:
            return self.parents[fk_name]
        fk_spec = self.spec.column(fk_name)
        if fk_spec.kind == "parent":
            assert self.plan.parent is not None
            parent = self.plan.parent
            parent_rows = self.plan.parent_of(self.rows)
            nulls = self._none()
        elif fk_spec.kind in ("ref", "tenant", "copy"):
            fq = self.gen.ref_target(self.spec, fk_name)
            parent = self.gen.plan(fq)
            keys = self.col(fk_name)
            parent_rows = parent.rows_of_keys(keys)
            nulls = keys.nulls
        else:
            raise SpecError(f"{self.spec.fq}: {dotted!r} needs {fk_name!r} to be a ref or parent")
        distinct, where = np.unique(parent_rows, return_inverse=True)
        found = (_Eval(self.gen, parent.spec, distinct.astype(np.int64)), where, nulls)
        self.parents[fk_name] = found
        return found

    def _compute(self, c: ColumnSpec) -> Col:
        p = c.params
        rows = self.rows
        key = self._key(c.name)
        none = self._none()
        kind = c.kind
        if kind == "id":
            return Col("int", rows + 1, none)
        if kind == "tenant":
            if self.spec.fq == TENANT_TABLE:
                return Col("int", rows + 1, none)
            if not self.plan.scoped:
                raise SpecError(f"{self.spec.fq}.{c.name}: kind tenant on a table not by tenant")
            return Col("int", self.plan.tenant_of(rows), none)
        if kind == "parent":
            if self.plan.parent is None:
                raise SpecError(f"{self.spec.fq}.{c.name}: kind parent needs rows.per")
            return self.plan.parent.key_col(self.plan.parent_of(rows))
        if kind == "index":
            first = self.plan.first_sibling(rows)
            return Col("int", rows - first + int(p.get("base", 1)), none)
        if kind == "ref":
            return self._ref(c, key)
        if kind == "copy":
            return self._copy(c, key)
        if kind in ("int", "money"):
            lo, hi = int(p["min"]), int(p["max"])
            dist = p.get("dist", "skew" if kind == "money" else "uniform")
            if dist == "uniform":
                return Col("int", streams.integers(key, rows, lo, hi), none)
            s = float(p.get("s", 1.0))
            return Col("int", lo + streams.skewed(key, rows, hi - lo + 1, s), none)
        if kind == "decimal":
            scale = int(p["scale"])
            unit = 10**scale
            lo = int(Decimal(str(p["min"])) * unit)
            hi = int(Decimal(str(p["max"])) * unit)
            return Col("dec", streams.integers(key, rows, lo, hi), none, scale)
        if kind == "choice":
            values = list(p["values"])
            weights = [float(w) for w in p.get("weights", [1.0] * len(values))]
            if len(weights) != len(values):
                raise SpecError(f"{self.spec.fq}.{c.name}: weights and values differ in length")
            picked = streams.weighted(key, rows, weights)
            lit = _literal_col(values)
            return Col(lit.kind, lit.values[picked], none, lit.scale)
        if kind == "bool":
            return Col("bool", streams.chance(key, rows, float(p.get("p", 0.5))), none)
        if kind == "pool":
            pool = np.asarray(self.gen.bundle.pools[p["pool"]], dtype=object)
            if p.get("unique"):
                return Col("text", pool[streams.permuted(key, rows, len(pool))], none)
            return Col("text", pool[streams.integers(key, rows, 0, len(pool) - 1)], none)
        if kind == "text":
            return self._text(c, key)
        if kind == "format":
            return self._format(c, key)
        if kind in ("timestamp", "date"):
            return self._time(c, key)
        if kind == "seq_date":
            first = self.plan.first_sibling(rows)
            return Col("date", _days(p["start"]) + (rows - first), none)
        if kind == "soft_delete":
            base = self._deref(p["after"])
            deleted = streams.chance(key, rows, float(p["p"]))
            delta = streams.integers(self._key(c.name, "delta"), rows, 60, 365 * _DAY)
            step = delta if base.kind == "ts" else delta // _DAY
            return Col(base.kind, base.values + step, ~deleted | base.nulls)
        if kind == "const":
            lit = _literal_col([p["value"]] * len(rows))
            return lit
        if kind == "null":
            return Col("text", np.full(rows.shape, "", dtype=object), ~none)
        raise SpecError(f"{self.spec.fq}.{c.name}: kind {kind!r} is not implemented")

    def _ref(self, c: ColumnSpec, key: int) -> Col:
        p = c.params
        target = self.gen.plan(p["ref"])
        rows = self.rows
        if target.keys is not None and "weights" in p:
            weights = [float(p["weights"].get(k, 0.0)) for k in target.keys]
            return target.key_col(streams.weighted(key, rows, weights))
        skew = p.get("dist", "uniform") == "zipf"
        s = float(p.get("s", 1.0))
        if p.get("earlier"):
            if target.spec.fq != self.spec.fq:
                raise SpecError(f"{self.spec.fq}.{c.name}: earlier is only for a self-reference")
            if self.plan.scoped:
                assert self.plan.tenant_offsets is not None
                lo = self.plan.tenant_offsets[self.plan.tenant_of(rows) - 1]
            else:
                lo = np.zeros(rows.shape, dtype=np.int64)
            size = rows - lo
            empty = size == 0
            safe = np.maximum(size, 1)
        elif target.scoped and self.plan.scoped and target.spec.fq != self.spec.fq:
            assert target.tenant_offsets is not None
            tenant = self.plan.tenant_of(rows)
            lo = target.tenant_offsets[tenant - 1]
            size = target.tenant_offsets[tenant] - lo
            empty = size == 0
            safe = np.maximum(size, 1)
        else:
            lo = np.zeros(rows.shape, dtype=np.int64)
            safe = np.full(rows.shape, max(target.n, 1), dtype=np.int64)
            empty = np.full(rows.shape, target.n == 0)
        if skew:
            offset = streams.skewed(key, rows, safe, s)
        else:
            offset = np.floor(streams.uniform(key, rows) * safe).astype(np.int64)
        picked = target.key_col((lo + offset).astype(np.int64))
        return Col(picked.kind, picked.values, picked.nulls | empty, picked.scale)

    def _copy(self, c: ColumnSpec, key: int) -> Col:
        p = c.params
        src = self._deref(p["of"])
        if "factor" in p:
            if src.kind not in ("int", "dec"):
                raise SpecError(f"{self.spec.fq}.{c.name}: factor needs a numeric source column")
            lo, hi = (float(x) for x in p["factor"])
            scale = int(p.get("scale", src.scale)) if src.kind == "dec" else 0
            factor = lo + streams.uniform(key, self.rows) * (hi - lo)
            values = src.values.astype(np.float64) * float(10 ** (scale - src.scale)) * factor
            return Col(src.kind, np.rint(values).astype(np.int64), src.nulls, scale)
        if "jitter" not in p:
            return src
        if src.kind not in ("int", "dec"):
            raise SpecError(f"{self.spec.fq}.{c.name}: jitter needs a numeric source column")
        jitter = float(p["jitter"])
        scale = int(p.get("scale", src.scale)) if src.kind == "dec" else 0
        drifted = streams.chance(self._key(c.name, "drift"), self.rows, float(p.get("drift", 1.0)))
        factor = 1.0 + (2.0 * streams.uniform(key, self.rows) - 1.0) * jitter
        factor = np.where(drifted, factor, 1.0)
        values = src.values.astype(np.float64) * float(10 ** (scale - src.scale)) * factor
        out = np.rint(values).astype(np.int64)
        return Col(src.kind, out, src.nulls, scale)

    def _text(self, c: ColumnSpec, key: int) -> Col:
        lo, hi = (int(x) for x in c.params["words"])
        pool = self.gen.bundle.pools["words"]
        counts = streams.integers(self._key(c.name, "n"), self.rows, lo, hi)
        picks = [
            streams.integers(self._key(c.name, f"w{i}"), self.rows, 0, len(pool) - 1)
            for i in range(hi)
        ]
        # Each value is its first ``n`` of ``hi`` picked words, joined by spaces and
        # capitalized (first letter upper, the rest lower): see word_texts.
        return Col("text", word_texts(pool, np.stack(picks, axis=1), counts), self._none())

    def _format(self, c: ColumnSpec, key: int) -> Col:
        template = str(c.params["format"])
        fields: list[tuple[str, npt.NDArray[Any]]] = []  # (format spec, a value per row)
        nulls = self._none()
        for i, m in enumerate(_FIELD.finditer(template)):
            name, fmt = m.group(1), m.group(2) or ""
            if name.startswith("@"):
                pool = self.gen.bundle.pools.get(name[1:])
                if pool is None:
                    raise SpecError(f"{self.spec.fq}.{c.name}: unknown pool {name[1:]!r}")
                idx = streams.integers(self._key(c.name, f"f{i}"), self.rows, 0, len(pool) - 1)
                fields.append(("", pool_array(pool)[idx]))
            else:
                field = self._field(c, name)
                nulls = nulls | field.nulls
                fields.append((fmt, field.values))
        # _FIELD has two groups, so split() yields literal, name, spec, literal, ...
        literals = _FIELD.split(template)[0::3]
        return Col("text", formatted(literals, fields, len(self.rows)), nulls)

    def _field(self, c: ColumnSpec, name: str) -> Col:
        rows = self.rows
        none = self._none()
        if name == "id":
            return Col("int", rows + 1, none)
        if name == "tenant":
            if not self.plan.scoped:
                raise SpecError(f"{self.spec.fq}.{c.name}: {{tenant}} on a table not by tenant")
            return Col("int", self.plan.tenant_of(rows), none)
        if name == "parent":
            assert self.plan.parent is not None
            return self.plan.parent.key_col(self.plan.parent_of(rows))
        if name == "index":
            return Col("int", rows - self.plan.first_sibling(rows) + 1, none)
        return self._deref(name)

    def _time(self, c: ColumnSpec, key: int) -> Col:
        p = c.params
        rows = self.rows
        is_ts = c.kind == "timestamp"
        if "after" in p:
            base = self._deref(p["after"])
            lo, hi = int(p.get("min", 0)), int(p.get("max", _DAY))
            delta = streams.integers(key, rows, lo, hi)
            seconds = base.values * _DAY if base.kind == "date" else base.values
            value = seconds + delta
            return Col("ts" if is_ts else "date", value if is_ts else value // _DAY, base.nulls)
        first, last = _days(p["start"]), _days(p["end"])
        n_days = last - first
        if p.get("season"):
            weights = [
                _SEASON[(date.fromordinal(_EPOCH.toordinal() + first + d)).month - 1]
                for d in range(n_days)
            ]
            day = first + streams.weighted(key, rows, weights)
        else:
            day = first + streams.integers(key, rows, 0, n_days - 1)
        if not is_ts:
            return Col("date", day, self._none())
        second = streams.integers(self._key(c.name, "s"), rows, 0, _DAY - 1)
        return Col("ts", day * _DAY + second, self._none())
