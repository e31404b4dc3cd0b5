"""The ``vanna`` adapter: Vanna's retrieval-augmented SQL generator (``pip install
'pytest-heron[vanna]'``).

Vanna 2.x ships two APIs: a chat *agent* (``vanna.Agent``: tools, users, streamed UI components)
and, under ``vanna.legacy``, the text-to-SQL pipeline Vanna is known for: ``train`` the store on
DDL, documentation and question/SQL pairs, then ``generate_sql(question)`` retrieves the related
DDL and documentation and asks the LLM once (twice when it first asks for an ``intermediate_sql``
to look at data). The benchmark scores SQL, so this adapter uses ``generate_sql`` (see
DECISIONS.md, 2026-11-29).

Set-up, as Vanna's training guide recommends: one ``train(ddl=...)`` per table (its ``CREATE
TABLE`` with its ``COMMENT ON TABLE/COLUMN`` statements) and one ``train(documentation=...)``
per schema (the schema's comment: what the module is for), made as the equivalent
``add_ddl``/``add_documentation`` calls (``train`` only adds a print of the text). No
question/SQL pairs: the system starts from the schema alone, like every other adapter here.

Vanna's stock vector stores embed with a model downloaded at run time (ChromaDB's default ONNX
model) or a hosted service; neither works offline, so the store here is Vanna's own storage
interface (``add_ddl``, ``get_related_ddl``, ...) over the project's BM25 index
(:class:`pytest_heron.systems.retrieval.lexical.LexicalIndex`), keeping Vanna's default of 10
results per kind. The LLM is Vanna's ``OpenAI_Chat`` with an
``openai.OpenAI`` client whose base URL is this adapter's :class:`~.proxy.LLMProxy`, so its
calls go through the project's LLM layer (cache, offline replay, meter). Intermediate SQL runs
in the benchmark's sandbox on the read-only DSN.

Reports: the SQL, billed usage (from the LLM layer's meter), and ``tables_in_context``: the
tables whose DDL text (the chunk it was trained on) was in a prompt Vanna sent.
"""

from __future__ import annotations

from typing import Any

from pytest_heron import (
    DEFAULT_STATEMENT_TIMEOUT_S,
    DEFAULT_TIMEOUT_S,
    AdapterError,
    BenchmarkContext,
    Prediction,
    Question,
)
from pytest_heron.llm import PLACEHOLDER_KEY, client_for
from pytest_heron.retrieval import LexicalIndex, parse_ddl

from .proxy import LLMProxy
from .schema_text import chunks_in, require, table_chunks

N_RESULTS = 10  # Vanna's default number of retrieved items per kind


def schema_documentation(ddl: str) -> list[str]:
    """One documentation text per schema, from its ``COMMENT ON SCHEMA`` statement."""
    return [f"Schema {name}: {text}" for name, text in parse_ddl(ddl).schema_comments.items()]


def _vanna_class() -> type:
    """Vanna's OpenAI chat mixed with an in-memory store behind Vanna's storage interface."""
    require("vanna", adapter="vanna", extra="vanna")
    base = require("vanna.legacy.base", adapter="vanna", extra="vanna")
    chat = require("vanna.legacy.openai", adapter="vanna", extra="vanna")

    class LexicalStore(base.VannaBase):  # type: ignore[misc, name-defined]
        def __init__(self, config: dict[str, Any] | None = None) -> None:
            base.VannaBase.__init__(self, config=config)
            self._kinds: dict[str, tuple[LexicalIndex, list[Any]]] = {
                kind: (LexicalIndex(), []) for kind in ("ddl", "documentation", "sql")
            }

        def _add(self, kind: str, text: str, item: Any) -> str:
            index, items = self._kinds[kind]
            index.add(text)
            items.append(item)
            return f"{len(items) - 1}-{kind}"

        def _related(self, kind: str, question: str) -> list[Any]:
            index, items = self._kinds[kind]
            return [items[i] for i in index.top(question, N_RESULTS)]

        def add_ddl(self, ddl: str, **kwargs: Any) -> str:
            return self._add("ddl", ddl, ddl)

        def add_documentation(self, documentation: str, **kwargs: Any) -> str:
            return self._add("documentation", documentation, documentation)

        def add_question_sql(self, question: str, sql: str, **kwargs: Any) -> str:
            return self._add("sql", question, {"question": question, "sql": sql})

        def get_related_ddl(self, question: str, **kwargs: Any) -> list[Any]:
            return self._related("ddl", question)

        def get_related_documentation(self, question: str, **kwargs: Any) -> list[Any]:
            return self._related("documentation", question)

        def get_similar_question_sql(self, question: str, **kwargs: Any) -> list[Any]:
            return self._related("sql", question)

        def generate_embedding(self, data: str, **kwargs: Any) -> list[float]:
            return []  # the lexical store needs none

        def get_training_data(self, **kwargs: Any) -> Any:
            import pandas as pd

            rows = [
                {"id": f"{i}-{kind}", "training_data_type": kind, "content": str(item)}
                for kind, (_, items) in self._kinds.items()
                for i, item in enumerate(items)
            ]
            return pd.DataFrame(rows)

        def remove_training_data(self, id: str, **kwargs: Any) -> bool:
            return False

        def log(self, message: str, title: str = "Info") -> None:
            pass  # Vanna prints every prompt; the trace keeps what matters

    class HeronVanna(LexicalStore, chat.OpenAI_Chat):  # type: ignore[misc, name-defined]
        def __init__(self, client: Any, config: dict[str, Any]) -> None:
            LexicalStore.__init__(self, config=config)
            chat.OpenAI_Chat.__init__(self, client=client, config=config)

    return HeronVanna


