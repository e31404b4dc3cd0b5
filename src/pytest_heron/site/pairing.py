"""Two runs side by side, question by question: pure.

A and B are paired on the questions both answered; a question counts for A when A is right on
every state and B is not, and the reverse for B. McNemar's exact test is on those discordant
pairs (:func:`~pytest_heron.scoring.metrics.mcnemar_exact`). Per-bucket EX is recomputed on the
common questions with the same buckets as a run's breakdown.
"""

from __future__ import annotations

from dataclasses import dataclass

from pytest_heron.results import Results
from pytest_heron.scoring import breakdown as metrics_breakdown
from pytest_heron.scoring import ex_multistate, mcnemar_exact


@dataclass(frozen=True)
class Delta:
    axis: str
    bucket: str
    n: int
    a: float | None
    b: float | None

    @property
    def delta(self) -> float | None:
        return None if self.a is None or self.b is None else round(self.b - self.a, 4)


@dataclass(frozen=True)
class Pairing:
    common: tuple[str, ...]
    a_only: tuple[str, ...]  # A right, B wrong
    b_only: tuple[str, ...]  # B right, A wrong
    both_right: int
    both_wrong: int
    p: float
    ex_a: float | None
    ex_b: float | None
    deltas: tuple[Delta, ...]


def pair(a: Results, b: Results) -> Pairing:
    """The pairing of ``a`` and ``b`` (see the module docstring).

    >>> from pytest_heron.results.conditions import Conditions
    >>> from pytest_heron.results.document import results_document
    >>> from pytest_heron.scoring.outcome import Outcome
    >>> c = Conditions(adapter="x", seeds=(42,))
    >>> ra = results_document(c, [Outcome("q1", True, {"42": True}), Outcome("q2", False)])
    >>> rb = results_document(c, [Outcome("q1", False, {"42": False}), Outcome("q2", False)])
    >>> p = pair(ra, rb)
    >>> p.a_only, p.b_only, p.both_wrong, p.p
    (('q1',), (), 1, 1.0)
    """
    ra = {o.id: o for o in a.outcomes}
    rb = {o.id: o for o in b.outcomes}
    common = tuple(sorted(set(ra) & set(rb)))
    a_only = tuple(q for q in common if ra[q].correct and not rb[q].correct)
    b_only = tuple(q for q in common if rb[q].correct and not ra[q].correct)
    both_right = sum(ra[q].correct and rb[q].correct for q in common)
    first_a = a.conditions.seeds[0] if a.conditions.seeds else 0
    first_b = b.conditions.seeds[0] if b.conditions.seeds else 0
    sub_a = [ra[q] for q in common]
    sub_b = [rb[q] for q in common]
    bd_a = metrics_breakdown(sub_a, first_a)
    bd_b = metrics_breakdown(sub_b, first_b)
    deltas = []
    for axis, buckets in bd_a.items():
        for name, bucket in buckets.items():
            other = bd_b.get(axis, {}).get(name)
            deltas.append(
                Delta(
                    axis,
                    name,
                    bucket.n,
                    bucket.ex_multistate,
                    None if other is None else other.ex_multistate,
                )
            )
    return Pairing(
        common=common,
        a_only=a_only,
        b_only=b_only,
        both_right=both_right,
        both_wrong=len(common) - len(a_only) - len(b_only) - both_right,
        p=mcnemar_exact(len(a_only), len(b_only)),
        ex_a=ex_multistate(sub_a),
        ex_b=ex_multistate(sub_b),
        deltas=tuple(deltas),
    )


def condition_warnings(a: Results, b: Results) -> list[str]:
    """What differs between the two runs' conditions that makes the pairing less meaningful."""
    out = []
    ca, cb = a.conditions, b.conditions
    for label, va, vb in (
        ("scale", ca.scale, cb.scale),
        ("seeds", ca.seeds, cb.seeds),
        ("data version", ca.data_version, cb.data_version),
        ("question digest", ca.questions_digest, cb.questions_digest),
    ):
        if va != vb:
            out.append(f"the runs differ in {label} ({va} vs {vb}).")
    return out
