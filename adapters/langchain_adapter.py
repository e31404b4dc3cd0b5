"""The ``langchain`` adapter: LangChain's SQL query chain (``pip install
'pytest-heron[langchain]'``).

The chain is ``create_sql_query_chain`` (``langchain_classic.chains``; it left the ``langchain``
package in 1.0) over a ``langchain_community`` ``SQLDatabase`` on the read-only DSN, with
``ChatOpenAI`` pointed at this adapter's :class:`~.proxy.LLMProxy` (the project's LLM layer:
cache, offline replay, meter). The
chain's PostgreSQL prompt gets, per table, the ``CREATE TABLE`` SQLAlchemy reflects, the column
comments (``get_col_comments=True``) and three sample rows, LangChain's default; its row limit
``k`` is raised from 5 to :data:`ROW_LIMIT`.

Two things LangChain leaves to the user, done the way its SQL guide describes for databases too
large for one prompt:

- Table selection: a first LLM call lists every table (schema-qualified, with its comment) and
  asks for the relevant ones; the known names in the reply, at most :data:`MAX_TABLES`, become
  the chain's ``table_names_to_use``. A reply naming no known table is an adapter error.
- Several schemas: ``SQLDatabase`` reflects one schema; :class:`MultiSchemaDatabase` (built in
  :func:`_database_class`) keeps one per schema and answers for qualified names.

Reports: the SQL (the chain's output without a ``SQLQuery:`` label or code fence), billed usage
of both calls, and ``tables_in_context``: the tables given to the chain.
"""

from __future__ import annotations

import re
from typing import Any

from pytest_heron import DEFAULT_TIMEOUT_S, AdapterError, BenchmarkContext, Prediction, Question
from pytest_heron.llm import PLACEHOLDER_KEY, client_for

from .proxy import LLMProxy
from .schema_text import require, table_comments, tables_mentioned

MAX_TABLES = 10
ROW_LIMIT = 1000  # the chain's ``k``: its prompt asks for at most k rows unless the question says
# otherwise; LangChain's default of 5 would truncate most benchmark answers (DECISIONS.md)
SELECT_SYSTEM = (
    "You choose the database tables needed to answer a question with SQL. The PostgreSQL "
    "database has these tables (schema-qualified name: description):\n\n{table_list}\n\n"
    "Return the schema-qualified names of ALL the tables that might be needed to answer the "
    "question, including tables needed only for joins, one per line, most important first, at "
    "most {max_tables}. Return only the names."
)


def clean_chain_output(text: str) -> str:
    """The SQL in the chain's output: after the last ``SQLQuery:`` label, outside a fence.

    >>> clean_chain_output("SQLQuery: ```sql\\nSELECT 1\\n```")
    'SELECT 1'
    >>> clean_chain_output("SELECT 2")
    'SELECT 2'
    """
    if "SQLQuery:" in text:
        text = text.rsplit("SQLQuery:", 1)[1]
    fence = re.search(r"```(?:sql)?\s*(.*?)```", text, re.S | re.I)
    if fence:
        text = fence.group(1)
    return text.strip()


def _database_class() -> Any:
    utilities = require("langchain_community.utilities", adapter="langchain", extra="langchain")
    base = utilities.SQLDatabase

    class MultiSchemaDatabase(base):  # type: ignore[misc, valid-type]
        """A ``SQLDatabase`` over several schemas: names are ``schema.table``."""

        def __init__(self, engine: Any, schemas: list[str], **kwargs: Any) -> None:
            self._parts = {
                s: base(engine, schema=s, lazy_table_reflection=True, **kwargs) for s in schemas
            }
            super().__init__(engine, schema=schemas[0], lazy_table_reflection=True, **kwargs)

        def get_usable_table_names(self) -> list[str]:
            return sorted(f"{s}.{t}" for s, part in self._parts.items() for t in part._all_tables)

        def get_table_info(
            self, table_names: list[str] | None = None, get_col_comments: bool = False
        ) -> str:
            names = self.get_usable_table_names() if table_names is None else table_names
            by_schema: dict[str, list[str]] = {}
            for name in names:
                schema, _, table = name.partition(".")
                if schema not in self._parts or table not in self._parts[schema]._all_tables:
                    raise ValueError(f"table {name!r} not found in database")
                by_schema.setdefault(schema, []).append(table)
            infos = [
                self._parts[s].get_table_info(tables, get_col_comments=get_col_comments)
                for s, tables in sorted(by_schema.items())
            ]
            return "\n\n".join(i for i in infos if i)

    return MultiSchemaDatabase


