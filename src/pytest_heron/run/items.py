"""The benchmark's pytest nodes: one collector, one item per question, and the failure text."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from pytest_heron.core.errors import ErrorKind
from pytest_heron.core.safe_text import printable

if TYPE_CHECKING:
    from pytest_heron.dataset import GoldQuestion
    from pytest_heron.run.controller import HeronRun
    from pytest_heron.scoring import Outcome


class QuestionFailed(Exception):
    """A wrong or failed answer; its message is the whole failure report."""


class HeronCollector(pytest.Collector):
    """The benchmark's questions, collected as one node named ``heron``."""

    def __init__(self, *, run: HeronRun, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.run = run

    def collect(self) -> list[pytest.Item]:
        return [
            HeronItem.from_parent(self, name=q.id, question=q, run=self.run)
            for q in self.run.questions.values()
        ]


class HeronItem(pytest.Item):
    def __init__(self, *, question: GoldQuestion, run: HeronRun, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.question = question
        self.run = run
        self.outcome: Outcome | None = None
        self.add_marker("heron")
        for marker in question.markers:
            self.add_marker(marker)

    def runtest(self) -> None:
        if self.question.sealed:
            try:  # nothing of a sealed question reaches a traceback: the cause is withheld
                self.outcome = self.run.answer(self.question).withheld()
            except Exception as exc:
                raise QuestionFailed(
                    f"{self.question.id}: {ErrorKind.INFRA_CRASH}: {type(exc).__name__} "
                    "(details withheld: sealed question)"
                ) from None
        else:
            self.outcome = self.run.answer(self.question)
        if self.outcome.correct:
            return
        if self.run.task == "retrieval" and self.outcome.error_kind is None:
            return  # a retrieval run has no EX: the adapter reported tables, scored after the run
        message = failure_message(self.question, self.outcome)
        if self.run.settings.gated and self.outcome.error_kind is not ErrorKind.INFRA_CRASH:
            pytest.xfail(message)  # with a gate, the gate decides the exit status
        raise QuestionFailed(message)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, QuestionFailed):
            return str(excinfo.value)
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[Any, int | None, str]:
        return self.path, None, f"heron question {self.question.id} ({self.question.source})"


def failure_message(q: GoldQuestion, out: Outcome) -> str:
    """The whole failure report: the question, the predicted SQL, the error, the difference.
    What the system under test wrote is shown with its control characters escaped."""
    if q.sealed:  # its English and anything derived from its gold stay in the harness
        out = out.withheld()
    lines = [f"{q.id}: {'(a sealed question)' if q.sealed else q.question}"]
    if out.pred_sql:
        lines.append("predicted SQL:")
        lines.extend("    " + line for line in printable(out.pred_sql).splitlines())
    if out.error_kind:
        lines.append(f"{out.error_kind}: {printable(out.error or '')}")
    if out.reason:
        lines.append("result differs from gold:")
        lines.extend("    " + line for line in printable(out.reason).splitlines())
    return "\n".join(lines)
