"""The data types adapters see: questions in, predictions out."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

SHAPES = ("single", "join", "multi_join", "analytical")
RETRIEVALS = ("named", "one_hop", "two_hop", "lexical_gap")


@dataclass(frozen=True)
class Question:
    """One benchmark question, as a system under test receives it: what it may know and no more.

    ``id`` and ``question`` (the text) identify and pose it; ``dialect`` is the SQL dialect the
    answer is run in; ``shape``, ``retrieval`` and ``traps`` are the question's tags (its pytest
    markers). The gold SQL and the gold tables are the harness's own and are never handed to an
    adapter (nor is the question file's path)."""

    id: str
    question: str
    dialect: str = "postgres"
    shape: str = ""
    retrieval: str = ""
    traps: tuple[str, ...] = ()


DEFAULT_TIMEOUT_S = 120.0  # --heron-timeout: one question, the adapter's whole answer
DEFAULT_STATEMENT_TIMEOUT_S = 30.0  # --heron-statement-timeout: one SQL statement


@dataclass(frozen=True)
class Limits:
    """The time limits of a run, as ``--heron-timeout`` and ``--heron-statement-timeout`` set
    them (the defaults live here and nowhere else)."""

    timeout_s: float = DEFAULT_TIMEOUT_S
    statement_timeout_s: float = DEFAULT_STATEMENT_TIMEOUT_S


@dataclass(frozen=True)
class LLMOptions:
    """What an LLM adapter needs to reach and ask a model (``--heron-endpoint``, ``--heron-model``,
    ``--heron-temperature``, ``--heron-samples``, ``--heron-strategy``, ``--heron-cache``,
    ``--heron-offline``, ``--heron-max-tokens``, ``--heron-agent-mode``), resolved once.
    ``cache_path`` is the response cache file; ``max_tokens`` None sends none."""

    endpoint: str | None = None
    model: str | None = None
    temperature: float = 0.0
    samples: int = 1
    strategy: str = "zero-shot"
    max_tokens: int | None = 2048
    agent_mode: str = "tools"
    cache_path: str | None = None
    offline: bool = False


@dataclass(frozen=True)
class BenchmarkContext:
    """What an adapter may know before answering: the schema, a read-only connection string to
    the first state, the run's time limits and, for LLM adapters, how to reach the model.

    ``dsn`` is a libpq ``key=value`` string (psycopg, libpq); :attr:`dsn_url` is the same
    connection as a ``postgresql://`` URL (SQLAlchemy, after putting the driver in the scheme)
    and :attr:`dsn_parts` its parts as keywords (``psycopg2.connect(**ctx.dsn_parts)``).
    """

    dsn: str
    dialect: str
    scale: str
    seed: int
    schema_ddl: str
    tables: tuple[str, ...]
    limits: Limits = field(default_factory=Limits)
    llm: LLMOptions = field(default_factory=LLMOptions)
    data_version: str = ""
    cli_cmd: str | None = None

    @property
    def dsn_parts(self) -> dict[str, str]:
        """The DSN's parts (``host``, ``port``, ``dbname``, ``user``, ``password`` and any
        other libpq parameter), for drivers that take keywords.

        >>> BenchmarkContext("host=/s port=5432 dbname=d user=u", "postgres", "tiny", 42,
        ...                  "", ()).dsn_parts["host"]
        '/s'
        """
        from pytest_heron.core.conninfo import parts

        return parts(self.dsn)

    @property
    def dsn_url(self) -> str:
        """The DSN as a URL, ``postgresql://user:password@/dbname?host=/socket/dir&port=N``
        for a Unix socket (``@host:port/dbname`` over TCP); for SQLAlchemy, name the driver:
        ``ctx.dsn_url.replace("postgresql://", "postgresql+psycopg2://", 1)``."""
        from pytest_heron.core.conninfo import url

        return url(self.dsn)


@dataclass
class Prediction:
    """An adapter's answer to one question.

    ``tables_in_context`` is the set of tables the system put in its model's context (order
    ignored); ``tables_ranked`` is its table retrieval's ranking, best first, when it has one.
    Set-Recall@k reads the top k of the ranking; a context given only as a set counts at its
    own size (no credit at a k smaller than the set). Without ``tables_in_context`` the
    ranking is taken as the context. Both None (the whole schema in context): Set-Recall n/a.
    """

    sql: str
    tables_in_context: list[str] | None = None
    usage: dict[str, int] | None = None
    trace: Any = None
    tables_ranked: list[str] | None = None


@runtime_checkable
class Adapter(Protocol):
    """A text-to-SQL system under test.

    ``generate`` may return a :class:`Prediction`, a SQL string, or a mapping with key ``sql``
    (optionally ``tables``, ``tables_ranked`` and ``usage``); raising marks the question as
    ``adapter_error``.

    An adapter named by an entry point or ``module:attr`` runs in a process of its own (one per
    pytest process): it is imported, instantiated and prepared there, receives each
    :class:`Question` as plain data, and its answer travels back as JSON (a ``Prediction``'s
    ``trace`` stays behind). ``prepare`` and ``generate`` each have ``--heron-timeout``; past it
    the process is killed and a fresh one is prepared for the next question. Whatever the adapter
    raises, ``SystemExit`` and ``KeyboardInterrupt`` included, or if its process dies, costs that
    question only (``adapter_error``).

    With ``--heron-samples N`` (N > 1) the runner asks each question N times. An adapter whose
    ``generate`` accepts a ``sample`` keyword receives the sample index 0..N-1 (an LLM adapter
    keys its cache on it, so each sample is a separate, reproducible call); otherwise
    ``generate(q)`` is simply called again.

    An adapter whose answers depend on settings the harness does not know by name may say so
    with an optional ``conditions(ctx) -> dict[str, str | int | float | bool | None]``: the
    harness records the dict in the results file's ``conditions.adapter_conditions`` and makes
    it part of what a resumed run must match (the ``raw-llm`` adapter reports its strategy).
    """

    name: str

    def prepare(self, ctx: BenchmarkContext) -> None: ...

    def generate(self, q: Question) -> Any: ...
