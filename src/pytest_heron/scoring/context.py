"""The table-retrieval axis of a run, over what adapters report: Set-Recall of the context,
Set-Recall@k over ranked lists and the context's size (pure functions, no I/O).

An adapter reports the tables it put in its model's context (``tables_in_context``, a set) and
may report its table retrieval's ranking (``tables_ranked``, best first). Set-Recall@k is the
share of a question's gold tables among the top k of the ranking. A context reported only as a
set has no order to cut, so it counts at its own size: a set of s tables is credited with its
recall at every k >= s and with nothing at a k < s (an adapter that reports all 211 tables
earns no Set-Recall@5, @10 or @20). A question whose adapter reported neither (the whole schema
in context, as the full-schema baseline sends) does not count; with no such report at all the
figures are None (n/a), never 0.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence

from pytest_heron.scoring.outcome import Outcome

RUN_KS = (5, 10, 20)
"""The ks of a run's Set-Recall@k (those of ``heron recall`` and of the seed's table)."""


def _share(gold: Sequence[str], found: Iterable[str]) -> float:
    wanted = set(gold)
    return len(wanted & set(found)) / len(wanted)


def context_recall(pairs: Iterable[tuple[Sequence[str], Sequence[str] | None]]) -> float | None:
    """The mean share of gold tables in context over ``(gold tables, tables in context)``
    pairs, in percent; a pair whose context is None (not reported) or whose gold is empty does
    not count.

    >>> context_recall([(["a", "b"], ["a"]), (["c"], None)])
    50.0
    """
    shares = [_share(gold, ctx) for gold, ctx in pairs if ctx is not None and gold]
    return None if not shares else round(100.0 * sum(shares) / len(shares), 4)


def context_of(o: Outcome) -> tuple[str, ...] | None:
    """The tables in an outcome's context: those reported as the context, else the ranking
    (what the adapter reported is what it had), else None.

    >>> context_of(Outcome("q", tables_ranked=("b", "a")))
    ('b', 'a')
    """
    return o.tables_in_context if o.tables_in_context is not None else o.tables_ranked


def set_recall(outcomes: Sequence[Outcome]) -> float | None:
    """Mean share of gold tables among the tables in the adapter's context (see
    :func:`context_of`), over the questions whose adapter reported one; None when none did."""
    return context_recall([(o.gold_tables, context_of(o)) for o in outcomes])


def recall_at_k(
    gold: Sequence[str], ranked: Sequence[str] | None, context: Sequence[str] | None, k: int
) -> float | None:
    """One question's Set-Recall@k in [0, 1]: over the top k of ``ranked`` when there is a
    ranking, else over the unranked ``context`` at its own size (its recall when it has at most
    k distinct tables, 0 when it has more); None when neither was reported or gold is empty.

    >>> recall_at_k(["a", "b"], ["x", "a", "b"], None, 2), recall_at_k(["a"], None, ["a"], 5)
    (0.5, 1.0)
    >>> recall_at_k(["a"], None, [f"t{i}" for i in range(210)] + ["a"], 20)
    0.0
    """
    if not gold:
        return None
    if ranked is not None:
        return _share(gold, ranked[:k])
    if context is None:
        return None
    return _share(gold, context) if len(set(context)) <= k else 0.0


def set_recall_at_k(
    outcomes: Sequence[Outcome], ks: Sequence[int] = RUN_KS
) -> dict[str, float] | None:
    """Set-Recall@k (percent) for each k, keyed by ``str(k)``: the mean of :func:`recall_at_k`
    over the questions that count; None when no question does."""
    out: dict[str, float] = {}
    for k in ks:
        shares = [
            share
            for o in outcomes
            if (share := recall_at_k(o.gold_tables, o.tables_ranked, o.tables_in_context, k))
            is not None
        ]
        if not shares:
            return None
        out[str(k)] = round(100.0 * sum(shares) / len(shares), 4)
    return out


def context_size_median(outcomes: Sequence[Outcome]) -> float | None:
    """The median number of distinct tables in context (see :func:`context_of`) over the
    questions whose adapter reported one; None when none did.

    >>> context_size_median([Outcome("a", tables_in_context=("x", "y")), Outcome("b")])
    2.0
    """
    sizes = [len(set(ctx)) for o in outcomes if (ctx := context_of(o)) is not None]
    return None if not sizes else float(statistics.median(sizes))


def ranked_count(outcomes: Sequence[Outcome]) -> int:
    """How many questions the adapter answered with a ranked list of tables."""
    return sum(o.tables_ranked is not None for o in outcomes)
