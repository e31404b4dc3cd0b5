"""The ``din-sql`` adapter: DIN-SQL (Pourreza and Rafiei, "DIN-SQL: Decomposed In-Context
Learning of Text-to-SQL with Self-Correction", 2023), written from the paper's description over
the project's LLM layer (:mod:`pytest_heron.llm`: cache, offline replay, meter). Core
dependencies only.

Four stages, one LLM call each, per question:

1. **Schema linking.** The model sees every table (name, comment, column names) and the foreign
   keys, reasons step by step about which tables, columns, join columns and literal values the
   question refers to, and ends with a ``Schema_links: [...]`` line.
2. **Classification and decomposition.** Given the links, the model labels the query EASY (one
   table, no join, no sub-query), NON-NESTED (joins, no sub-query) or NESTED (sub-queries, set
   operations, nested aggregates) and, for NESTED, lists the sub-questions to answer first.
3. **Generation,** with a prompt per class: EASY writes the SQL directly; NON-NESTED first writes
   an intermediate representation (tables, join conditions, filters, grouping, ordering) and
   then the SQL; NESTED answers the sub-questions with SQL pieces and then combines them. The
   prompt carries the full DDL with comments of the linked tables and their foreign keys.
4. **Self-correction:** the model reviews the SQL against the schema for the usual bugs and
   returns it fixed or unchanged (the paper's "gentle" prompt; no execution).

Adaptations to a 211-table schema (DECISIONS.md, 2026-11-29): the paper puts the whole (small,
Spider) schema in every prompt; here only the linking step sees all tables, in a compact form,
and the later steps get the full definitions of the linked tables. The paper's few-shot
demonstrations are Spider questions; the prompts here are zero-shot instructions in the same
roles. If the links name no known table, the tables named anywhere in the linking reply are
used, and failing that the :data:`FALLBACK_TABLES` best by BM25 over the table texts.

Reports: the SQL, billed usage of the four calls, ``tables_in_context`` = the linked tables (whose
full definitions reached generation), and a trace with each stage's reply and the class.
"""

from __future__ import annotations

import re
import time

from pytest_heron import DEFAULT_TIMEOUT_S, AdapterError, BenchmarkContext, Prediction, Question
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

CLASSES = ("EASY", "NON-NESTED", "NESTED")

LINK_SYSTEM = """\
You link natural-language questions to a PostgreSQL database schema.

Tables (schema-qualified name -- description; then its columns):
{schema}

Foreign keys (referencing column = referenced column):
{fks}"""

LINK_USER = """\
Question: {question}

Think step by step about which tables and columns this question refers to, which columns join \
those tables, and which literal values appear in its conditions. Then end your answer with one \
line in exactly this form:
Schema_links: [schema.table.column, schema.table.column = schema.other_table.column, 'value']"""

CLASSIFY_USER = """\
Question: {question}
Schema links: {links}

Classify the SQL query that answers the question:
- EASY: one table, no join, no sub-query;
- NON-NESTED: joins, but no sub-query;
- NESTED: needs a sub-query, a set operation (UNION, INTERSECT, EXCEPT) or an aggregate of an \
aggregate.
For NESTED, first list the sub-questions that must be answered before the whole question. End \
with one line: Label: EASY, Label: NON-NESTED or Label: NESTED"""

GENERATE_SYSTEM = """\
You write PostgreSQL queries. Use only these tables and columns.

{ddl}

Foreign keys among them (referencing column = referenced column):
{fks}

Schema links found for the question: {links}"""

GENERATE_USER = {
    "EASY": """\
Question: {question}

This query needs a single table and no sub-query. Write it, and reply with only the SQL in a \
```sql block.""",
    "NON-NESTED": """\
Question: {question}

This query needs joins but no sub-query. First write an intermediate representation, step by \
step: the tables to join, each join condition (from the foreign keys), the filters, the \
grouping and the ordering. Then write the final SQL in a ```sql block.""",
    "NESTED": """\
Question: {question}

This query needs nesting. Sub-questions:
{subs}

Answer each sub-question with a SQL piece first, then combine the pieces into one query \
(sub-queries, set operations or CTEs). Write the final SQL in a ```sql block at the end.""",
}

CORRECT_USER = """\
Question: {question}

SQL written for it:
```sql
{sql}
```

Check this SQL against the schema for bugs: columns that do not exist or sit in another table, \
joins that do not follow the foreign keys, aggregates without the right GROUP BY, conditions \
the question does not ask for or conditions it asks for that are missing, literal values that \
do not match the data, missing DISTINCT, wrong ordering or limits. If you find a problem, fix \
it; if not, return the query unchanged. Reply with only the SQL in a ```sql block."""


