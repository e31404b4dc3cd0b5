"""Figures a results file may not carry (issue 40): a browser run has no Soft-F1, no superset
verdict and no timing. Each is computed from what the outcomes carry and is None (``n/a``,
never 0) when they carry none of it; the Grade then leaves the part out
(:func:`~pytest_heron.scoring.metrics.grade`). Pure functions, no I/O."""

from __future__ import annotations

from collections.abc import Sequence

from pytest_heron.scoring.outcome import Outcome

# the figures, with their labels (what Summary.absent names)
OPTIONAL_FIGURES = (("soft_f1", "Soft-F1"), ("ex_superset", "superset EX"), ("ves", "VES"))


def soft_f1_mean(outcomes: Sequence[Outcome]) -> float | None:
    """Mean Soft-F1 in %: an answer that did not run counts 0; one that ran counts its stored
    value, and is left out when it has none. None (not 0) when no answer that ran carries one
    (a results file without the figure, such as a browser run's).

    >>> soft_f1_mean([Outcome(id="a", soft_f1=0.5), Outcome(id="b")]) is None
    False
    >>> soft_f1_mean([Outcome(id="a"), Outcome(id="b")]) is None
    True
    """
    ran = [o for o in outcomes if o.error_kind is None]
    carried = [o.soft_f1 for o in ran if o.soft_f1 is not None]
    if not outcomes or (ran and not carried):
        return None
    values = [*carried, *(0.0 for o in outcomes if o.error_kind is not None)]
    return round(100.0 * sum(values) / len(values), 4)


def ex_superset(outcomes: Sequence[Outcome]) -> float | None:
    """superset EX in %, over the outcomes that carry a superset verdict; None when none does."""
    verdicts = [o.correct_superset for o in outcomes if o.correct_superset is not None]
    return round(100.0 * sum(verdicts) / len(verdicts), 4) if verdicts else None
