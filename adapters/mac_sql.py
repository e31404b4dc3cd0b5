"""The ``mac-sql`` adapter: MAC-SQL (Wang et al., "MAC-SQL: A Multi-Agent Collaborative
Framework for Text-to-SQL", 2023), written from the paper's description over the project's LLM
layer (:mod:`pytest_heron.llm`: cache, offline replay, meter) and the benchmark's sandbox.
Core dependencies only.

Three agents per question:

1. **Selector.** Sees the whole schema in MAC-SQL's layout (per table, each column with its type
   and description; then the foreign keys) and answers a JSON object keeping each relevant table
   with ``"keep_all"`` or the list of its relevant columns (tables left out are dropped).
2. **Decomposer.** Sees the pruned schema (full column descriptions) and the question, breaks
   the question into sub-questions from simple to complete, writes SQL for each step by step;
   the last SQL answers the question.
3. **Refiner.** Executes the SQL in the sandbox (:func:`pytest_heron.sandbox.execute`, read-only
   DSN, the statement timeout). If it fails (rejected, database error, timeout) or returns no
   rows, the refiner gets the SQL, the error (or "no rows") and the pruned schema and writes a
   corrected query; at most :data:`MAX_REFINE` rounds, then the last SQL stands.

Adaptations (DECISIONS.md, 2026-11-29): column descriptions in the selector are cut to their
first sentence (the whole schema with every comment in full is ~90k tokens per question); the
paper's value examples per column are left out (they need a scan per column at bench scale);
zero-shot instructions replace the paper's BIRD/Spider demonstrations. If the selector's reply
keeps no known table, the :data:`FALLBACK_TABLES` best tables by BM25 are kept. The refiner
treats an empty result as a failure, as published, although an empty answer is sometimes right
(the benchmark's empty probes measure exactly that).

Reports: the SQL, billed usage, ``tables_in_context`` = the tables the selector kept, and a trace
with each agent's reply and the refiner's rounds.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

from pytest_heron import (
    DEFAULT_STATEMENT_TIMEOUT_S,
    DEFAULT_TIMEOUT_S,
    AdapterError,
    BenchmarkContext,
    Prediction,
    Question,
    sandbox,
)
from pytest_heron.llm import ChatClient, Meter, MeteredAdapter, client_for, extract_sql
from pytest_heron.retrieval import (
    LexicalIndex,
    TableInfo,
    column_pairs,
    first_sentence,
    foreign_keys,
)

from .schema_text import (
    FALLBACK_TABLES,
    fk_lines,
    fks_among,
    schema_model,
    table_chunks,
    tables_mentioned,
)

MAX_REFINE = 3

SELECTOR_SYSTEM = """\
You are a database administrator. A PostgreSQL database has many tables; for the question you \
are given, keep only the tables and columns needed to write its SQL query.

Schema:
{schema}

Foreign keys (referencing column = referenced column):
{fks}

Reply with one JSON object. Each key is the schema-qualified name of a table to keep; its value \
is "keep_all" to keep every column, or a list of the column names needed (include the key \
columns used for joins). Tables you leave out are dropped. Reply with the JSON object only."""

DECOMPOSER_SYSTEM = """\
You write PostgreSQL queries. The database schema (only the relevant part):
{schema}

Foreign keys (referencing column = referenced column):
{fks}"""

DECOMPOSER_USER = """\
Question: {question}

Decompose the question into sub-questions, from the simplest to the complete question, and \
write the SQL for each, step by step, each building on the previous ones. Use this format:

Sub question 1: ...
SQL
```sql
...
```

Sub question 2: ...
SQL
```sql
...
```

The SQL of the last sub question must answer the whole question."""

REFINER_USER = """\
Question: {question}

This SQL was written for the question:
```sql
{sql}
```

When executed it {outcome}.

