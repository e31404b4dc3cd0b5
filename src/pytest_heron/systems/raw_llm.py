"""The ``raw-llm`` adapter: the whole schema in the prompt.

It reaches the model through :mod:`pytest_heron.llm` (retries, cache, offline replay, billed
usage) and reports ``usage`` (billed tokens, calls, cached calls) for the question.

It puts the whole DDL, comments included, in the system prompt; ``--heron-strategy``
chooses ``zero-shot``, ``few-shot`` (worked examples on this schema, none of them a benchmark
question), ``self-correct`` (the answer is run in the sandbox on the first state's read-only
connection; on an error the model is shown the database's message and asked again, at most
:data:`MAX_CORRECTIONS` times) or ``few-shot+self-correct``. It reports no
``tables_in_context``: it sends the whole schema, and DESIGN makes Set-Recall n/a for such
adapters (a 100% recall would flatter them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pytest_heron import sandbox
from pytest_heron.core.errors import AdapterError, ErrorKind
from pytest_heron.core.types import (
    DEFAULT_STATEMENT_TIMEOUT_S,
    BenchmarkContext,
    Prediction,
    Question,
)
from pytest_heron.systems.base import MeteredAdapter
from pytest_heron.systems.llm.client import (
    ChatClient,
    Meter,
    client_for,
    deadline_after,
    extract_sql,
)

MAX_CORRECTIONS = 2

STRATEGIES = ("zero-shot", "few-shot", "self-correct", "few-shot+self-correct")  # --heron-strategy


@dataclass(frozen=True)
class Example:
    """A worked example for few-shot prompting: a question on this schema and its SQL."""

    question: str
    sql: str


# Written for this schema and run against a seeded state by tests/test_llm_adapters.py, which
# also checks that no example's question or SQL is a benchmark question's. They show the
# schema's conventions (tenant filter, soft delete, minor units) on tables few questions use.
FEW_SHOT: tuple[Example, ...] = (
    Example(
        "How many active warehouses does tenant 3 run in each country?",
        "SELECT country_code, count(*) AS warehouses\n"
        "FROM inventory.warehouses\n"
        "WHERE tenant_id = 3 AND is_active\n"
        "GROUP BY country_code\n"
        "ORDER BY country_code",
    ),
    Example(
        "List the five most used support macros of tenant 1 that have not been deleted, "
        "with how often each was used.",
        "SELECT id, title, usage_count\n"
        "FROM support.macros\n"
        "WHERE tenant_id = 1 AND deleted_at IS NULL\n"
        "ORDER BY usage_count DESC, id\n"
        "LIMIT 5",
    ),
    Example(
        "For tenant 2, how many unfinished CRM tasks (open or in progress) is each staff "
        "member assigned? Show their e-mail address.",
        "SELECT u.email, count(*) AS open_tasks\n"
        "FROM crm.tasks AS t\n"
        "JOIN core.users AS u ON u.id = t.assigned_to_user_id AND u.tenant_id = t.tenant_id\n"
        "WHERE t.tenant_id = 2 AND t.status IN ('open', 'in_progress')\n"
        "GROUP BY u.email\n"
        "ORDER BY open_tasks DESC, u.email",
    ),
    Example(
        "What is the total of the issued or applied credit notes of tenant 4 in each currency, "
        "in major units of that currency?",
        "SELECT cn.currency_code,\n"
        "       sum(cn.amount_minor) / 10 ^ c.minor_units AS total\n"
        "FROM billing.credit_notes AS cn\n"
        "JOIN core.currencies AS c ON c.code = cn.currency_code\n"
        "WHERE cn.tenant_id = 4 AND cn.status IN ('issued', 'applied')\n"
        "GROUP BY cn.currency_code, c.minor_units\n"
        "ORDER BY cn.currency_code",
    ),
)

RULES = (
    "Answer with exactly one read-only PostgreSQL query (SELECT or WITH) in a single ```sql "
    "block. Use schema-qualified table names. Follow the schema's comments: they say how to "
    "filter tenants, soft-deleted rows, currencies and time zones. Return only the columns the "
    "question asks for."
)

RAW_SYSTEM = (
    "You are an expert PostgreSQL 16 analyst. You write SQL for a multi-tenant B2B commerce "
    "platform whose database schema (DDL with comments) is below.\n\n{rules}\n\n"
    "-- Database schema --\n{ddl}"
)

CORRECTION = (
    "Running that query on the database failed ({kind}): {error}\n"
    "Fix the query. Reply with the corrected SQL in one ```sql block."
)
NO_SQL = "Your answer contains no SQL query. Reply with the SQL in one ```sql block."


class RawLLMAdapter(MeteredAdapter):
    """The whole schema in the system prompt; zero-shot, few-shot and/or self-correcting."""

    name = "raw-llm"
    version = "1"

    def __init__(self) -> None:
        self.client: ChatClient | None = None
        self.strategy = "zero-shot"
        self.system = ""
        self.tables: list[str] = []
        self.dsn = ""
        self.time_limit: float | None = None
        self.statement_timeout = DEFAULT_STATEMENT_TIMEOUT_S

    def prepare(self, ctx: BenchmarkContext) -> None:
        strategy = ctx.llm.strategy
        if strategy not in STRATEGIES:
            raise AdapterError(f"--heron-strategy: unknown strategy {strategy!r}")
        self.strategy = strategy
        self.client = client_for(ctx, self.name, self.version)
        self.system = RAW_SYSTEM.format(rules=RULES, ddl=ctx.schema_ddl.strip())
        self.tables = sorted(ctx.tables)
        self.dsn = ctx.dsn
        self.time_limit, self.statement_timeout = (
            ctx.limits.timeout_s,
            ctx.limits.statement_timeout_s,
        )

    def conditions(self, ctx: BenchmarkContext) -> dict[str, str]:
        """What this adapter adds to the run's conditions: the prompting strategy."""
        return {"strategy": ctx.llm.strategy}

    @property
    def few_shot(self) -> bool:
        return self.strategy.startswith("few-shot")

    @property
    def self_correct(self) -> bool:
        return self.strategy.endswith("self-correct")

    def messages(self, question: str) -> list[dict[str, Any]]:
        """The first request's messages for ``question`` under this adapter's strategy."""
        out: list[dict[str, Any]] = [{"role": "system", "content": self.system}]
        if self.few_shot:
            for ex in FEW_SHOT:
                out.append({"role": "user", "content": ex.question})
                out.append({"role": "assistant", "content": f"```sql\n{ex.sql}\n```"})
        out.append({"role": "user", "content": question})
        return out

    def answer(self, q: Question, sample: int, meter: Meter) -> Prediction:
        if self.client is None:
            raise AdapterError("the raw-llm adapter was not prepared")
        deadline = deadline_after(self.time_limit)
        messages = self.messages(q.question)
        trace: list[dict[str, Any]] = []

        def ask() -> str:
            assert self.client is not None
            reply = self.client.chat(
                messages, question_id=q.id, sample=sample, meter=meter, deadline=deadline
            )
            messages.append(reply.message())
            return extract_sql(reply.content)

        sql = ask()
        for _ in range(MAX_CORRECTIONS if self.self_correct else 0):
            if not sql:
                feedback = NO_SQL
            else:
                result = sandbox.execute(self.dsn, sql, timeout_s=self.statement_timeout)
                if result.ok or result.error_kind == ErrorKind.RESULT_TOO_LARGE:
                    break
                feedback = CORRECTION.format(kind=result.error_kind, error=result.error)
            trace.append({"sql": sql, "feedback": feedback})
            messages.append({"role": "user", "content": feedback})
            sql = ask()
        if not sql:
            raise AdapterError(f"the model's answer contains no SQL (after {meter.calls} calls)")
        return Prediction(
            sql=sql,
            tables_in_context=None,  # the whole schema: Set-Recall does not apply
            usage=meter.usage(),
            trace={"strategy": self.strategy, "corrections": trace},
        )


# -- agent ------------------------------------------------------------------------------------