class LangChainAdapter:
    """See the module docstring."""

    name = "langchain"
    version = "1"

    def __init__(self) -> None:
        self.proxy: LLMProxy | None = None
        self.chain: Any = None
        self.selector: Any = None
        self.known: list[str] = []
        self.table_list = ""
        self.timeout = DEFAULT_TIMEOUT_S

    def prepare(self, ctx: BenchmarkContext) -> None:
        chains = require("langchain_classic.chains", adapter="langchain", extra="langchain")
        lc_openai = require("langchain_openai", adapter="langchain", extra="langchain")
        prompts = require("langchain_core.prompts", adapter="langchain", extra="langchain")
        parsers = require("langchain_core.output_parsers", adapter="langchain", extra="langchain")
        sqlalchemy = require("sqlalchemy", adapter="langchain", extra="langchain")
        database_class = _database_class()
        client = client_for(ctx, self.name, self.version)
        self.timeout = ctx.limits.timeout_s
        self.proxy = LLMProxy(client)
        llm = lc_openai.ChatOpenAI(
            model=client.config.model,
            base_url=self.proxy.url,
            api_key=PLACEHOLDER_KEY,
            temperature=client.config.temperature,
            max_retries=0,
            timeout=self.timeout,
        )
        import psycopg

        dsn = ctx.dsn
        engine = sqlalchemy.create_engine(
            "postgresql+psycopg://", creator=lambda: psycopg.connect(dsn)
        )
        schemas = sorted({t.split(".", 1)[0] for t in ctx.tables})
        db = database_class(engine, schemas)
        self.known = [t for t in db.get_usable_table_names() if t in set(ctx.tables)]
        comments = table_comments(ctx.schema_ddl)
        self.table_list = "\n".join(f"{t}: {comments.get(t, '')}".rstrip() for t in self.known)
        self.chain = chains.create_sql_query_chain(llm, db, k=ROW_LIMIT, get_col_comments=True)
        prompt = prompts.ChatPromptTemplate.from_messages(
            [("system", SELECT_SYSTEM), ("human", "{question}")]
        )
        self.selector = prompt | llm | parsers.StrOutputParser()

    def generate(self, q: Question, sample: int = 0) -> Prediction:
        if self.chain is None or self.proxy is None:
            raise AdapterError("the langchain adapter was not prepared")
        recording = self.proxy.record(q.id, sample, self.timeout)
        try:
            reply = self.selector.invoke(
                {"question": q.question, "table_list": self.table_list, "max_tables": MAX_TABLES}
            )
            chosen = _in_order(reply, self.known)[:MAX_TABLES]
            if not chosen:
                raise AdapterError(
                    f"the table-selection step named no known table: {reply[:300]!r}"
                )
            out = self.chain.invoke({"question": q.question, "table_names_to_use": chosen})
        except Exception as exc:
            recording.failed(exc, "langchain")
            raise
        return Prediction(
            sql=clean_chain_output(str(out)),
            tables_in_context=sorted(chosen),
            usage=recording.usage(),
            trace={"selection": reply, "chain_output": out},
        )


def _in_order(text: str, known: list[str]) -> list[str]:
    """The known tables named in ``text``, in the order they first appear there.

    >>> _in_order("sales.orders, then core.tenants", ["core.tenants", "sales.orders"])
    ['sales.orders', 'core.tenants']
    """
    low = text.lower()
    first: dict[str, int] = {}
    for name in tables_mentioned(text, known):
        m = re.search(rf"(?<![\w.]){re.escape(name.lower())}(?!\w)", low)
        first[name] = m.start() if m else len(low)
    return sorted(first, key=lambda t: (first[t], t))
