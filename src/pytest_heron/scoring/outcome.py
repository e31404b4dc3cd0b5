"""The record of one question scored: :class:`Outcome` (and :class:`Sample` for EX@k).

An outcome is produced by :func:`pytest_heron.scoring.score.score_question`, travels from an
xdist worker to the controller as ``to_json()`` (plain JSON types only), is appended to the
journal, counted by :mod:`pytest_heron.scoring.metrics` and written as one entry of the results
file's ``questions``. Every consumer reads the fields, never string keys, so the field list below
*is* the results file's question schema.

:meth:`Outcome.from_json` is also the reader of outcomes that come from elsewhere (a journal to
resume, a results file to compare or verify): it checks every field's type and says which field
of which question is wrong, so ``"correct": "no"`` is an error, not a correct answer.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_heron.core.errors import ErrorKind, ResultsFileError
from pytest_heron.core.records import JSON, RecordReader
from pytest_heron.dataset import GoldQuestion

WITHHELD = "details withheld: sealed question"


@dataclass(frozen=True)
class Sample:
    """One of several answers to a question (``--heron-samples N``), for EX@k."""

    sample: int
    correct: bool
    error_kind: ErrorKind | None
    pred_sql: str | None

    def to_json(self) -> dict[str, JSON]:
        return {
            "sample": self.sample,
            "correct": self.correct,
            "error_kind": None if self.error_kind is None else str(self.error_kind),
            "pred_sql": self.pred_sql,
        }

    @classmethod
    def from_json(cls, data: Any, where: str = "sample") -> Sample:
        r = RecordReader(data, where)
        return cls(
            sample=r.integer("sample"),
            correct=r.flag("correct"),
            error_kind=r.kind("error_kind"),
            pred_sql=r.opt_text("pred_sql"),
        )


@dataclass(frozen=True)
class Outcome:
    """One question, answered and scored on every state.

    The fields are in the order of the results file. ``correct`` is multi-state EX (right on every
    state); ``correct_by_state`` maps each seed (as a string) to the verdict on that state;
    ``error_kind`` is None for an answer that ran (right or wrong) and otherwise says why it did
    not; ``reason`` is the comparator's counterexample for a wrong answer. With several samples,
    the outcome's own fields describe sample 0 and ``samples`` lists them all.
    ``correct_set`` and ``correct_set_by_state`` are the same verdicts with rows compared as sets
    (duplicates and order ignored, as BIRD counts); None in results written before they existed.
    ``tables_ranked`` is the adapter's ranking of tables, best first (None when it gave none).
    """

    id: str
    correct: bool = False
    correct_by_state: dict[str, bool] = field(default_factory=dict)
    error_kind: ErrorKind | None = None
    error: str | None = None
    pred_sql: str | None = None
    tables_in_context: tuple[str, ...] | None = None
    usage: dict[str, int | float] | None = None
    latency_s: float | None = None
    ves: float | None = None
    soft_f1: float | None = None
    reason: str | None = None
    shape: str = ""
    retrieval: str = ""
    traps: tuple[str, ...] = ()
    gold_tables: tuple[str, ...] = ()
    exact_match: bool = False
    correct_superset: bool | None = False  # None: not scored (a browser run's records)
    samples: tuple[Sample, ...] | None = None
    correct_set: bool | None = None
    correct_set_by_state: dict[str, bool] | None = None
    tables_ranked: tuple[str, ...] | None = None

    @classmethod
    def blank(cls, q: GoldQuestion, **values: Any) -> Outcome:
        """An outcome of ``q`` that is not (yet) right, with the question's tags filled in."""
        return cls(
            id=q.id,
            shape=q.shape,
            retrieval=q.retrieval,
            traps=tuple(q.traps),
            gold_tables=tuple(q.gold_tables),
            **values,
        )

    def failed(self, kind: ErrorKind, message: str, **values: Any) -> Outcome:
        """This outcome, marked as not right for ``kind`` with ``message`` (not right as a set
        either: SQL that did not run returned no rows to compare)."""
        values.setdefault("correct_set", False)
        values.setdefault("correct_set_by_state", dict(self.correct_set_by_state or {}))
        return dataclasses.replace(self, correct=False, error_kind=kind, error=message, **values)

    def withheld(self) -> Outcome:
        """This outcome as a sealed question may show it (docs/sealed.md): the verdicts, error
        kinds, usage, timings and scores stay; every text that could carry the question, its
        gold SQL, its gold rows or the system's reading of them (the predicted SQL, the error
        and comparator texts, the tables in context, the gold tables) is dropped."""
        note = None if self.error_kind is None else f"{self.error_kind} ({WITHHELD})"
        return dataclasses.replace(
            self,
            error=note,
            pred_sql=None,
            tables_in_context=None,
            reason=None if self.reason is None else WITHHELD,
            gold_tables=(),
            samples=None
            if self.samples is None
            else tuple(dataclasses.replace(s, pred_sql=None) for s in self.samples),
        )

    def to_json(self) -> dict[str, JSON]:
        out: dict[str, JSON] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "samples":
                value = None if value is None else [s.to_json() for s in value]
            elif f.name == "error_kind":
                value = None if value is None else str(value)
            elif isinstance(value, tuple):
                value = list(value)
            elif isinstance(value, dict):
                value = dict(value)
            out[f.name] = value
        return out

    @classmethod
    def from_json(cls, data: Any, where: str = "outcome") -> Outcome:
        """Read an outcome back, checking every field (see the module docstring). Unknown keys
        are an error too: a record is either ours or not."""
        if isinstance(data, Mapping) and isinstance(data.get("id"), str):
            where = f"{where} {data['id']!r}"
        r = RecordReader(data, where)
        unknown = sorted(str(k) for k in r.data if k not in FIELDS)
        if unknown:
            raise ResultsFileError(f"{where}: unknown field(s) {', '.join(unknown)}")
        samples = r.data.get("samples")
        if samples is not None and not isinstance(samples, list):
            raise ResultsFileError(f"{where}, field 'samples': expected a list or null")
        return cls(
            id=r.text("id"),
            correct=r.flag("correct"),
            correct_by_state=r.verdicts("correct_by_state"),
            error_kind=r.kind("error_kind"),
            error=r.opt_text("error"),
            pred_sql=r.opt_text("pred_sql"),
            tables_in_context=r.opt_texts("tables_in_context"),
            usage=r.counters("usage"),
            latency_s=r.opt_number("latency_s"),
            ves=r.opt_number("ves"),
            soft_f1=r.opt_number("soft_f1", high=1.0),
            reason=r.opt_text("reason"),
            shape=r.text("shape", default=""),
            retrieval=r.text("retrieval", default=""),
            traps=r.texts("traps"),
            gold_tables=r.texts("gold_tables"),
            exact_match=r.flag("exact_match", default=False),
            correct_superset=None
            if "correct_superset" in r.data and r.data["correct_superset"] is None
            else r.flag("correct_superset", default=False),
            samples=None
            if samples is None
            else tuple(Sample.from_json(s, f"{where}, sample {i}") for i, s in enumerate(samples)),
            correct_set=None if r.data.get("correct_set") is None else r.flag("correct_set"),
            correct_set_by_state=None
            if r.data.get("correct_set_by_state") is None
            else r.verdicts("correct_set_by_state"),
            tables_ranked=r.opt_texts("tables_ranked"),
        )


FIELDS = tuple(f.name for f in dataclasses.fields(Outcome))
