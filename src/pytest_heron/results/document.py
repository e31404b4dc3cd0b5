"""The results document: conditions, metrics, breakdown and every question's outcome.

:class:`Results` is what a run produces and what ``--heron-output`` writes (``to_json``); a
results file made elsewhere is read back with :meth:`Results.from_json`, which checks every field
and names the one that is wrong.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_heron.errors import ResultsFileError
from pytest_heron.outside import read_json
from pytest_heron.records import JSON, RecordReader
from pytest_heron.results.conditions import Conditions
from pytest_heron.results.files import write_atomic
from pytest_heron.scoring import metrics
from pytest_heron.scoring.metrics import Breakdown, Bucket, Summary
from pytest_heron.scoring.outcome import Outcome

RESULTS_VERSION = 1


@dataclass(frozen=True)
class Results:
    """One run's results: what it ran on, its metrics, EX by bucket, and every outcome (sorted
    by question id)."""

    conditions: Conditions
    metrics: Summary
    breakdown: Breakdown
    outcomes: tuple[Outcome, ...]
    version: int = RESULTS_VERSION

    def to_json(self) -> dict[str, JSON]:
        return {
            "version": self.version,
            "conditions": self.conditions.to_json(),
            "metrics": self.metrics.to_json(),
            "breakdown": {
                axis: {name: b.to_json() for name, b in buckets.items()}
                for axis, buckets in self.breakdown.items()
            },
            "questions": [o.to_json() for o in self.outcomes],
        }

    @classmethod
    def from_json(cls, data: Any, where: str = "results") -> Results:
        r = RecordReader(data, where)
        version = r.integer("version")
        if version != RESULTS_VERSION:
            raise ResultsFileError(
                f"{where}: results format {version}, this heron reads {RESULTS_VERSION}"
            )
        questions = r.data.get("questions")
        if not isinstance(questions, list):
            raise r.bad("questions", "a list of outcomes")
        outcomes = tuple(Outcome.from_json(q, f"{where}, question") for q in questions)
        ids = [o.id for o in outcomes]
        if len(set(ids)) != len(ids):
            dup = sorted({i for i in ids if ids.count(i) > 1})
            raise ResultsFileError(f"{where}: question(s) listed twice: {', '.join(dup)}")
        raw_breakdown = r.data.get("breakdown") or {}
        if not isinstance(raw_breakdown, dict) or not all(
            isinstance(v, dict) for v in raw_breakdown.values()
        ):
            raise r.bad("breakdown", "an object of axis to buckets")
        return cls(
            conditions=Conditions.from_json(r.data.get("conditions"), f"{where}, conditions"),
            metrics=Summary.from_json(r.data.get("metrics"), f"{where}, metrics"),
            breakdown={
                str(axis): {
                    str(name): Bucket.from_json(b, f"{where}, breakdown {axis}/{name}")
                    for name, b in buckets.items()
                }
                for axis, buckets in raw_breakdown.items()
            },
            outcomes=tuple(sorted(outcomes, key=lambda o: o.id)),
            version=version,
        )


def results_document(conditions: Conditions, outcomes: Sequence[Outcome]) -> Results:
    """The run's :class:`Results`, with every metric computed from the outcomes."""
    ordered = tuple(sorted(outcomes, key=lambda o: o.id))
    first_seed = conditions.seeds[0]
    return Results(
        conditions=conditions,
        metrics=metrics.summary(
            ordered, first_seed, samples=conditions.samples, price=conditions.price
        ),
        breakdown=metrics.breakdown(ordered, first_seed),
        outcomes=ordered,
    )


def write_results(path: Path, results: Results) -> None:
    write_atomic(path, json.dumps(results.to_json(), indent=2, sort_keys=False) + "\n")


def read_results(path: Path) -> Results:
    """A results file, checked (see :meth:`Results.from_json`)."""
    return Results.from_json(read_json(path), str(path))
