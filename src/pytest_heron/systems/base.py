"""What adapters built on the LLM client share: a metered ``generate``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_heron.systems.llm.client import Meter, attach_usage
from pytest_heron.types import Prediction, Question

if TYPE_CHECKING:
    from pytest_heron.types import BenchmarkContext


def time_limits(ctx: BenchmarkContext) -> tuple[float, float]:
    """The per-question time limit (``--heron-timeout``, 120 s when absent) and the per-statement
    limit (``--heron-statement-timeout``, 30 s when absent) from ``ctx.options``."""
    timeout = ctx.options.get("timeout")
    statement = ctx.options.get("statement_timeout")
    return (
        float(timeout) if timeout is not None else 120.0,
        float(statement) if statement is not None else 30.0,
    )


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
