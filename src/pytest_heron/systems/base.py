"""What adapters built on the LLM client share: a metered ``generate``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_heron.core.types import Prediction, Question
from pytest_heron.systems.llm.client import Meter, attach_usage

if TYPE_CHECKING:
    from pytest_heron.core.types import BenchmarkContext


def time_limits(ctx: BenchmarkContext) -> tuple[float, float]:
    """``(ctx.limits.timeout_s, ctx.limits.statement_timeout_s)``: kept for adapters written
    against the first public API; new code reads ``ctx.limits`` directly."""
    return ctx.limits.timeout_s, ctx.limits.statement_timeout_s


class MeteredAdapter:
    """Base for adapters built on this client: :meth:`generate` hands :meth:`answer` a fresh
    :class:`Meter` for the question and, when the answer fails, attaches what was billed to the
    exception (see :func:`attach_usage`). Subclasses implement ``prepare`` and ``answer``."""

    def generate(self, q: Question, sample: int = 0) -> Prediction:
        meter = Meter()
        try:
            return self.answer(q, sample, meter)
        except Exception as exc:
            attach_usage(exc, meter)  # billed tokens of a failed question are not lost
            raise

    def answer(self, q: Question, sample: int, meter: Meter) -> Prediction:
        raise NotImplementedError
