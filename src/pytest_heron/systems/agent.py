"""The ``agent`` adapter: a loop that explores the database with read-only queries.

It reaches the model through :mod:`pytest_heron.llm` (retries, cache, offline replay, billed
usage) and reports ``usage`` for the question. It sees the schemas' descriptions and the table
names with their one-line comments, and two actions: ``run_sql_query(sql)`` (runs in the sandbox;
returns the row count, column names and the first :data:`PREVIEW_ROWS` rows, or the error) and
``results_ok()``, which submits. The answer is the **last query that ran successfully** before
``results_ok`` was called. The loop makes at most :data:`MAX_AGENT_CALLS` LLM calls and stops at
the question's deadline (:class:`~pytest_heron.core.errors.OutOfTime`, ``adapter_timeout``).

``--heron-agent-mode`` picks how the model acts (recorded as ``agent_mode`` in the conditions):

- ``tools`` (default): OpenAI tool calls, sent with ``tool_choice: "auto"``. An endpoint that
  rejects a request with tools (HTTP 400/404/422), or a model that twice in a row answers in text
  without ever calling a tool, is reported as :class:`~pytest_heron.llm.ToolsUnsupported`.
- ``grammar``: no tools; every reply is one JSON object ``{"action": "run_sql_query" |
  "results_ok", "sql": "..."}``, constrained by ``response_format`` ``json_schema``
  (:data:`STEP_SCHEMA`; llama.cpp-style servers enforce it as a grammar), and each result comes
  back as a user message. An endpoint that refuses that form (llama-cpp-python 0.3 does) gets
  the older ``{"type": "json_object", "schema": ...}`` from then on. For endpoints or models
  without tool calls.

Its ``tables_in_context`` is the sorted set of benchmark tables referenced by the queries it ran.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pytest_heron import sandbox
from pytest_heron.core.errors import AdapterError, OutOfTime
from pytest_heron.core.types import (
    DEFAULT_STATEMENT_TIMEOUT_S,
    BenchmarkContext,
    Prediction,
    Question,
)
from pytest_heron.dataset import first_sentence, parse_ddl
from pytest_heron.systems.base import MeteredAdapter
from pytest_heron.systems.llm.client import (
    ChatClient,
    ChatReply,
    LLMError,
    Meter,
    ToolsUnsupported,
    client_for,
    deadline_after,
)

MAX_AGENT_CALLS = 20


PREVIEW_ROWS = 10


CELL_CHARS = 200


AGENT_SYSTEM = (
    "You are an expert PostgreSQL 16 analyst answering questions about the database of a "
    "multi-tenant B2B commerce platform. You cannot see the columns up front: explore with the "
    "run_sql_query tool (for example information_schema.columns, or "
    "col_description('schema.table'::regclass, ordinal_position) for a column's comment, and "
    "obj_description('schema.table'::regclass) for a table's), check your query's result, then "
    "call results_ok. The answer is the last query that ran successfully before results_ok: "
    "make sure it returns exactly what the question asks for. Use schema-qualified table names "
    "and follow the comments (tenants, soft-deleted rows, currencies, time zones).\n\n"
    "-- Schemas --\n{schemas}\n\n-- Tables --\n{tables}"
)


NUDGE = (
    "Use the tools: run_sql_query to run a query, results_ok when the last query that ran "
    "successfully is the answer."
)


NOTHING_RAN = "No query has run successfully yet: run the answer with run_sql_query first."


MODES = ("tools", "grammar")  # --heron-agent-mode
ACTIONS = ("run_sql_query", "results_ok")


GRAMMAR_RULES = (
    "\n\nYou have no function calls here: answer every turn with one JSON object, either "
    '{{"action": "run_sql_query", "sql": "<one SELECT or WITH query>"}} to run a query (its '
    'result comes back in the next message) or {{"action": "results_ok", "sql": ""}} when the '
    "last query that ran successfully is the answer."
)


GRAMMAR_NUDGE = (
    'Answer with one JSON object: {"action": "run_sql_query", "sql": "..."} or '
    '{"action": "results_ok", "sql": ""}.'
)


STEP_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "action": {"type": "string", "enum": list(ACTIONS)},
        "sql": {"type": "string"},
    },
    "required": ["action", "sql"],
    "additionalProperties": False,
}


# OpenAI's structured outputs; llama.cpp-style servers turn the schema into a grammar
RESPONSE_FORMAT: dict[str, Any] = {
    "type": "json_schema",
    "json_schema": {"name": "agent_step", "strict": True, "schema": STEP_SCHEMA},
}
# the older form, for servers that refuse the one above (llama-cpp-python 0.3 takes only this)
RESPONSE_FORMAT_OBJECT: dict[str, Any] = {"type": "json_object", "schema": STEP_SCHEMA}


def catalogue(ddl: str, tables: Sequence[str]) -> tuple[str, str]:
    """The agent's overview: one line per schema and per table with the first sentence of its
    comment (cut at 160 characters)."""

    def headline(text: str) -> str:
        text = first_sentence(text.strip())
        return text if len(text) <= 160 else text[:157] + "..."

    cat = parse_ddl(ddl)
    schemas = {name: headline(text) for name, text in cat.schema_comments.items()}
    comments = {name: headline(text) for name, text in cat.table_comments.items()}
    schema_lines = [f"{name}: {schemas[name]}" for name in sorted(schemas)]
    table_lines = [f"{t}: {comments.get(t, '')}".rstrip(": ") for t in sorted(tables)]
    return "\n".join(schema_lines), "\n".join(table_lines)


def tables_referenced(sql: str, known: set[str] | frozenset[str]) -> set[str]:
    """Benchmark tables (of ``known``) a query references; nothing when it does not parse."""
    from pytest_heron.sandbox import tables_read

    try:
        return {t for t in tables_read(sql) if t in known}
    except Exception:
        return set()


def _cell(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float)):
        return value
    text = value.hex() if isinstance(value, (bytes, memoryview)) else str(value)
    return text if len(text) <= CELL_CHARS else text[: CELL_CHARS - 3] + "..."


def tool_result(result: sandbox.ExecResult) -> str:
    """What ``run_sql_query`` tells the model (JSON text)."""
    if not result.ok:
        return json.dumps({"error": f"{result.error_kind}: {result.error}"})
    return json.dumps(
        {
            "row_count": len(result.rows),
            "columns": result.columns,
            "rows": [[_cell(v) for v in row] for row in result.rows[:PREVIEW_ROWS]],
        },
        default=str,
    )


@dataclass(frozen=True)
class Step:
    """One action the model asked for: ``run_sql_query`` (with ``sql``) or ``results_ok``;
    ``call_id`` is the tool call's id in tools mode, ``""`` in grammar mode."""

    name: str
    sql: str = ""
    call_id: str = ""


