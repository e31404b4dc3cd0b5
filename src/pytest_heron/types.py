"""The data types adapters see: questions in, predictions out."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

SHAPES = ("single", "join", "multi_join", "analytical")
RETRIEVALS = ("named", "one_hop", "two_hop", "lexical_gap")


@dataclass(frozen=True)
class Question:
    """One benchmark question, as loaded from a question file."""

    id: str
    question: str
    gold_sql: str
    gold_tables: tuple[str, ...]
    shape: str
    retrieval: str
    traps: tuple[str, ...] = ()
    empty_probe: bool = False
    source: str = ""

    @property
    def markers(self) -> tuple[str, ...]:
        """Marker names this question carries (besides ``heron``)."""
        return (
            f"shape_{self.shape}",
            f"retrieval_{self.retrieval}",
            *(f"trap_{t}" for t in self.traps),
        )


@dataclass(frozen=True)
class BenchmarkContext:
    """What an adapter may know before answering: the schema and a read-only connection string."""

    dsn: str
    dialect: str
    scale: str
    seed: int
    schema_ddl: str
    tables: tuple[str, ...]
    options: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class Prediction:
    """An adapter's answer to one question."""

    sql: str
    tables_in_context: list[str] | None = None
    usage: dict[str, int] | None = None
    trace: Any = None


@runtime_checkable
class Adapter(Protocol):
    """A text-to-SQL system under test.

    ``generate`` may return a :class:`Prediction`, a SQL string, or a mapping with key ``sql``
    (optionally ``tables`` and ``usage``); raising marks the question as ``adapter_error``.

    With ``--heron-samples N`` (N > 1) the runner asks each question N times. An adapter whose
    ``generate`` accepts a ``sample`` keyword receives the sample index 0..N-1 (an LLM adapter
    keys its cache on it, so each sample is a separate, reproducible call); otherwise
    ``generate(q)`` is simply called again.
    """

    name: str

    def prepare(self, ctx: BenchmarkContext) -> None: ...

    def generate(self, q: Question) -> Any: ...