def compact_schema(tables: list[TableInfo]) -> str:
    """One entry per table: ``name -- first sentence of its comment`` and its column names."""
    lines = []
    for t in tables:
        lines.append(f"{t.name} -- {first_sentence(t.comment)}".rstrip(" -"))
        lines.append("  columns: " + ", ".join(c.name for c in t.columns))
    return "\n".join(lines)


def parse_links(reply: str) -> str:
    """The text of the last ``Schema_links:`` line (empty when there is none).

    >>> parse_links("thinking...\\nSchema_links: [core.users.id, 'x']\\n")
    "[core.users.id, 'x']"
    """
    found = re.findall(r"schema[_ ]links\s*:\s*(.+)", reply, re.I)
    return found[-1].strip() if found else ""


def parse_class(reply: str) -> str:
    """The class in a ``Label:`` line (the last one); NON-NESTED when there is none.

    >>> parse_class("Label: NESTED"), parse_class("label: easy"), parse_class("no idea")
    ('NESTED', 'EASY', 'NON-NESTED')
    """
    found = re.findall(r"label\s*:\s*\**\s*\"?(non[- ]nested|nested|easy)", reply, re.I)
    if not found:
        return "NON-NESTED"
    return str(found[-1]).upper().replace(" ", "-")


def sub_questions(reply: str) -> str:
    """The classification reply without its ``Label:`` line: the sub-questions it lists."""
    return re.sub(r"(?im)^.*label\s*:.*$", "", reply).strip() or "(none given)"


class DinSqlAdapter(MeteredAdapter):
    """See the module docstring."""

    name = "din-sql"
    version = "1"

    def __init__(self) -> None:
        self.client: ChatClient | None = None
        self.tables: dict[str, TableInfo] = {}
        self.chunks: dict[str, str] = {}
        self.fks: list[tuple[str, str]] = []
        self.index = LexicalIndex()
        self.link_system = ""
        self.timeout = DEFAULT_TIMEOUT_S

    def prepare(self, ctx: BenchmarkContext) -> None:
        self.client = client_for(ctx, self.name, self.version)
        self.timeout = ctx.limits.timeout_s
        self.tables = schema_model(ctx.schema_ddl)
        self.chunks = table_chunks(ctx.schema_ddl)
        self.index = LexicalIndex(self.chunks.values())
        self.fks = column_pairs(foreign_keys(ctx.dsn), self.tables)
        self.link_system = LINK_SYSTEM.format(
            schema=compact_schema(list(self.tables.values())), fks=fk_lines(self.fks)
        )

    def linked_tables(self, links: str, reply: str, question: str) -> list[str]:
        known = list(self.tables)
        tables = tables_mentioned(links, known) or tables_mentioned(reply, known)
        if tables:
            return tables
        names = list(self.chunks)
        return sorted(names[i] for i in self.index.top(question, FALLBACK_TABLES))

    def answer(self, q: Question, sample: int, meter: Meter) -> Prediction:
        if self.client is None:
            raise AdapterError("the din-sql adapter was not prepared")
        client = self.client
        deadline = time.monotonic() + self.timeout

        def ask(messages: list[dict[str, str]]) -> str:
            reply = client.chat(
                messages, question_id=q.id, sample=sample, meter=meter, deadline=deadline
            )
            return reply.content or ""

        link_reply = ask(
            [
                {"role": "system", "content": self.link_system},
                {"role": "user", "content": LINK_USER.format(question=q.question)},
            ]
        )
        links = parse_links(link_reply)
        tables = self.linked_tables(links, link_reply, q.question)
        context = {
            "ddl": "\n\n".join(self.chunks[t] for t in tables),
            "fks": fk_lines(fks_among(self.fks, tables)),
            "links": links or "(none given)",
        }
        system = GENERATE_SYSTEM.format(**context)
        class_reply = ask(
            [
                {"role": "system", "content": system},
                {"role": "user", "content": CLASSIFY_USER.format(question=q.question, links=links)},
            ]
        )
        label = parse_class(class_reply)
        prompt = GENERATE_USER[label].format(question=q.question, subs=sub_questions(class_reply))
        gen_reply = ask(
            [{"role": "system", "content": system}, {"role": "user", "content": prompt}]
        )
        sql = extract_sql(gen_reply)
        if not sql:
            raise AdapterError("din-sql: the generation step returned no SQL")
        fix_reply = ask(
            [
                {"role": "system", "content": system},
                {"role": "user", "content": CORRECT_USER.format(question=q.question, sql=sql)},
            ]
        )
        corrected = extract_sql(fix_reply) or sql
        return Prediction(
            sql=corrected,
            tables_in_context=tables,
            usage=meter.usage(),
            trace={
                "class": label,
                "schema_links": links,
                "generated_sql": sql,
                "replies": [link_reply, class_reply, gen_reply, fix_reply],
            },
        )