def grammar_step(content: str | None) -> Step | None:
    """The action in a grammar-mode reply (a JSON object per :data:`STEP_SCHEMA`), or None when
    the reply is not one.

    >>> grammar_step('{"action": "run_sql_query", "sql": "SELECT 1"}')
    Step(name='run_sql_query', sql='SELECT 1', call_id='')
    >>> grammar_step('{"action": "results_ok", "sql": ""}').name
    'results_ok'
    >>> grammar_step("SELECT 1") is None
    True

    Raw control characters inside a string are accepted: llama-cpp-python's grammar for a JSON
    string lets a model write a newline unescaped (seen against the real server).

    >>> grammar_step('{"action": "run_sql_query", "sql": "SELECT 1\\nFROM t"}').sql
    'SELECT 1\\nFROM t'
    """
    try:
        value = json.loads(content or "", strict=False)
    except ValueError:
        return None
    if not isinstance(value, dict) or value.get("action") not in ACTIONS:
        return None
    sql = value.get("sql")
    return Step(str(value["action"]), sql.strip() if isinstance(sql, str) else "")


class AgentAdapter(MeteredAdapter):
    """A loop that explores with ``run_sql_query`` and submits with ``results_ok``: as OpenAI
    tool calls (``--heron-agent-mode tools``, the default) or as JSON replies constrained by a
    schema (``grammar``)."""

    name = "agent"
    version = "2"  # 2: tool_choice and string content on tool-call turns; grammar mode

    def __init__(self) -> None:
        self.client: ChatClient | None = None
        self.system = ""
        self.known: frozenset[str] = frozenset()
        self.dsn = ""
        self.time_limit: float | None = None
        self.statement_timeout = DEFAULT_STATEMENT_TIMEOUT_S
        self.mode = "tools"
        self.response_format = RESPONSE_FORMAT

    def prepare(self, ctx: BenchmarkContext) -> None:
        mode = ctx.llm.agent_mode
        if mode not in MODES:
            raise AdapterError(f"--heron-agent-mode: unknown mode {mode!r} (tools or grammar)")
        self.mode = mode
        self.client = client_for(ctx, self.name, self.version)
        schemas, tables = catalogue(ctx.schema_ddl, ctx.tables)
        template = AGENT_SYSTEM + (GRAMMAR_RULES if mode == "grammar" else "")
        self.system = template.format(schemas=schemas, tables=tables)
        self.known = frozenset(ctx.tables)
        self.dsn = ctx.dsn
        self.time_limit, self.statement_timeout = (
            ctx.limits.timeout_s,
            ctx.limits.statement_timeout_s,
        )

    def conditions(self, ctx: BenchmarkContext) -> dict[str, str]:
        """What this adapter adds to the run's conditions: how the model acts."""
        return {"agent_mode": ctx.llm.agent_mode}

    def _ask(
        self, messages: list[dict[str, Any]], q: Question, sample: int, meter: Meter, deadline: Any
    ) -> tuple[ChatReply, list[Step] | None]:
        """One LLM call; the steps it asks for (None: a reply with no action in it)."""
        assert self.client is not None
        if self.mode == "grammar":
            try:
                reply = self.client.chat(
                    messages,
                    question_id=q.id,
                    sample=sample,
                    meter=meter,
                    deadline=deadline,
                    params={"response_format": self.response_format},
                )
            except LLMError as exc:
                if self.response_format is not RESPONSE_FORMAT or not _refuses_format(exc):
                    raise
                self.response_format = RESPONSE_FORMAT_OBJECT  # for the rest of the run
                reply = self.client.chat(
                    messages,
                    question_id=q.id,
                    sample=sample,
                    meter=meter,
                    deadline=deadline,
                    params={"response_format": self.response_format},
                )
            step = grammar_step(reply.content)
            return reply, None if step is None else [step]
        reply = self.client.chat(
            messages, question_id=q.id, sample=sample, tools=TOOLS, meter=meter, deadline=deadline
        )
        if not reply.tool_calls:
            return reply, None
        steps = []
        for call in reply.tool_calls:
            sql = str(call.parsed_arguments().get("sql") or "").strip()
            steps.append(Step(call.name, sql, call.id))
        return reply, steps

    def answer(self, q: Question, sample: int, meter: Meter) -> Prediction:
        if self.client is None:
            raise AdapterError("the agent adapter was not prepared")
        deadline = deadline_after(self.time_limit)
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": self.system},
            {"role": "user", "content": q.question},
        ]
        ran: list[str] = []
        last_ok: str | None = None
        acted = False
        text_only = 0
        early_submits = 0  # results_ok before any query had run successfully
        for _ in range(MAX_AGENT_CALLS):
            if deadline is not None and _now() >= deadline:
                raise OutOfTime(f"the agent ran out of time after {meter.calls} LLM calls")
            reply, steps = self._ask(messages, q, sample, meter, deadline)
            messages.append(reply.message())
            if steps is None:
                text_only += 1
                if self.mode == "tools" and not acted and text_only >= 2:
                    raise ToolsUnsupported(
                        "the model answered in text twice without calling a tool: the endpoint "
                        "or model does not seem to support tool calls (try --heron-agent-mode "
                        "grammar, or --heron-adapter raw-llm)"
                    )
                messages.append(
                    {"role": "user", "content": NUDGE if self.mode == "tools" else GRAMMAR_NUDGE}
                )
                continue
            text_only = 0
            acted = True
            results: list[str] = []
            for step in steps:
                if step.name == "results_ok":
                    if last_ok is not None:
                        return self._prediction(last_ok, ran, meter)
                    early_submits += 1
                    content = NOTHING_RAN
                elif step.name == "run_sql_query":
                    if not step.sql:
                        content = json.dumps({"error": "run_sql_query needs a 'sql' argument"})
                    else:
                        ran.append(step.sql)
                        result = sandbox.execute(
                            self.dsn, step.sql, timeout_s=self.statement_timeout
                        )
                        if result.ok:
                            last_ok = step.sql
                        content = tool_result(result)
                else:
                    content = json.dumps({"error": f"unknown tool {step.name!r}"})
                if self.mode == "tools":
                    messages.append(
                        {"role": "tool", "tool_call_id": step.call_id, "content": content}
                    )
                else:
                    results.append(f"{step.name} result: {content}")
            if results:
                messages.append({"role": "user", "content": "\n".join(results)})
        raise AdapterError(
            f"the agent reached its limit of {MAX_AGENT_CALLS} LLM calls without an answer: "
            + give_up_reason(len(ran), last_ok is not None, early_submits, text_only)
        )

    def _prediction(self, sql: str, ran: Sequence[str], meter: Meter) -> Prediction:
        tables: set[str] = set()
        for text in ran:
            tables |= tables_referenced(text, self.known)
        return Prediction(
            sql=sql,
            tables_in_context=sorted(tables),
            usage=meter.usage(),
            trace={"queries": list(ran), "mode": self.mode},
        )