class VannaAdapter:
    """See the module docstring."""

    name = "vanna"
    version = "1"

    def __init__(self) -> None:
        self.proxy: LLMProxy | None = None
        self.vn: Any = None
        self.dsn = ""
        self.chunks: dict[str, str] = {}
        self.statement_timeout = DEFAULT_STATEMENT_TIMEOUT_S
        self.timeout = DEFAULT_TIMEOUT_S

    def prepare(self, ctx: BenchmarkContext) -> None:
        cls = _vanna_class()
        openai = require("openai", adapter="vanna", extra="vanna")
        llm = client_for(ctx, self.name, self.version)
        self.timeout = ctx.limits.timeout_s
        self.proxy = LLMProxy(llm)
        client = openai.OpenAI(
            base_url=self.proxy.url, api_key=PLACEHOLDER_KEY, max_retries=0, timeout=self.timeout
        )
        config = {
            "model": llm.config.model,
            "temperature": llm.config.temperature,
            "dialect": "PostgreSQL",
        }
        self.vn = cls(client, config)
        self.dsn = ctx.dsn
        self.statement_timeout = ctx.limits.statement_timeout_s
        self.vn.run_sql = self._run_sql
        self.vn.run_sql_is_set = True
        # vn.train(ddl=...) is add_ddl(...) after printing the whole DDL; call it directly
        self.chunks = table_chunks(ctx.schema_ddl)
        for ddl in self.chunks.values():
            self.vn.add_ddl(ddl)
        for doc in schema_documentation(ctx.schema_ddl):
            self.vn.add_documentation(doc)

    def _run_sql(self, sql: str, **kwargs: Any) -> Any:
        """Vanna's ``run_sql`` hook, for intermediate SQL: the sandbox on the read-only DSN."""
        import pandas as pd

        from pytest_heron import sandbox

        got = sandbox.execute(self.dsn, sql, timeout_s=self.statement_timeout)
        if not got.ok:
            raise AdapterError(f"intermediate SQL failed: {got.error}")
        return pd.DataFrame(got.rows[:1000], columns=got.columns)

    def generate(self, q: Question, sample: int = 0) -> Prediction:
        if self.vn is None or self.proxy is None:
            raise AdapterError("the vanna adapter was not prepared")
        recording = self.proxy.record(q.id, sample, self.timeout)
        try:  # (Vanna prints one "Using model ..." line per call; pytest captures it)
            sql = self.vn.generate_sql(q.question, allow_llm_to_see_data=True)
        except Exception as exc:
            recording.failed(exc, "vanna")
            raise
        recording.check("vanna")
        prompts = "\n".join(
            str(m.get("content") or "") for messages, _ in recording.chats() for m in messages
        )
        if not recording.exchanges:
            raise AdapterError("vanna sent no request to the LLM")
        return Prediction(
            sql=str(sql or "").strip(),
            tables_in_context=chunks_in(prompts, self.chunks),
            usage=recording.usage(),
            trace={"replies": [reply for _, reply in recording.chats()]},
        )
