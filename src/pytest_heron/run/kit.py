"""The vendor kit: what a vendor's own tests use without running the whole benchmark.

The plugin registers four fixtures on it (documented in ``docs/vendor-kit.md``):

- ``heron_questions``: the question set (``--heron-questions`` or the built-in one) as the
  public :class:`~pytest_heron.core.types.Question` objects an adapter gets, by id;
- ``heron_state``: the first seeded state (``--heron-scale``, ``--heron-seed``), with ``dsn``, a
  connection string of the role an adapter gets (it can read that state and nothing else);
- ``heron_score``: ``score(question, sql)`` scores one SQL text on every state exactly as the
  benchmark does (sandbox, comparator, multi-state) and returns the
  :class:`~pytest_heron.scoring.outcome.Outcome` (``correct``, ``reason``, ``error_kind``,
  ``error``); ``explain(outcome)`` is the failure message the benchmark prints;
- ``heron_kit``: the :class:`Kit` behind them (session scope).

Nothing here is imported until a test asks for one of the fixtures. The states are those of a
benchmark run in the same session when there is one, else built (or reused) on the backend the
``--heron-*`` options name, and the server is stopped at the end of the session.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pytest_heron.core.errors import HeronError
from pytest_heron.core.types import BenchmarkContext, Question
from pytest_heron.database import StateRef
from pytest_heron.dataset import GoldQuestion, load_questions
from pytest_heron.options import Settings
from pytest_heron.scoring import Outcome, score_question

NO_NEEDS: Mapping[str, Any] = {}


@dataclass(frozen=True)
class HeronState:
    """One seeded state as a vendor's test sees it."""

    scale: str
    seed: int
    database: str
    dsn: str  # the adapter role's: SELECT on this state only


class _FixedSql:
    """A system under test that answers one given SQL text (what :meth:`Kit.score` scores)."""

    version: str | None = None
    adapter_name: str | None = None
    task: str | None = None
    isolation = "not-needed"  # no system code runs: the SQL is given
    sandbox: str | None = None
    takes_sample = False
    note: str | None = None
    needs: Mapping[str, Any] = NO_NEEDS

    def __init__(self, sql: str) -> None:
        self.sql = sql

    def conditions(self, ctx: BenchmarkContext) -> dict[str, Any]:
        return {}

    def ready(self, ctx: BenchmarkContext) -> None:
        pass

    def ask(self, q: GoldQuestion, timeout_s: float, sample: int | None) -> Any:
        return {"sql": self.sql}

    def close(self) -> None:
        pass


class Kit:
    """The states, the questions and the scorer of a vendor's tests (see the module docstring).
    ``states`` may be given (a benchmark run's); otherwise :meth:`states` builds them once."""

    def __init__(
        self,
        settings: Settings,
        *,
        states: list[StateRef] | None = None,
        progress: Callable[[str], None] | None = None,
    ) -> None:
        self.settings = settings
        self.gold: dict[str, GoldQuestion] = {
            q.id: q for q in load_questions(settings.questions, key_env=settings.sealed_key_env)
        }
        self._states = list(states or [])
        self._server: Any = None
        self._progress = progress

    @property
    def questions(self) -> dict[str, Question]:
        """The question set as an adapter sees it (no gold SQL, no gold tables), by id."""
        return {qid: q.public() for qid, q in self.gold.items()}

    def states(self) -> list[StateRef]:
        if not self._states:
            from pytest_heron.database import choose, ensure_state, start

            s = self.settings
            self._server = start(choose(s.backend, s.dsn), s.dsn)
            for seed in s.seeds:
                st = ensure_state(
                    self._server,
                    s.scale,
                    seed,
                    progress=self._progress,
                    adapter=not self._states,
                )
                self._states.append(st.ref())
        return self._states

    def state(self) -> HeronState:
        first = self.states()[0]
        assert first.adapter_dsn is not None  # the first state always has the adapter role
        return HeronState(self.settings.scale, first.seed, first.database, first.adapter_dsn)

    def score(self, question: str | Question, sql: str) -> Outcome:
        """Score ``sql`` as the answer to ``question`` (an id or a :class:`Question`) on every
        state, as the benchmark does."""
        qid = question if isinstance(question, str) else question.id
        q = self.gold.get(qid)
        if q is None:
            raise HeronError(f"heron_score: no question {qid!r} in the question set")
        out = score_question(
            _FixedSql(sql),
            q,
            self.states(),
            adapter_timeout=self.settings.timeout,
            statement_timeout=self.settings.statement_timeout,
        )
        return out.withheld() if q.sealed else out

    def explain(self, outcome: Outcome) -> str:
        """The failure message the benchmark prints for ``outcome`` (question, SQL, the
        difference with gold's rows)."""
        from pytest_heron.run.items import failure_message

        return failure_message(self.gold[outcome.id], outcome)

    def close(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None


class Scorer:
    """What the ``heron_score`` fixture gives: call it with ``(question, sql)``."""

    def __init__(self, kit: Kit) -> None:
        self.kit = kit

    def __call__(self, question: str | Question, sql: str) -> Outcome:
        return self.kit.score(question, sql)

    def explain(self, outcome: Outcome) -> str:
        return self.kit.explain(outcome)
