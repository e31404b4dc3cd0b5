"""How much of a wrong answer is right: cells matched under a column mapping and a row pairing.

This is the counting behind Soft-F1 (:func:`pytest_heron.scoring.similarity.soft_f1`).  It uses
the comparator's canonical keys and 64-bit codes (:mod:`~pytest_heron.compare.columns`), so two
cells match exactly when the comparator's exact pass would call them equal (a float within
tolerance of the other value but on the other side of a grid point does not count here; the
comparator itself decides whether a whole answer is right).

1. **Column mapping.**  For every (gold column, predicted column) pair, the *overlap* is the size
   of the multiset intersection of their keys.  Gold columns get distinct predicted columns so
   that the total overlap is as large as possible (exactly, by dynamic programming over subsets,
   when neither side has more than :data:`_EXACT_MAPPING_WIDTH` columns; greedily, best pairs
   first, otherwise); ties go to the mapping that moves columns least, then to the smallest
   column numbers.
2. **Row pairing.**  Rows are paired in rounds over subsets of the mapped columns, largest first
   (all columns, then every subset of all but one, ...; subsets of one size in lexicographic
   order).  A round pairs the still unpaired gold and predicted rows whose keys agree on that
   subset, as many as possible.  Within a group of agreeing rows, rows are taken in a canonical
   order of their keys (not their order in the result, and not by hash; codes can collide, so
   this holds from the first round on), so the outcome depends
   on neither the order of the rows nor the interpreter's hash seed.  At most
   :data:`_MAX_SUBSETS` subsets are used: on results with more than eight mapped columns, the
   largest subsets that fit in the budget, then the single columns.
3. **Count.**  Each pair contributes the number of mapped columns whose keys agree.

Every round groups row codes by sorting or hashing, so the cost is O(n log n) per round for a
bounded number of rounds; there is no scan of candidate rows per row.  A subset is skipped when
two of its columns have no rows agreeing on both (checked once, after the rounds on all columns
and on all but one): rows that agree on a subset agree on each pair of its columns.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
from math import comb
from typing import Final

import numpy as np
import numpy.typing as npt

from pytest_heron.compare.columns import (
    NULL_BITS,
    U64,
    ColumnKeys,
    Side,
    equal_at,
    python_keys,
    row_codes,
    sides,
    table,
)

_EXACT_MAPPING_WIDTH: Final = 10
_MAX_SUBSETS: Final = 256

Idx = npt.NDArray[np.intp]


@dataclass(frozen=True)
class Overlap:
    """Counts of one comparison: rows and widths of both sides, pairs formed, cells matched.

    ``mapping`` gives, per gold column, the predicted column it was mapped to (-1: none).
    """

    gold_rows: int
    pred_rows: int
    gold_width: int
    pred_width: int
    pairs: int
    cells: int
    mapping: tuple[int, ...]


def overlap(gold: Sequence[Sequence[object]], pred: Sequence[Sequence[object]]) -> Overlap | None:
    """Cells of ``gold`` matched by ``pred`` (see the module docstring); None if rows are ragged."""
    g_table, p_table = table(gold), table(pred)
    if g_table is None or p_table is None:
        return None
    g, p = sides(g_table, p_table)
    if g.n == 0 or p.n == 0 or g.width == 0 or p.width == 0:
        return Overlap(g.n, p.n, g.width, p.width, 0, 0, (-1,) * g.width)
    mapping = best_mapping(column_overlaps(g, p))
    pairs_g, pairs_p = pair_rows(g, p, mapping)
    cells = 0
    for c, j in enumerate(mapping):
        if j >= 0 and len(pairs_g):
            cells += int(np.count_nonzero(equal_at(g.ck(c), pairs_g, p.ck(j), pairs_p)))
    return Overlap(g.n, p.n, g.width, p.width, len(pairs_g), cells, mapping)


# -- columns ----------------------------------------------------------------------------------


def column_overlaps(g: Side, p: Side) -> list[list[int]]:
    """Per gold column and predicted column, the size of the intersection of their key multisets.

    Computed on codes (equal keys have equal codes; a code collision could only overstate an
    overlap, which only affects which mapping is tried, never a count of matched cells).
    """
    g_counts = [np.unique(g.codes(c), return_counts=True) for c in range(g.width)]
    p_counts = [np.unique(p.codes(j), return_counts=True) for j in range(p.width)]
    out: list[list[int]] = []
    for gu, gc in g_counts:
        row: list[int] = []
        for pu, pc in p_counts:
            _, gi, pi = np.intersect1d(gu, pu, assume_unique=True, return_indices=True)
            row.append(int(np.minimum(gc[gi], pc[pi]).sum()))
        out.append(row)
    return out


def best_mapping(overlaps: list[list[int]]) -> tuple[int, ...]:
    """Distinct predicted columns for the gold columns maximising the total overlap.

    Every gold column is mapped when there are enough predicted columns; otherwise the gold
    columns left over get -1.  Ties: the least total displacement ``|gold - pred|``, then the
    lexicographically smallest mapping.
    """
    n_gold = len(overlaps)
    n_pred = len(overlaps[0]) if overlaps else 0
    if (
        min(n_gold, n_pred) <= _EXACT_MAPPING_WIDTH
        and max(n_gold, n_pred) <= 2 * _EXACT_MAPPING_WIDTH
    ):
        return _exact_mapping(overlaps, n_gold, n_pred)
    return _greedy_mapping(overlaps, n_gold, n_pred)


def _exact_mapping(overlaps: list[list[int]], n_gold: int, n_pred: int) -> tuple[int, ...]:
    # transpose so that the narrower side indexes the rows: states are subsets of the wider one
    flip = n_gold > n_pred
    rows, cols = (n_pred, n_gold) if flip else (n_gold, n_pred)

    def score(r: int, c: int) -> tuple[int, int]:
        i, j = (c, r) if flip else (r, c)
        return overlaps[i][j], -abs(i - j)

    # state: mask of used wide columns -> (total overlap, -displacement, choices); choices are
    # compared negated so that a larger key means a lexicographically smaller mapping
    best: dict[int, tuple[int, int, tuple[int, ...]]] = {0: (0, 0, ())}
    for r in range(rows):
        nxt: dict[int, tuple[int, int, tuple[int, ...]]] = {}
        for mask in sorted(best):
            total, moved, chosen = best[mask]
            for c in range(cols):
                if mask >> c & 1:
                    continue
                gain, shift = score(r, c)
                cand = (total + gain, moved + shift, (*chosen, -c))
                key = mask | 1 << c
                if key not in nxt or cand > nxt[key]:
                    nxt[key] = cand
        best = nxt
    _, _, chosen = max(best.values())
    picks = [-c for c in chosen]
    if not flip:
        return tuple(picks)
    mapping = [-1] * n_gold
    for pred_col, gold_col in enumerate(picks):
        mapping[gold_col] = pred_col
    return tuple(mapping)


def _greedy_mapping(overlaps: list[list[int]], n_gold: int, n_pred: int) -> tuple[int, ...]:
    ranked = sorted(
        (-overlaps[i][j], abs(i - j), i, j) for i in range(n_gold) for j in range(n_pred)
    )
    mapping = [-1] * n_gold
    used = [False] * n_pred
    for _, _, i, j in ranked:
        if mapping[i] < 0 and not used[j]:
            mapping[i] = j
            used[j] = True
    return tuple(mapping)


# -- rows -------------------------------------------------------------------------------------


def column_subsets(columns: Sequence[int]) -> list[tuple[int, ...]]:
    """The subsets of ``columns`` the row rounds use, in order (see the module docstring)."""
    m = len(columns)
    out: list[tuple[int, ...]] = []
    for size in range(m, 1, -1):
        if len(out) + comb(m, size) + m > _MAX_SUBSETS:
            continue
        out.extend(combinations(columns, size))
    out.extend((c,) for c in columns)
    return out


def _rank_keys(ck: ColumnKeys, rows: Idx) -> npt.NDArray[np.generic]:
    """A sort key per row (of ``rows``) of one column, from the keys alone (never from hashes)."""
    if ck.family == "i":
        return ck.exact[rows]
    if ck.family == "f" and not (ck.exact[rows] == NULL_BITS).any():
        return ck.exact.view(np.float64)[rows]  # NULLs (NaN bits) would tie with NaN
    every = python_keys(ck)
    keys = [every[i] for i in rows.tolist()]
    distinct = set(keys)
    if {type(k) for k in distinct} == {str}:
        ordered = sorted(distinct)
    else:
        ordered = sorted(distinct, key=lambda k: (type(k).__qualname__, repr(k)))
    rank = {k: r for r, k in enumerate(ordered)}
    return np.fromiter(map(rank.__getitem__, keys), dtype=np.int64, count=len(keys))


def canonical_order(side: Side, columns: Sequence[int], rows: Idx) -> Idx:
    """``rows`` sorted by the keys of ``columns`` (first column most significant)."""
    if not columns or len(rows) < 2:
        return rows
    keys = [_rank_keys(side.ck(c), rows) for c in reversed(columns)]
    return rows[np.lexsort(keys)]


def pair_rows(g: Side, p: Side, mapping: tuple[int, ...]) -> tuple[Idx, Idx]:
    """Gold and predicted row indices paired by the rounds of the module docstring.

    Rows are put in canonical order before the first round: rows are grouped by 64-bit codes,
    and two different keys can share a code (``''`` and ``0`` both code as 0), so even the
    round on all columns may group rows that are not alike; the canonical order makes which of
    them pair a function of their keys, never of their order in the result.
    """
    mapped = [c for c, j in enumerate(mapping) if j >= 0]
    taken = set(mapping)
    p_columns = [mapping[c] for c in mapped] + [j for j in range(p.width) if j not in taken]
    alive_g = np.arange(g.n, dtype=np.intp)
    alive_p = np.arange(p.n, dtype=np.intp)
    paired_g: list[Idx] = []
    paired_p: list[Idx] = []
    joint: dict[tuple[int, int], bool] = {}  # pairs of columns on which some rows could agree
    for rnd, subset in enumerate(column_subsets(mapped)):
        if not len(alive_g) or not len(alive_p):
            break
        if rnd == 0:
            alive_g = canonical_order(g, list(range(g.width)), alive_g)
            alive_p = canonical_order(p, p_columns, alive_p)
        if 2 < len(subset) < len(mapped) - 1:
            if not joint:  # once, after the rounds on all columns and on all but one
                joint = _joint_agreement(g, p, mapping, mapped, alive_g, alive_p)
            if not all(joint[pair] for pair in combinations(subset, 2)):
                continue  # rows that agree on the subset agree on each pair of its columns
        g_codes = row_codes([g.codes(c)[alive_g] for c in subset], len(alive_g))
        p_codes = row_codes([p.codes(mapping[c])[alive_p] for c in subset], len(alive_p))
        gi, pi = pair_equal(g_codes, p_codes)
        if not len(gi):
            continue
        paired_g.append(alive_g[gi])
        paired_p.append(alive_p[pi])
        alive_g = np.delete(alive_g, gi)
        alive_p = np.delete(alive_p, pi)
    if not paired_g:
        empty = np.zeros(0, dtype=np.intp)
        return empty, empty
    return np.concatenate(paired_g), np.concatenate(paired_p)


def _joint_agreement(
    g: Side, p: Side, mapping: tuple[int, ...], mapped: list[int], alive_g: Idx, alive_p: Idx
) -> dict[tuple[int, int], bool]:
    """Per pair of mapped columns, whether any alive gold and predicted rows agree on both.

    Rows only leave the alive sets, so a pair found empty here stays empty: every later subset
    holding it is skipped without a round.
    """
    out: dict[tuple[int, int], bool] = {}
    for a, b in combinations(mapped, 2):
        g_codes = row_codes([g.codes(a)[alive_g], g.codes(b)[alive_g]], len(alive_g))
        p_codes = row_codes(
            [p.codes(mapping[a])[alive_p], p.codes(mapping[b])[alive_p]], len(alive_p)
        )
        out[(a, b)] = bool(len(pair_equal(g_codes, p_codes)[0]))
    return out


def pair_equal(g_codes: U64, p_codes: U64) -> tuple[Idx, Idx]:
    """Positions of gold and predicted codes paired up: the k-th gold occurrence of a code with
    its k-th predicted occurrence (as many pairs per code as the rarer side has)."""
    n_g = len(g_codes)
    labels, _ = group_codes(np.concatenate([g_codes, p_codes]))
    g_labels, p_labels = labels[:n_g], labels[n_g:]
    span = np.int64(max(n_g, len(p_codes)) + 1)
    g_slot = g_labels.astype(np.int64) * span + _rank_within(g_labels)
    p_slot = p_labels.astype(np.int64) * span + _rank_within(p_labels)
    _, gi, pi = np.intersect1d(g_slot, p_slot, assume_unique=True, return_indices=True)
    return gi.astype(np.intp, copy=False), pi.astype(np.intp, copy=False)


def group_codes(codes: U64) -> tuple[Idx, int]:
    """A label per code (equal codes, equal labels) and the number of labels (numpy's sorted
    labelling; pandas' hashing ``factorize`` was dropped with pandas)."""
    uniques, labels = np.unique(codes, return_inverse=True)
    return labels.reshape(-1).astype(np.intp, copy=False), len(uniques)


def _rank_within(labels: Idx) -> npt.NDArray[np.int64]:
    """Per position, how many earlier positions carry the same label."""
    n = len(labels)
    order = np.argsort(labels, kind="stable")
    ordered = labels[order]
    starts = np.flatnonzero(np.concatenate([[True], ordered[1:] != ordered[:-1]]))
    first = np.repeat(starts, np.diff(np.append(starts, n)))
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n, dtype=np.int64) - first
    return rank
