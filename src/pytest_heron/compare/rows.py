"""Row-level checks of one column mapping: exact passes, the tolerant re-pairing, ORDER BY runs.

The exact passes work on whole columns (64-bit row codes sorted with numpy, then the rows they
pair up checked key by key); the tolerant passes work on the few rows left over, one by one.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from itertools import pairwise
from typing import Final

import numpy as np
import numpy.typing as npt

from pytest_heron.compare.columns import (
    U64,
    Table,
    adjacent_equal,
    aligned_equal,
    mix,
    row_codes,
    sides,
)
from pytest_heron.compare.messages import cap, fmt_row, fmt_value
from pytest_heron.compare.search import max_matching
from pytest_heron.compare.values import Key, Row, coarse, row_close, row_sort_key

_PAIR_BUDGET: Final = 250_000
_MAX_TOLERANT_ROWS: Final = 200_000


class RowChecker:
    """Rows of gold and prediction, compared under a column mapping (pred column per gold one)."""

    def __init__(
        self,
        gold: Table,
        pred: Table,
        order: tuple[int, ...] | None,
        ties: Sequence[int] | None = None,
    ) -> None:
        self.gold = gold
        self.pred = pred
        self.g_width = gold.width
        self.p_width = pred.width
        self.order = order
        # ties: the tie groups of gold's rows, given when some sort keys are not output columns
        # (then ``order`` names only those that are, for messages)
        self.ordered = order is not None or ties is not None
        self.sequence = order == () and ties is None  # the exact row sequence is enforced
        self.tied = ties is not None
        self.g, self.p = sides(gold, pred)
        self.pair_budget = _PAIR_BUDGET
        self._gkeys: list[Key] | None = None
        self._gcount: Counter[Key] | None = None
        self._g_codes: U64 | None = None
        self._g_order: npt.NDArray[np.intp] | None = None
        self._runs: npt.NDArray[np.int64] | None = (
            None if ties is None else np.asarray(ties, dtype=np.int64)
        )
        self._exact: dict[tuple[int, ...], bool] = {}

    # -- keys ---------------------------------------------------------------------------------

    def gold_keys(self) -> list[Key]:
        if self._gkeys is None:
            self._gkeys = self._keys([self.g.keys(c) for c in range(self.g_width)], len(self.gold))
        return self._gkeys

    def gold_count(self) -> Counter[Key]:
        if self._gcount is None:
            self._gcount = Counter(self.gold_keys())
        return self._gcount

    def pred_keys(self, mapping: tuple[int, ...]) -> list[Key]:
        return self._keys([self.p.keys(j) for j in mapping], len(self.pred))

    @staticmethod
    def _keys(cols: list[list[object]], n: int) -> list[Key]:
        if not cols:
            return [()] * n
        return list(zip(*cols, strict=False))

    def aligned(self, j: int, mapping: tuple[int, ...]) -> Row:
        row = self.pred[j]
        return tuple(row[m] for m in mapping)

    # -- exact passes on whole columns ----------------------------------------------------------

    def exactly_equal(self, mapping: tuple[int, ...]) -> bool:
        """Equal without needing the tolerance rescue (canonical keys agree row for row)."""
        if mapping not in self._exact:
            self._exact[mapping] = self._exactly_equal(mapping)
        return self._exact[mapping]

    def gold_codes(self) -> U64:
        if self._g_codes is None:
            codes = row_codes([self.g.codes(c) for c in range(self.g_width)], self.g.n)
            self._g_codes = self.with_runs(codes)
        return self._g_codes

    def runs(self) -> npt.NDArray[np.int64] | None:
        """Per gold row, the number of its ORDER BY run (None without sort keys).

        A run starts wherever a sort key differs from the row before; keys are compared
        exactly, so a code collision can never merge two runs.
        """
        if self._runs is not None:
            return self._runs
        if not self.order:
            return None
        if self._runs is None:
            change = np.zeros(len(self.gold), dtype=bool)
            for c in self.order:
                change[1:] |= ~adjacent_equal(self.g.ck(c))
            self._runs = np.cumsum(change, dtype=np.int64)
        return self._runs

    def with_runs(self, codes: U64) -> U64:
        """Row codes made distinct between ORDER BY runs (rows compared by position)."""
        runs = self.runs()
        return codes if runs is None else mix(codes ^ mix(runs.view(np.uint64)))

    def same_rows_at(
        self, mapping: tuple[int, ...], g_at: npt.NDArray[np.intp], p_at: npt.NDArray[np.intp]
    ) -> bool:
        """Whether gold rows ``g_at`` have the keys of predicted rows ``p_at``, pair by pair."""
        return all(
            aligned_equal(self.g.ck(c), g_at, self.p.ck(j), p_at) for c, j in enumerate(mapping)
        )

    def _exactly_equal(self, mapping: tuple[int, ...]) -> bool:
        n = len(self.gold)
        everywhere = np.arange(n, dtype=np.intp)
        if self.ordered:
            if self.same_rows_at(mapping, everywhere, everywhere):
                return True  # identical keys in identical places
            if self.sequence:
                return False  # whole rows in order: nothing else to try
        # pair the rows of both sides by sorted row codes (with ORDER BY, a row's code includes
        # its run: predicted rows by position), then check that paired rows have equal keys
        p_codes = self.with_runs(row_codes([self.p.codes(j) for j in mapping], n))
        g_codes = self.gold_codes()
        if g_codes.sum(dtype=np.uint64) != p_codes.sum(dtype=np.uint64):
            return False  # the sum (mod 2**64) of a multiset of codes: equal keys, equal sums
        g_order = self.gold_order()
        p_order = np.argsort(p_codes)
        if not np.array_equal(g_codes[g_order], p_codes[p_order]):
            return False  # the multisets of codes differ (equal keys always get equal codes)
        partner = np.empty(n, dtype=np.intp)  # the gold row paired with each predicted row
        partner[p_order] = g_order
        runs = self.runs()
        if (runs is None or np.array_equal(runs[partner], runs)) and self.same_rows_at(
            mapping, partner, everywhere
        ):
            # a one-to-one pairing of rows with equal keys (within each run): equal multisets
            return True
        # a code collision: the Python-level pass decides
        gkeys = self.gold_keys()
        pkeys = self.pred_keys(mapping)
        if self.ordered:
            # equal runs in the same places imply equal multisets
            return not self.check_order(gkeys, pkeys, mapping, tolerant=False)
        return bool(dict.__eq__(Counter(pkeys), self.gold_count()))

    def gold_order(self) -> npt.NDArray[np.intp]:
        """Gold's rows in the order of their row codes (computed once)."""
        if self._g_order is None:
            self._g_order = np.argsort(self.gold_codes())
        return self._g_order

    # -- verification with the tolerance --------------------------------------------------------

    def verify(self, mapping: tuple[int, ...]) -> str:
        """Empty string when the prediction, with its columns picked by ``mapping``, equals gold."""
        gkeys = self.gold_keys()
        pkeys = self.pred_keys(mapping)
        if self.ordered and gkeys == pkeys:
            return ""
        pcount = Counter(pkeys)
        if not dict.__eq__(pcount, self.gold_count()):
            missing, extra = self.residue(
                range(len(gkeys)), range(len(pkeys)), gkeys, pkeys, mapping, pcount
            )
            if missing or extra:
                parts = []
                if missing:
                    parts.append(self.missing_text(missing[0]))
                if extra:
                    parts.append(self.extra_text(extra[0]))
                return "; ".join(parts)
        if not self.ordered:
            return ""
        return self.check_order(gkeys, pkeys, mapping, tolerant=True)

    def residue(
        self,
        g_idx: Sequence[int],
        p_idx: Sequence[int],
        gkeys: list[Key],
        pkeys: list[Key],
        mapping: tuple[int, ...],
        pcount: Counter[Key] | None = None,
    ) -> tuple[list[int], list[int]]:
        """Rows (indices) left unpaired after exact and then tolerant pairing, in row order."""
        whole = len(g_idx) == len(gkeys) and len(p_idx) == len(pkeys)
        gcount = self.gold_count() if whole else Counter(gkeys[i] for i in g_idx)
        if pcount is None:
            pcount = Counter(pkeys[j] for j in p_idx)
        g_need: dict[Key, int] = {}
        p_need: dict[Key, int] = {}
        for key, _ in gcount.items() ^ pcount.items():  # keys whose counts differ (C-level)
            surplus = gcount.get(key, 0) - pcount.get(key, 0)
            if surplus > 0:
                g_need[key] = surplus
            elif surplus < 0:
                p_need[key] = -surplus
        g_left = take(g_idx, gkeys, g_need)
        p_left = take(p_idx, pkeys, p_need)
        if not g_left or not p_left:
            return g_left, p_left
        if len(g_left) > _MAX_TOLERANT_ROWS or len(p_left) > _MAX_TOLERANT_ROWS:
            return g_left, p_left
        return self.tolerant_pairing(g_left, p_left, mapping)

    def tolerant_pairing(
        self, g_left: list[int], p_left: list[int], mapping: tuple[int, ...]
    ) -> tuple[list[int], list[int]]:
        groups: dict[Key, tuple[list[int], list[int]]] = {}
        for i in g_left:
            groups.setdefault(tuple(map(coarse, self.gold[i])), ([], []))[0].append(i)
        for j in p_left:
            shape = tuple(map(coarse, self.aligned(j, mapping)))
            groups.setdefault(shape, ([], []))[1].append(j)
        g_rest: list[int] = []
        p_rest: list[int] = []
        for g_group, p_group in groups.values():
            if not g_group or not p_group:
                g_rest.extend(g_group)
                p_rest.extend(p_group)
                continue
            g_un, p_un = self.pair_group(g_group, p_group, mapping)
            g_rest.extend(g_un)
            p_rest.extend(p_un)
        g_rest.sort()
        p_rest.sort()
        return g_rest, p_rest

    def pair_group(
        self, g_group: list[int], p_group: list[int], mapping: tuple[int, ...]
    ) -> tuple[list[int], list[int]]:
        """Pair rows of one coarse group within tolerance; returns what stays unpaired."""
        g_rows = {i: self.gold[i] for i in g_group}
        p_rows = {j: self.aligned(j, mapping) for j in p_group}
        g_key = {i: row_sort_key(r) for i, r in g_rows.items()}
        p_key = {j: row_sort_key(r) for j, r in p_rows.items()}
        g_sorted = sorted(g_group, key=g_key.__getitem__)
        p_sorted = sorted(p_group, key=p_key.__getitem__)
        # Merge-like walk: optimal when rows have one number, a good first pass otherwise.
        limit = 2 * math.isqrt(self.pair_budget) + 2
        g_un: list[int] = []
        p_un: list[int] = []
        gi = pj = 0
        while gi < len(g_sorted) and pj < len(p_sorted):
            i, j = g_sorted[gi], p_sorted[pj]
            if row_close(g_rows[i], p_rows[j]):
                gi += 1
                pj += 1
                continue
            if g_key[i] <= p_key[j]:
                g_un.append(i)
                gi += 1
            else:
                p_un.append(j)
                pj += 1
            if len(g_un) + len(p_un) > limit:  # too different for the bipartite pass anyway
                break
        g_un.extend(g_sorted[gi:])
        p_un.extend(p_sorted[pj:])
        if not g_un or not p_un:
            return g_un, p_un
        cost = len(g_un) * len(p_un)
        if cost > self.pair_budget:
            return g_un, p_un
        self.pair_budget -= cost
        adj = [[k for k, j in enumerate(p_un) if row_close(g_rows[i], p_rows[j])] for i in g_un]
        matched = max_matching(len(g_un), adj)
        taken = {k for k in matched if k >= 0}
        g_rest = [i for i, k in zip(g_un, matched, strict=True) if k < 0]
        p_rest = [j for k, j in enumerate(p_un) if k not in taken]
        return g_rest, p_rest

    def check_order(
        self, gkeys: list[Key], pkeys: list[Key], mapping: tuple[int, ...], *, tolerant: bool
    ) -> str:
        """Run-by-run check ("" when in order); without ``tolerant``, runs must match exactly."""
        n = len(gkeys)
        cols = self.order or ()
        first = next((k for k in range(n) if gkeys[k] != pkeys[k]), n)
        if self.sequence:
            for k in range(first, n):
                if gkeys[k] != pkeys[k] and (
                    not tolerant or not row_close(self.gold[k], self.aligned(k, mapping))
                ):
                    return (
                        f"order differs at row {k + 1}: expected {fmt_row(self.gold[k])}, "
                        f"got {fmt_row(self.pred[k])}"
                    )
            return ""

        runs = self.runs()
        sort_keys: Sequence[object] = (
            runs.tolist()
            if self.tied and runs is not None
            else self.g.keys(cols[0])
            if len(cols) == 1
            else self._keys([self.g.keys(c) for c in cols], n)
        )
        start = first  # runs before the first difference are identical: skip them
        while start > 0 and sort_keys[start - 1] == sort_keys[start]:
            start -= 1
        bounds = [start]
        bounds.extend(k for k in range(start + 1, n) if sort_keys[k] != sort_keys[k - 1])
        bounds.append(n)
        for start, end in pairwise(bounds):
            if gkeys[start:end] != pkeys[start:end] and not self.run_ok(
                start, end, gkeys, pkeys, mapping, tolerant
            ):
                return self.order_text(start, end, gkeys, pkeys, mapping)
        return ""

    def run_ok(
        self,
        start: int,
        end: int,
        gkeys: list[Key],
        pkeys: list[Key],
        mapping: tuple[int, ...],
        tolerant: bool,
    ) -> bool:
        if not tolerant:
            return bool(dict.__eq__(Counter(gkeys[start:end]), Counter(pkeys[start:end])))
        if end - start == 1:
            return row_close(self.gold[start], self.aligned(start, mapping))
        span = range(start, end)
        missing, extra = self.residue(span, span, gkeys, pkeys, mapping)
        return not missing and not extra

    def order_text(
        self, start: int, end: int, gkeys: list[Key], pkeys: list[Key], mapping: tuple[int, ...]
    ) -> str:
        cols = self.order or ()
        expected = tuple(self.gold[start][c] for c in cols)
        for k in range(start, end):
            got_row = self.aligned(k, mapping)
            got = tuple(got_row[c] for c in cols)
            if not row_close(expected, got):
                return (
                    f"order differs at row {k + 1}: expected a row with keys "
                    f"{fmt_row(expected)}, got {fmt_row(got)}"
                )
        # every key is right, so rows moved between runs that share a key
        span = range(start, end)
        missing, extra = self.residue(span, span, gkeys, pkeys, mapping)
        where = f"row {start + 1}" if end - start == 1 else f"rows {start + 1}-{end}"
        if not cols:  # only with ties: every sort key is outside the output columns
            parts = [f"order differs in {where} (rows tied on sort keys outside the output)"]
        else:
            outside = " and keys outside the output" if self.tied else ""
            parts = [f"order differs in {where} (sort keys {fmt_row(expected)}{outside})"]
        if missing:
            parts.append(self.missing_text(missing[0]))
        if extra:
            parts.append(self.extra_text(extra[0]))
        return "; ".join(parts)

    # -- messages -----------------------------------------------------------------------------

    def missing_text(self, i: int) -> str:
        return f"first missing row (in gold, not predicted): {fmt_row(self.gold[i])}"

    def extra_text(self, j: int) -> str:
        return f"first extra row (predicted, not in gold): {fmt_row(self.pred[j])}"

    def sample_values(self, col: int) -> str:
        seen: set[object] = set()
        shown: list[str] = []
        more = False
        for value, key in zip(self.g.raw(col), self.g.keys(col), strict=True):
            if key in seen:
                continue
            if len(shown) == 3:
                more = True
                break
            seen.add(key)
            shown.append(fmt_value(value))
        return cap(", ".join(shown) + (", ..." if more else ""), 120)


def take(indices: Iterable[int], keys: list[Key], need: dict[Key, int]) -> list[int]:
    """The first rows (in order) whose keys are still needed, consuming ``need``."""
    out: list[int] = []
    remaining = sum(need.values())
    if not remaining:
        return out
    for i in indices:
        k = keys[i]
        if k in need and need[k] > 0:
            need[k] -= 1
            out.append(i)
            remaining -= 1
            if not remaining:
                break
    return out