Find the cause using the schema, and write a corrected query that answers the question. Reply \
with the corrected SQL in a ```sql block."""


def schema_block(tables: list[TableInfo], columns: dict[str, list[str] | None], brief: bool) -> str:
    """MAC-SQL's schema layout: ``# Table: name`` then ``(column, description)`` items.
    ``columns`` maps a table to the columns to show (None: all); ``brief`` keeps only the
    first sentence of each description."""
    out = []
    for t in tables:
        keep = columns.get(t.name)
        head = f"# Table: {t.name}"
        if t.comment:
            head += f" -- {first_sentence(t.comment) if brief else t.comment}"
        items = []
        for c in t.columns:
            if keep is not None and c.name not in keep:
                continue
            note = first_sentence(c.comment) if brief else c.comment
            items.append(f"  ({c.name}, {c.definition}{'. ' + note if note else ''}),")
        out.append(head + "\n[\n" + "\n".join(items) + "\n]")
    return "\n".join(out)


def parse_selection(reply: str, known: dict[str, TableInfo]) -> dict[str, list[str] | None]:
    """The selector's decision: kept table -> its kept columns (None = all). Unknown tables,
    ``drop_all`` and unknown columns are ignored; a table whose listed columns are all unknown
    keeps all of them.

    >>> from pytest_heron.dataset.catalogue import ColumnInfo
    >>> t = TableInfo("s.t", "", (ColumnInfo("a", "int"), ColumnInfo("b", "int")))
    >>> parse_selection('ok: {"s.t": ["b", "zz"], "s.x": "keep_all"}', {"s.t": t})
    {'s.t': ['b']}
    >>> parse_selection('{"s.t": "drop_all"}', {"s.t": t})
    {}
    """
    found = re.search(r"\{.*\}", reply, re.S)
    if not found:
        return {}
    try:
        doc = json.loads(found.group(0))
    except ValueError:
        return {}
    if not isinstance(doc, dict):
        return {}
    out: dict[str, list[str] | None] = {}
    for raw_name, decision in doc.items():
        name = str(raw_name).lower()
        if name not in known or decision == "drop_all":
            continue
        if isinstance(decision, list):
            names = {c.name for c in known[name].columns}
            cols = [str(c) for c in decision if str(c) in names]
            out[name] = cols or None
        else:
            out[name] = None
    return dict(sorted(out.items()))


class MacSqlAdapter(MeteredAdapter):
    """See the module docstring."""

    name = "mac-sql"
    version = "1"

    def __init__(self) -> None:
        self.client: ChatClient | None = None
        self.tables: dict[str, TableInfo] = {}
        self.fks: list[tuple[str, str]] = []
        self.index = LexicalIndex()
        self.index_names: list[str] = []
        self.selector_system = ""
        self.dsn = ""
        self.timeout = DEFAULT_TIMEOUT_S
        self.statement_timeout = DEFAULT_STATEMENT_TIMEOUT_S

    def prepare(self, ctx: BenchmarkContext) -> None:
        self.client = client_for(ctx, self.name, self.version)
        self.timeout, self.statement_timeout = ctx.limits.timeout_s, ctx.limits.statement_timeout_s
        self.dsn = ctx.dsn
        self.tables = schema_model(ctx.schema_ddl)
        chunks = table_chunks(ctx.schema_ddl)
        self.index = LexicalIndex(chunks.values())
        self.index_names = list(chunks)  # the index answers positions in this order
        self.fks = column_pairs(foreign_keys(ctx.dsn), self.tables)
        everything = list(self.tables.values())
        self.selector_system = SELECTOR_SYSTEM.format(
            schema=schema_block(everything, {}, brief=True), fks=fk_lines(self.fks)
        )

    def answer(self, q: Question, sample: int, meter: Meter) -> Prediction:
        if self.client is None:
            raise AdapterError("the mac-sql adapter was not prepared")
        client = self.client
        deadline = time.monotonic() + self.timeout

        def ask(messages: list[dict[str, str]]) -> str:
            reply = client.chat(
                messages, question_id=q.id, sample=sample, meter=meter, deadline=deadline
            )
            return reply.content or ""

        select_reply = ask(
            [
                {"role": "system", "content": self.selector_system},
                {"role": "user", "content": f"Question: {q.question}"},
            ]
        )
        kept = parse_selection(select_reply, self.tables)
        if not kept:
            named = tables_mentioned(select_reply, list(self.tables))
            fallback = named or sorted(
                self.index_names[i] for i in self.index.top(q.question, FALLBACK_TABLES)
            )
            kept = {t: None for t in fallback}
        chosen = [self.tables[t] for t in kept]
        system = DECOMPOSER_SYSTEM.format(
            schema=schema_block(chosen, kept, brief=False),
            fks=fk_lines(fks_among(self.fks, kept)),
        )
        decompose_reply = ask(
            [
                {"role": "system", "content": system},
                {"role": "user", "content": DECOMPOSER_USER.format(question=q.question)},
            ]
        )
        sql = extract_sql(decompose_reply)
        if not sql:
            raise AdapterError("mac-sql: the decomposer returned no SQL")
        rounds: list[dict[str, Any]] = []
        for _ in range(MAX_REFINE):
            got = sandbox.execute(self.dsn, sql, timeout_s=self.statement_timeout)
            if got.ok and got.rows:
                break
            outcome = (
                f"failed with this error: {got.error_kind}: {got.error}"
                if not got.ok
                else "returned no rows"
            )
            refine_reply = ask(
                [
                    {"role": "system", "content": system},
                    {
                        "role": "user",
                        "content": REFINER_USER.format(
                            question=q.question, sql=sql, outcome=outcome
                        ),
                    },
                ]
            )
            rounds.append({"sql": sql, "outcome": outcome, "reply": refine_reply})
            fixed = extract_sql(refine_reply)
            if not fixed or fixed == sql:
                break
            sql = fixed
        return Prediction(
            sql=sql,
            tables_in_context=sorted(kept),
            usage=meter.usage(),
            trace={"selector": select_reply, "decomposer": decompose_reply, "refiner": rounds},
        )
