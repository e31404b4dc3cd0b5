"""Result-set comparison used to score predicted SQL against gold SQL.

The policy is "strict on data, lenient on shape":

* rows form a multiset (duplicates count) and are compared without regard to order, unless the
  caller passes the sort keys of the gold query (see :func:`order_keys`) or its tie groups (see
  :func:`order_plan`: keys that are not output columns cut gold's rows into groups through
  hidden columns);
* predicted columns are matched to gold columns by their content, never by name, so a prediction
  may list the columns in another order (and, with ``superset=True``, may carry extra columns);
* values are compared strictly except for numbers, which compare by value across ``int``,
  ``float`` and ``Decimal``: two integers (ints, Decimals without a fractional part) exactly,
  anything involving a float or a fractional Decimal within a relative tolerance of ``1e-6``
  (see :data:`REL_TOL`), and a float or fractional Decimal against an integer only when it also
  rounds to that integer (so a float cast cannot bring a wrong integer total into tolerance).

Everything here is pure computation: no database access and no file access.

How the comparison works
------------------------
Each value gets a *canonical key* (:mod:`~pytest_heron.compare.values`): a hashable stand-in such
that values that compare equal get equal keys; floats and fractional Decimals go through a
binary grid never coarser than the tolerance.  Whole columns are keyed at once with numpy
(:mod:`~pytest_heron.compare.columns`), each key also gets a 64-bit code, and a row multiset is
compared by sorting row codes and then checking, column by column, that the rows they pair up
have equal keys: no per-cell Python work in the common case.  Two numbers within tolerance on
either side of a grid boundary get different keys; rows left over after the exact pass are
therefore re-paired with the real tolerance (within groups of rows whose non-numeric parts agree:
a sorted merge-like pass, then a bounded bipartite matching; :mod:`~pytest_heron.compare.rows`).
Columns are paired by content signatures, searching only among columns whose signatures tie
(:mod:`~pytest_heron.compare.matcher`).

Limits (only reachable by pathological inputs): at most 120 mappings are verified (fewer for big
results); on results above 10,000 cells only the 3 best-ranked mappings get the tolerant re-pairing;
it is skipped when more than 200,000 rows are left over, and its bipartite stage stops after
250,000 row comparisons.  Hitting a limit can only turn "equal" into "unequal", never the reverse.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pytest_heron.compare.columns import Table, table
from pytest_heron.compare.matcher import Matcher
from pytest_heron.compare.messages import cap, fmt_row
from pytest_heron.compare.order import (
    OrderItem,
    OrderPlan,
    hidden_order_sql,
    order_keys,
    order_plan,
    tie_groups,
)
from pytest_heron.compare.values import REL_TOL, value_key
from pytest_heron.compare.values import canon as _canon  # noqa: F401  (tests use it)

__all__ = [
    "REL_TOL",
    "Comparison",
    "OrderItem",
    "OrderPlan",
    "compare",
    "fmt_row",
    "hidden_order_sql",
    "order_keys",
    "order_plan",
    "tie_groups",
    "value_key",
]


@dataclass(frozen=True)
class Comparison:
    """Outcome of :func:`compare`.

    ``reason`` is ``""`` when ``equal``; otherwise a short, human-readable counterexample.  Row
    and column numbers in reasons are 1-based.
    """

    equal: bool
    reason: str
    gold_rows: int
    pred_rows: int


def compare(
    gold: Sequence[Sequence[object]],
    pred: Sequence[Sequence[object]],
    *,
    order: tuple[int, ...] | None = None,
    superset: bool = False,
    ties: Sequence[int] | None = None,
) -> Comparison:
    """Compare a predicted result set with the gold one.

    ``gold`` and ``pred`` are rows as psycopg returns them.  Rules:

    * Rows form a multiset: duplicates must match in multiplicity.
    * ``order is None``: row order is ignored.  ``order`` = indices of gold columns: gold is cut
      into consecutive runs of rows with equal values in those columns, and the prediction must
      consist of the same runs in the same sequence, each run equal as a multiset.
      ``order == ()`` (or invalid indices): exact row sequence.
    * ``ties``: per gold row, the number of its tie group (:func:`tie_groups`: consecutive rows
      equal on every ORDER BY key, output column or not): gold is cut into those groups instead
      of into runs of ``order``, which then only names the sort keys that are output columns
      (for messages; ``()`` when none is).  Tie numbers that do not fit (not one per gold row,
      not starting at 0 and rising by 0 or 1) fall back to the exact row sequence.
    * Columns are matched by content.  The column count must be equal, unless ``superset`` is set,
      in which case the prediction may have extra columns (each gold column still needs its own
      predicted column).  A mapping is always verified on whole rows.
    * Numbers (int, float, Decimal, but not bool) compare by value.  Two integers (ints and
      Decimals without a fractional part) must be equal; otherwise they are equal when
      ``|a - b| <= 1e-6 * max(1, |a|, |b|)`` and, if one of them is an integer, the other (as
      its nearest float) rounds to it, half to even (beyond 2**53: is the float nearest to it).
      NaN equals NaN, -0.0 equals 0.0, infinities equal by sign.  NULL only equals NULL.
      Strings and bytes are exact.  Aware datetimes compare as instants; naive ones only equal
      naive ones; a date only equals a date.  Lists (and tuples) compare elementwise and dicts
      key by key with the same rules.  Other mixes are unequal.
    * Two empty results are equal, whatever their column counts (an empty result carries no
      columns to compare, and psycopg gives no rows to count them from).  An empty result never
      equals a non-empty one.

    Never raises: anything unexpected yields an unequal :class:`Comparison` with a reason.
    """
    n_gold = _safe_len(gold)
    n_pred = _safe_len(pred)
    try:
        gold_rows = table(gold)
        pred_rows = table(pred)
        n_gold = len(gold_rows) if gold_rows is not None else n_gold
        n_pred = len(pred_rows) if pred_rows is not None else n_pred
        reason = _compare_rows(gold_rows, pred_rows, order, superset, ties)
    except Exception as exc:  # the scorer must keep going whatever the input is
        reason = cap(f"results could not be compared ({type(exc).__name__}: {exc})")
    return Comparison(equal=not reason, reason=reason, gold_rows=n_gold, pred_rows=n_pred)


def _safe_len(rows: object) -> int:
    try:
        return len(rows)  # type: ignore[arg-type]
    except Exception:
        return 0


def _normalise_order(order: object, width: int) -> tuple[int, ...] | None:
    if order is None:
        return None
    if not isinstance(order, Iterable):
        return ()
    keys = tuple(order)
    for k in keys:
        if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k < width:
            return ()
    return keys


def _normalise_ties(ties: object, n: int) -> list[int] | None:
    """The tie numbers as a list when they are one per row, from 0, rising by 0 or 1."""
    if not isinstance(ties, Sequence) or len(ties) != n:
        return None
    out: list[int] = []
    previous = 0
    for k, t in enumerate(ties):
        if isinstance(t, bool) or not isinstance(t, int):
            return None
        if (k == 0 and t != 0) or (k > 0 and t - previous not in (0, 1)):
            return None
        out.append(t)
        previous = t
    return out


def _compare_rows(
    gold: Table | None,
    pred: Table | None,
    order: tuple[int, ...] | None,
    superset: bool,
    ties: Sequence[int] | None = None,
) -> str:
    if gold is not None and pred is not None and len(gold) == 0 and len(pred) == 0:
        return ""
    if gold is None:
        return "gold rows do not all have the same number of columns"
    if pred is None:
        return "predicted rows do not all have the same number of columns"
    n_gold, n_pred = len(gold), len(pred)
    g_width, p_width = gold.width, pred.width
    if n_gold == 0:
        return (
            f"row counts differ: gold 0, predicted {n_pred}; "
            f"first extra row (predicted, not in gold): {fmt_row(pred[0])}"
        )
    if n_pred == 0:
        return (
            f"row counts differ: gold {n_gold}, predicted 0; "
            f"first missing row (in gold, not predicted): {fmt_row(gold[0])}"
        )
    if p_width < g_width or (p_width != g_width and not superset):
        text = f"column count differs: gold {g_width}, predicted {p_width}"
        if n_gold != n_pred:
            text += f" (row counts differ too: gold {n_gold}, predicted {n_pred})"
        return text
    keys = _normalise_order(order, g_width)
    if ties is None:
        return Matcher(gold, pred, keys).run()
    groups = _normalise_ties(ties, n_gold)
    if groups is None:
        return Matcher(gold, pred, ()).run()
    return Matcher(gold, pred, keys or (), groups).run()


from typing import TYPE_CHECKING  # noqa: E402

from pytest_heron.core.door import opener  # noqa: E402

# The door: what other stages may import from this one, each name loaded on first use
# (tests/test_layers.py holds every other stage to these names).
if TYPE_CHECKING:
    from pytest_heron.compare.modes import set_equal as set_equal
    from pytest_heron.compare.modes import soft_f1 as soft_f1

_DOOR = {
    "set_equal": "modes",
    "soft_f1": "modes",
}
__getattr__ = opener(globals(), _DOOR)
