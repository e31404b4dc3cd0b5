"""The results document: conditions, metrics, breakdown and every question's outcome.

:class:`Results` is what a run produces and what ``--heron-output`` writes (``to_json``); a
results file made elsewhere is read back with :meth:`Results.from_json`, which checks every field
and names the one that is wrong.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_heron.core.errors import ResultsFileError
from pytest_heron.core.outside import OutsideFileError, read_json
from pytest_heron.core.records import JSON, RecordReader
from pytest_heron.core.safe_text import printable
from pytest_heron.results.conditions import Conditions
from pytest_heron.results.files import write_atomic
from pytest_heron.scoring import Breakdown, Bucket, Outcome, Summary, summary
from pytest_heron.scoring import breakdown as metrics_breakdown

RESULTS_VERSION = 1
QUESTION_ID = re.compile(r"[a-z0-9_]+")  # dataset.questions.ID_PATTERN (kept light here)
# how far a stated figure may be from the recomputed one and still be the same figure: the
# browser runner rounds tokens per question to one decimal; every other writer is exact
FIGURE_TOLERANCE = 0.051
BROWSER_RUNNER = "browser"  # adapter_conditions["runner"] of a results file the browser page wrote


@dataclass(frozen=True)
class Results:
    """One run's results: what it ran on, its metrics, EX by bucket, and every outcome (sorted
    by question id)."""

    conditions: Conditions
    metrics: Summary
    breakdown: Breakdown
    outcomes: tuple[Outcome, ...]
    version: int = RESULTS_VERSION
    # fields other plugins add through the pytest_heron_results_fields hook (name -> scalar);
    # written as "extra" only when there are any, so a run without such plugins is unchanged
    extra: dict[str, str | int | float | bool | None] = dataclasses.field(default_factory=dict)

    def to_json(self) -> dict[str, JSON]:
        out: dict[str, JSON] = {
            "version": self.version,
            "conditions": self.conditions.to_json(),
            "metrics": self.metrics.to_json(),
            "breakdown": {
                axis: {name: b.to_json() for name, b in buckets.items()}
                for axis, buckets in self.breakdown.items()
            },
            "questions": [o.to_json() for o in self.outcomes],
        }
        if self.extra:
            out["extra"] = dict(sorted(self.extra.items()))
        return out

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
        odd = [i for i in ids if not QUESTION_ID.fullmatch(i)]
        if odd:
            raise ResultsFileError(
                f"{where}: question id {printable(odd[0][:60])!r} does not match [a-z0-9_]+"
            )
        if len(set(ids)) != len(ids):
            dup = sorted({i for i in ids if ids.count(i) > 1})
            raise ResultsFileError(f"{where}: question(s) listed twice: {', '.join(dup)}")
        conditions = Conditions.from_json(r.data.get("conditions"), f"{where}, conditions")
        if conditions.adapter_conditions.get("runner") == BROWSER_RUNNER:
            # the browser page never scores superset EX; its files before issue 40 wrote false for
            # it, which is no verdict: read as not carried (n/a, never 0)
            outcomes = tuple(dataclasses.replace(o, correct_superset=None) for o in outcomes)
        raw_breakdown = r.data.get("breakdown") or {}
        if not isinstance(raw_breakdown, dict) or not all(
            isinstance(v, dict) for v in raw_breakdown.values()
        ):
            raise r.bad("breakdown", "an object of axis to buckets")
        return cls(
            conditions=conditions,
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
            extra=r.scalars("extra"),
        )


def results_document(conditions: Conditions, outcomes: Sequence[Outcome]) -> Results:
    """The run's :class:`Results`, with every metric computed from the outcomes."""
    ordered = tuple(sorted(outcomes, key=lambda o: o.id))
    first_seed = conditions.seeds[0]
    return Results(
        conditions=conditions,
        metrics=summary(
            ordered,
            first_seed,
            samples=conditions.samples,
            price=conditions.price,
            task=conditions.task,
        ),
        # a retrieval run's table by class is Set-Recall@k's (results.terminal), not EX's
        breakdown={} if conditions.task == "retrieval" else metrics_breakdown(ordered, first_seed),
        outcomes=ordered,
    )


def write_results(path: Path, results: Results) -> None:
    write_atomic(path, json.dumps(results.to_json(), indent=2, sort_keys=False) + "\n")


def read_results(path: Path) -> Results:
    """A results file, checked (see :meth:`Results.from_json`), with its figures recomputed
    from its questions (:func:`recomputed`): a file whose stated figures differ is refused."""
    try:
        data = read_json(path)
    except OutsideFileError as exc:
        raise OutsideFileError(f"not a readable results file: {exc}") from None
    return recomputed(Results.from_json(data, str(path)), str(path))


def recomputed(results: Results, where: str = "results") -> Results:
    """``results`` with its metrics and breakdown computed again from its per-question records
    by the code that writes them (:func:`results_document`). A figure the file states (not
    null) that differs from the recomputed one by more than :data:`FIGURE_TOLERANCE` makes it a
    ResultsFileError of one line: stored figures are never trusted, and a file that claims
    other numbers than its own answers give is not a results file of this heron."""
    if not results.conditions.seeds:
        raise ResultsFileError(f"{where}, conditions, field 'seeds': empty; a run has a seed")
    try:
        fresh = results_document(results.conditions, results.outcomes)
    except (ArithmeticError, LookupError, TypeError, ValueError) as exc:  # a hostile price table
        raise ResultsFileError(
            f"{where}: its figures cannot be recomputed ({type(exc).__name__}: "
            f"{printable(str(exc))[:120]})"
        ) from None
    diffs = _differences("metrics", results.metrics.to_json(), fresh.metrics.to_json())
    for axis, buckets in sorted(results.breakdown.items()):
        for name, bucket in sorted(buckets.items()):
            mine = fresh.breakdown.get(axis, {}).get(name)
            if mine is None:
                diffs.append(f"breakdown {axis}/{name}: no question falls in it")
            else:
                diffs += _differences(f"breakdown {axis}/{name}", bucket.to_json(), mine.to_json())
    if diffs:
        more = f" and {len(diffs) - 3} more" if len(diffs) > 3 else ""
        raise ResultsFileError(
            f"{where}: the stated figures differ from what its questions give "
            f"({'; '.join(diffs[:3])}{more}); refused (heron recomputes every figure on read)"
        )
    return Results(
        conditions=results.conditions,
        metrics=fresh.metrics,
        breakdown=fresh.breakdown,
        outcomes=results.outcomes,
        version=results.version,
        extra=results.extra,
    )


def _differences(block: str, stated: dict[str, JSON], fresh: dict[str, JSON]) -> list[str]:
    """Every figure ``stated`` gives (not null) that ``fresh`` does not match."""
    out = []
    for name, value in stated.items():
        if value is not None and not _same(value, fresh.get(name)):
            shown = printable(repr(value))[:40]
            out.append(f"{block}, {name}: stated {shown}, recomputed {fresh.get(name)!r}")
    return out


def _same(a: JSON, b: JSON) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return sorted(a) == sorted(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=FIGURE_TOLERANCE)
    return bool(a == b)