def _refuses_format(exc: LLMError) -> bool:
    """Whether the endpoint refused the request for its ``json_schema`` response format
    (llama-cpp-python 0.3 answers it with HTTP 500 and the validation error in the message)."""
    text = str(exc)
    return " HTTP " in text and "response_format" in text and "json_schema" in text


def give_up_reason(queries: int, any_ok: bool, early_submits: int, text_only: int) -> str:
    """What the agent says when its calls ran out, from what the model did.

    >>> give_up_reason(0, False, 100, 0)
    'results_ok was called 100 times but no query had run successfully before it (0 queries run)'
    >>> give_up_reason(3, True, 0, 0)
    'results_ok was never called (3 queries run, the last successful one not submitted)'
    """
    if early_submits:
        return (
            f"results_ok was called {early_submits} times but no query had run successfully "
            f"before it ({queries} queries run)"
        )
    if any_ok:
        return (
            f"results_ok was never called ({queries} queries run, the last successful one "
            "not submitted)"
        )
    tail = f"; its last {text_only} replies held no action" if text_only else ""
    return (
        f"results_ok was never called and no query ran successfully ({queries} queries run{tail})"
    )


def _now() -> float:
    return time.monotonic()


TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "run_sql_query",
            "description": (
                "Run one read-only PostgreSQL query (SELECT or WITH) on the database. Returns "
                f"the row count, the column names and the first {PREVIEW_ROWS} rows, or the "
                "database's error message."
            ),
            "parameters": {
                "type": "object",
                "properties": {"sql": {"type": "string", "description": "the query to run"}},
                "required": ["sql"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "results_ok",
            "description": (
                "Submit: call this when the last query you ran successfully is the final "
                "answer to the question."
            ),
            "parameters": {"type": "object", "properties": {}},
        },
    },
]
