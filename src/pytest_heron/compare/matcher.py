"""Column matching: which predicted column holds which gold column, then rows verified.

Columns are paired through a content signature (an order-independent hash of the multiset of a
column's keys).  Only columns whose signatures tie are searched over, and ties are first ranked by
the signature of (already paired columns, candidate column) pairs, so the usual cost is one
verification.  A column without an equal signature gets candidates from a tolerance-aware test
(same non-numeric content; numbers equal within tolerance once both columns are sorted).  The
number of column mappings verified is bounded (see :func:`mapping_try_cap`); every accepted
mapping is verified on whole rows (:mod:`pytest_heron.compare.rows`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from pytest_heron.compare.columns import Table, generic_keys, row_codes, signature
from pytest_heron.compare.rows import RowChecker
from pytest_heron.compare.search import assignments, max_matching
from pytest_heron.compare.values import coarse_column, num_equal, numeric_profile

# Bounds that keep the worst case finite.  They only matter for pathological inputs.
_MAX_MAPPING_TRIES: Final = 120
_MAPPING_CELL_BUDGET: Final = 20_000_000
_MAX_SEARCH_NODES: Final = 100_000
_TOLERANT_TRIES: Final = 3  # mappings given the tolerant rescue on big results
_SMALL_CELLS: Final = 10_000  # results up to this many cells give it to every mapping
_DIAG_MIN_SAMPLE: Final = 1_000
_DIAG_CELL_BUDGET: Final = 10_000_000


def mapping_try_cap(n_rows: int, n_cols: int) -> int:
    """How many column mappings may be verified: 120, fewer for big results (at least 2)."""
    cells = max(1, n_rows * max(1, n_cols))
    return max(2, min(_MAX_MAPPING_TRIES, _MAPPING_CELL_BUDGET // cells))


class Matcher(RowChecker):
    """State of one comparison of two non-empty results with compatible widths."""

    def __init__(
        self,
        gold: Table,
        pred: Table,
        order: tuple[int, ...] | None,
        ties: Sequence[int] | None = None,
    ) -> None:
        super().__init__(gold, pred, order, ties)
        self._coarse_sig: dict[tuple[str, int], tuple[int, int]] = {}
        self._sorted_nums: dict[tuple[str, int], tuple[int, list[object]] | None] = {}

    # -- driver -------------------------------------------------------------------------------

    def run(self) -> str:
        n_gold, n_pred = len(self.gold), len(self.pred)
        if n_gold != n_pred:
            mapping = self.diagnostic_mapping()
            missing, extra = self.residue(
                range(n_gold), range(n_pred), self.gold_keys(), self.pred_keys(mapping), mapping
            )
            text = f"row counts differ: gold {n_gold}, predicted {n_pred}"
            if missing:
                text += "; " + self.missing_text(missing[0])
            elif extra:
                text += "; " + self.extra_text(extra[0])
            return text

        if self.g_width == self.p_width and self.exactly_equal(tuple(range(self.g_width))):
            return ""  # the usual case: same columns in the same order
        cap = mapping_try_cap(n_gold, self.p_width)
        tried: set[tuple[int, ...]] = set()
        first_reason = ""
        unmatched: int | None = None
        previous: list[list[int]] | None = None
        for loose_everywhere in (False, True):
            cands = self.candidates(loose_everywhere)
            if cands == previous:
                break
            previous = cands
            missing_col = self.infeasible_column(cands)
            if missing_col is not None:
                unmatched = missing_col if unmatched is None else unmatched
                if not cands[missing_col]:
                    break  # not even a loose candidate: widening the others cannot help
                continue
            batch: list[tuple[int, ...]] = []
            for mapping in assignments(cands, _MAX_SEARCH_NODES):
                if len(tried) >= cap:
                    break
                if mapping not in tried:
                    tried.add(mapping)
                    batch.append(mapping)
            # cheap exact test of every mapping first; the tolerant rescue only for the best few
            if any(self.exactly_equal(m) for m in batch):
                return ""
            rescue = len(batch) if n_gold * self.p_width <= _SMALL_CELLS else _TOLERANT_TRIES
            for mapping in batch[:rescue]:
                reason = self.verify(mapping)
                if not reason:
                    return ""
                first_reason = first_reason or reason
        if first_reason:
            return first_reason
        mapping = self.diagnostic_mapping()
        missing, extra = self.residue(
            range(n_gold), range(n_pred), self.gold_keys(), self.pred_keys(mapping), mapping
        )
        parts = []
        if self.g_width > 1 or not (missing or extra):
            col = unmatched if unmatched is not None else 0
            parts.append(
                f"no column of the prediction matches gold column {col + 1} "
                f"(values like {self.sample_values(col)})"
            )
        if missing:
            parts.append(self.missing_text(missing[0]))
        if extra and self.g_width == 1:
            parts.append(self.extra_text(extra[0]))
        return "; ".join(parts)

    # -- column candidates --------------------------------------------------------------------

    def signatures(self) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
        gsig = [self.g.signature(c) for c in range(self.g_width)]
        psig = [self.p.signature(j) for j in range(self.p_width)]
        return gsig, psig

    def candidates(self, loose_everywhere: bool) -> list[list[int]]:
        """Per gold column, the predicted columns that may hold it, best first."""
        gsig, psig = self.signatures()
        by_sig: dict[tuple[int, int], list[int]] = {}
        for j, s in enumerate(psig):
            by_sig.setdefault(s, []).append(j)
        exact = [list(by_sig.get(s, [])) for s in gsig]
        cands: list[list[int]] = []
        for i, found in enumerate(exact):
            if not found or loose_everywhere:
                extra = [
                    j for j in range(self.p_width) if j not in found and self.loose_match(i, j)
                ]
                found = found + extra
            cands.append(found)
        self.rank(cands, exact)
        return cands

    def rank(self, cands: list[list[int]], exact: list[list[int]]) -> None:
        """Order candidates: agreement with already-unique columns first, then position."""
        anchors = [(i, c[0]) for i, c in enumerate(exact) if len(c) == 1]
        n = len(self.gold)
        psig_cache: dict[int, tuple[int, int]] = {}
        anchor_codes: tuple[Any, Any] | None = None  # built once, when first needed
        for i, found in enumerate(cands):
            if len(found) < 2:
                continue
            agree: set[int] = set()
            if anchors and len(exact[i]) > 1:
                if anchor_codes is None:
                    anchor_codes = (
                        row_codes([self.g.codes(a) for a, _ in anchors], n),
                        row_codes([self.p.codes(b) for _, b in anchors], n),
                    )
                g_anchor, p_anchor = anchor_codes
                target = signature(row_codes([g_anchor, self.g.codes(i)], n))
                for j in exact[i]:
                    if j not in psig_cache:
                        psig_cache[j] = signature(row_codes([p_anchor, self.p.codes(j)], n))
                    if psig_cache[j] == target:
                        agree.add(j)
            exact_set = set(exact[i])
            found.sort(key=lambda j: (j not in agree, j not in exact_set, abs(j - i), j))

    def coarse_signature(self, side: str, col: int) -> tuple[int, int]:
        key = (side, col)
        if key not in self._coarse_sig:
            raw = self.g.raw(col) if side == "g" else self.p.raw(col)
            self._coarse_sig[key] = signature(generic_keys(coarse_column(raw)).codes)
        return self._coarse_sig[key]

    def numeric_profile(self, side: str, col: int) -> tuple[int, list[object]] | None:
        """(NULL count, numbers sorted) when a column holds only numbers and NULLs."""
        key = (side, col)
        if key not in self._sorted_nums:
            raw = self.g.raw(col) if side == "g" else self.p.raw(col)
            self._sorted_nums[key] = numeric_profile(raw)
        return self._sorted_nums[key]

    def loose_match(self, i: int, j: int) -> bool:
        """Could gold column i equal predicted column j once the tolerance is applied?"""
        if self.coarse_signature("g", i) != self.coarse_signature("p", j):
            return False
        g_prof = self.numeric_profile("g", i)
        if g_prof is None:
            return True  # non-numeric parts agree exactly; rows are verified later
        p_prof = self.numeric_profile("p", j)
        if p_prof is None or g_prof[0] != p_prof[0] or len(g_prof[1]) != len(p_prof[1]):
            return False
        # sorted pairing is optimal for this tolerance (its intervals grow with the value)
        return all(map(num_equal, g_prof[1], p_prof[1]))

    def infeasible_column(self, cands: list[list[int]]) -> int | None:
        """A gold column that no assignment of distinct predicted columns can cover."""
        matched = max_matching(len(cands), cands)
        for i, j in enumerate(matched):
            if j < 0:
                return i
        return None

    def diagnostic_mapping(self) -> tuple[int, ...]:
        """A plausible column mapping for messages when no verified one exists.

        Pairs columns greedily by equal signature, then by the overlap of their distinct values
        (on a prefix of the rows when the tables are large), then by position.
        """
        gsig, psig = self.signatures()
        pairs = max(1, self.g_width * self.p_width)
        sample = max(_DIAG_MIN_SAMPLE, _DIAG_CELL_BUDGET // pairs)
        g_sets = [set(self.g.keys(c)[:sample]) for c in range(self.g_width)]
        p_sets = [set(self.p.keys(j)[:sample]) for j in range(self.p_width)]
        scored: list[tuple[bool, float, int, int, int]] = []
        for i, g_set in enumerate(g_sets):
            for j, p_set in enumerate(p_sets):
                common = len(g_set & p_set)
                overlap = common / max(1, len(g_set) + len(p_set) - common)
                scored.append((gsig[i] != psig[j], -overlap, abs(i - j), i, j))
        scored.sort()
        mapping = [-1] * self.g_width
        used: set[int] = set()
        for _, _, _, i, j in scored:
            if mapping[i] < 0 and j not in used:
                mapping[i] = j
                used.add(j)
        return tuple(mapping)
