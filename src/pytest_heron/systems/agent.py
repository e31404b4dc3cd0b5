"""The ``agent`` adapter: a tool-calling loop that explores the database with read-only queries.

It reaches the model through :mod:`pytest_heron.llm` (retries, cache, offline replay, billed
usage) and reports ``usage`` for the question. It sees the schemas' descriptions and the table
names with their one-line comments, and two tools: ``run_sql_query(sql)`` (runs in the sandbox;
returns the row count, column names and the first :data:`PREVIEW_ROWS` rows, or the error) and
``results_ok()``, which submits. The answer is the **last query that ran successfully** before
``results_ok`` was called. The loop makes at most :data:`MAX_AGENT_CALLS` LLM calls and stops at
the question's deadline. An endpoint that rejects a request with tools (HTTP 400/404/422), or a
model that twice in a row answers in text without ever calling a tool, is reported as
:class:`~pytest_heron.llm.ToolsUnsupported`. Its ``tables_in_context`` is the sorted set of
benchmark tables referenced by the queries it ran.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from pytest_heron import sandbox
from pytest_heron.dataset.catalogue import first_sentence, parse_ddl
from pytest_heron.errors import AdapterError
from pytest_heron.systems.base import MeteredAdapter
from pytest_heron.systems.llm.client import (
    ChatClient,
    Meter,
    ToolsUnsupported,
    client_for,
    deadline_after,
)
from pytest_heron.types import BenchmarkContext, Prediction, Question

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
    from pytest_heron.sandbox.statement import tables_read

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


class AgentAdapter(MeteredAdapter):
    """A tool-calling loop: explore with ``run_sql_query``, submit with ``results_ok``."""

    name = "agent"
    version = "1"

    def __init__(self) -> None:
        self.client: ChatClient | None = None
        self.system = ""
        self.known: frozenset[str] = frozenset()
        self.dsn = ""
        self.time_limit: float | None = None
        self.statement_timeout = 30.0

    def prepare(self, ctx: BenchmarkContext) -> None:
        self.client = client_for(ctx, self.name, self.version)
        schemas, tables = catalogue(ctx.schema_ddl, ctx.tables)
        self.system = AGENT_SYSTEM.format(schemas=schemas, tables=tables)
        self.known = frozenset(ctx.tables)
        self.dsn = ctx.dsn
        self.time_limit, self.statement_timeout = (
            ctx.limits.timeout_s,
            ctx.limits.statement_timeout_s,
        )

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
        tools_used = False
        text_only = 0
        for _ in range(MAX_AGENT_CALLS):
            if deadline is not None and _now() >= deadline:
                raise TimeoutError(f"the agent ran out of time after {meter.calls} LLM calls")
            reply = self.client.chat(
                messages,
                question_id=q.id,
                sample=sample,
                tools=TOOLS,
                meter=meter,
                deadline=deadline,
            )
            messages.append(reply.message())
            if not reply.tool_calls:
                text_only += 1
                if not tools_used and text_only >= 2:
                    raise ToolsUnsupported(
                        "the model answered in text twice without calling a tool: the endpoint "
                        "or model does not seem to support tool calls (try --heron-adapter "
                        "raw-llm)"
                    )
                messages.append({"role": "user", "content": NUDGE})
                continue
            text_only = 0
            tools_used = True
            for call in reply.tool_calls:
                if call.name == "results_ok":
                    if last_ok is not None:
                        return self._prediction(last_ok, ran, meter)
                    content = NOTHING_RAN
                elif call.name == "run_sql_query":
                    sql = str(call.parsed_arguments().get("sql") or "").strip()
                    if not sql:
                        content = json.dumps({"error": "run_sql_query needs a 'sql' argument"})
                    else:
                        ran.append(sql)
                        result = sandbox.execute(self.dsn, sql, timeout_s=self.statement_timeout)
                        if result.ok:
                            last_ok = sql
                        content = tool_result(result)
                else:
                    content = json.dumps({"error": f"unknown tool {call.name!r}"})
                messages.append({"role": "tool", "tool_call_id": call.id, "content": content})
        raise AdapterError(
            f"the agent did not call results_ok within {MAX_AGENT_CALLS} LLM calls "
            f"({len(ran)} queries run)"
        )

    def _prediction(self, sql: str, ran: Sequence[str], meter: Meter) -> Prediction:
        tables: set[str] = set()
        for text in ran:
            tables |= tables_referenced(text, self.known)
        return Prediction(
            sql=sql,
            tables_in_context=sorted(tables),
            usage=meter.usage(),
            trace={"queries": list(ran)},
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
