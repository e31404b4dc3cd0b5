"""What the tool adapters share: optional-extra imports, the schema cut per table, and a
recording proxy for tools that call the LLM themselves.

- :func:`require` imports a tool's package or fails with the exact pip command to run.
- :func:`table_chunks`, :func:`table_comments`, :func:`schema_model`: the benchmark's DDL
  (``BenchmarkContext.schema_ddl``, statements with ``COMMENT ON`` lines, read by
  :mod:`pytest_heron.dataset.catalogue`) cut into one text per table, the way a
  retrieval-augmented tool is meant to be trained on it, and as tables with their columns and
  comments.
- :func:`tables_mentioned`: which known tables a text names (schema-qualified), in order.
- :class:`LLMProxy`: an OpenAI-compatible endpoint on 127.0.0.1 in front of the project's LLM
  layer (:mod:`pytest_heron.llm`). A tool that owns its HTTP client (``vanna``, ``langchain``,
  the ``promptquery`` subprocess) is pointed at it; each request goes through the same
  :class:`~pytest_heron.llm.ChatClient` as the other LLM adapters (retries, the response cache,
  offline replay, the billed-token meter), and the proxy records request and reply so the
  adapter can report what the tool put in its prompts.
"""

from __future__ import annotations

import importlib
import json
import re
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import ModuleType
from typing import Any

from pytest_heron.dataset.catalogue import TableInfo, parse_ddl, split_statements, statement_table
from pytest_heron.errors import AdapterError
from pytest_heron.systems.llm.client import ChatClient, ChatReply, Meter, attach_usage
from pytest_heron.systems.retrieval.rankers import words


def require(module: str, *, adapter: str, extra: str) -> ModuleType:
    """Import ``module`` or raise AdapterError naming the extra that provides it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise AdapterError(
            f"the {adapter} adapter needs the optional dependency {module!r} ({exc}); "
            f"install it with: pip install 'pytest-heron[{extra}]'"
        ) from None


# -- the schema, table by table ---------------------------------------------------------------


def table_chunks(ddl: str) -> dict[str, str]:
    """One DDL text per table: its ``CREATE TABLE`` and its ``COMMENT ON`` statements, each
    ending in ``;``, keyed by the schema-qualified name, in the order the tables are created.

    >>> table_chunks("CREATE SCHEMA s; CREATE TABLE s.t (x int); COMMENT ON COLUMN s.t.x IS 'n';")
    {'s.t': "CREATE TABLE s.t (x int);\\nCOMMENT ON COLUMN s.t.x IS 'n';"}
    """
    parts: dict[str, list[str]] = {}
    for statement in split_statements(ddl):
        owner = statement_table(statement)
        if owner is not None:
            parts.setdefault(owner, []).append(statement + ";")
    return {name: "\n".join(stmts) for name, stmts in parts.items()}


def table_comments(ddl: str) -> dict[str, str]:
    """The ``COMMENT ON TABLE`` text of each table (quotes unescaped)."""
    return parse_ddl(ddl).table_comments


def tables_mentioned(text: str, known: Iterable[str]) -> list[str]:
    """The known schema-qualified tables named in ``text`` (as whole words), sorted.

    >>> tables_mentioned("SELECT * FROM sales.orders JOIN sales.order_items", ["sales.orders",
    ...     "sales.order_items", "sales.order", "core.tenants"])
    ['sales.order_items', 'sales.orders']
    """
    lowered = text.lower()
    found = []
    for name in sorted(set(known)):
        if re.search(rf"(?<![\w.]){re.escape(name.lower())}(?![\w])", lowered):
            found.append(name)
    return found


# -- the recording proxy ----------------------------------------------------------------------


@dataclass
class Exchange:
    """One chat request the tool sent and the completion body it got back (None on error)."""

    request: dict[str, Any]
    response: dict[str, Any] | None
    error: str | None = None


@dataclass
class Recording:
    """The exchanges of one question and the meter of its billed usage."""

    question_id: str
    sample: int
    deadline: float | None
    meter: Meter = field(default_factory=Meter)
    exchanges: list[Exchange] = field(default_factory=list)

    def usage(self) -> dict[str, int]:
        """The ``Prediction.usage`` dict (see :class:`pytest_heron.systems.llm.client.Meter`)."""
        return self.meter.usage()

    def errors(self) -> list[str]:
        return [ex.error for ex in self.exchanges if ex.error]

    def check(self, tool: str) -> None:
        """Raise AdapterError with the first LLM-layer error the tool met (a cache miss offline,
        an endpoint that failed after retries), else do nothing."""
        errors = self.errors()
        if errors:
            exc = AdapterError(f"{tool}: the LLM call failed: {errors[0]}")
            attach_usage(exc, self.meter)
            raise exc

    def failed(self, exc: BaseException, tool: str) -> None:
        """For an ``except`` block: raise the LLM layer's error if there was one, else put the
        billed usage on ``exc`` (``llm.attach_usage``) so the caller can re-raise it."""
        self.check(tool)
        attach_usage(exc, self.meter)

    def chats(self) -> Iterator[tuple[list[dict[str, Any]], str]]:
        """``(messages, reply text)`` of each answered exchange, in order."""
        for ex in self.exchanges:
            if ex.response is None:
                continue
            message = ex.response["choices"][0]["message"]
            yield list(ex.request.get("messages") or []), str(message.get("content") or "")


def completion_body(reply: ChatReply, model: str) -> dict[str, Any]:
    """A ``chat.completion`` response body carrying ``reply`` and what it billed."""
    return {
        "id": "chatcmpl-heron",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": reply.message(),
                "finish_reason": reply.finish_reason or "stop",
            }
        ],
        "usage": {
            "prompt_tokens": reply.prompt_tokens,
            "completion_tokens": reply.completion_tokens,
            "total_tokens": reply.prompt_tokens + reply.completion_tokens,
        },
    }


class LLMProxy:
    """An OpenAI-compatible endpoint on 127.0.0.1 that answers through a
    :class:`~pytest_heron.llm.ChatClient`; see the module docstring.

    ``url`` ends in ``/v1`` like any OpenAI-compatible base URL. Each ``POST
    /v1/chat/completions`` becomes ``client.chat(messages, tools=..., params=<every other
    request field but model and stream>)`` keyed on the question and sample given to
    :meth:`record`, so the tool's calls are retried, cached, replayable with ``--heron-offline``
    and metered like every other LLM adapter's. A failed call answers HTTP 400 with the error
    message (not retried by the tool: the client already retried) and is kept in the recording.
    Streaming requests are refused.
    """

    def __init__(self, client: ChatClient) -> None:
        self.client = client
        self._current = Recording("", 0, None)
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def record(
        self, question_id: str, sample: int = 0, timeout_s: float | None = None
    ) -> Recording:
        """Start the recording of one question (calls are cached under its id and sample)."""
        deadline = time.monotonic() + timeout_s if timeout_s else None
        with self._lock:
            self._current = Recording(question_id, sample, deadline)
            return self._current

    def answer(self, body: Any) -> tuple[int, dict[str, Any]]:
        """The status and JSON body to send back for one chat-completions request body."""
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return 400, {"error": {"message": "heron proxy: a JSON body with messages expected"}}
        if body.get("stream"):
            return 400, {"error": {"message": "heron proxy: streaming is not supported"}}
        with self._lock:
            rec = self._current
        params = {
            k: v for k, v in body.items() if k not in ("model", "messages", "tools", "stream")
        }
        try:
            reply = self.client.chat(
                body["messages"],
                question_id=rec.question_id,
                sample=rec.sample,
                tools=body.get("tools") or None,
                meter=rec.meter,
                deadline=rec.deadline,
                params=params,
            )
        except AdapterError as exc:
            message = f"{type(exc).__name__}: {exc}"
            with self._lock:
                rec.exchanges.append(Exchange(body, None, message))
            return 400, {"error": {"message": message, "type": "heron_proxy"}}
        out = completion_body(reply, self.client.config.model)
        with self._lock:
            rec.exchanges.append(Exchange(body, out))
        return 200, out

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _send(self, status: int, doc: dict[str, Any]) -> None:
                raw = json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/models"):
                    model = {"id": proxy.client.config.model, "object": "model"}
                    self._send(200, {"object": "list", "data": [model]})
                else:
                    self._send(404, {"error": {"message": "heron proxy: not found"}})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, {"error": {"message": "heron proxy: not found"}})
                    return
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = None
                self._send(*proxy.answer(body))

        return Handler


# -- a small lexical index (the stand-in for a tool's vector store) ---------------------------

FALLBACK_TABLES = 5  # tables kept when a schema-linking reply names none


def fk_lines(pairs: list[tuple[str, str]]) -> str:
    """Foreign keys as ``child.col = parent.col`` lines for a prompt."""
    return "\n".join(f"{a} = {b}" for a, b in pairs) or "(none)"


def fks_among(pairs: list[tuple[str, str]], tables: Iterable[str]) -> list[tuple[str, str]]:
    """The foreign keys whose two ends are both in ``tables``."""
    keep = set(tables)
    return [p for p in pairs if all(col.rsplit(".", 1)[0] in keep for col in p)]


def stem(word: str) -> str:
    """A crude plural folding so ``currencies`` meets ``currency`` and ``orders`` ``order``.

    >>> [stem(w) for w in ["currencies", "orders", "status", "address", "is"]]
    ['currency', 'order', 'status', 'address', 'is']
    """
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


class LexicalIndex:
    """Documents ranked for a query by Okapi BM25 (k1 = 1.2, b = 0.75) over :func:`words`
    folded by :func:`stem`; ties keep insertion order. Pure, deterministic, no model to
    download.

    >>> ix = LexicalIndex(["orders of customers", "stock levels", "customer invoices"])
    >>> ix.top("which customers have invoices", 2)
    [2, 0]
    """

    K1 = 1.2
    B = 0.75

    def __init__(self, docs: Iterable[str] = ()) -> None:
        self.docs: list[dict[str, int]] = []
        self.lengths: list[int] = []
        self.df: dict[str, int] = {}
        for doc in docs:
            self.add(doc)

    def add(self, doc: str) -> int:
        tf: dict[str, int] = {}
        toks = [stem(w) for w in words(doc)]
        for t in toks:
            tf[t] = tf.get(t, 0) + 1
        for t in tf:
            self.df[t] = self.df.get(t, 0) + 1
        self.docs.append(tf)
        self.lengths.append(len(toks))
        return len(self.docs) - 1

    def scores(self, query: str) -> list[float]:
        import math

        n = len(self.docs)
        if n == 0:
            return []
        avg = sum(self.lengths) / n or 1.0
        q = sorted({stem(w) for w in words(query)})
        idf = {
            t: math.log(1 + (n - self.df[t] + 0.5) / (self.df[t] + 0.5)) for t in q if t in self.df
        }
        out = []
        for tf, length in zip(self.docs, self.lengths, strict=True):
            norm = self.K1 * (1 - self.B + self.B * length / avg)
            out.append(sum(idf[t] * tf[t] * (self.K1 + 1) / (tf[t] + norm) for t in idf if t in tf))
        return out

    def top(self, query: str, n: int) -> list[int]:
        """Indexes of the ``n`` best documents with a positive score, best first."""
        scored = self.scores(query)
        order = sorted(range(len(scored)), key=lambda i: (-scored[i], i))
        return [i for i in order[:n] if scored[i] > 0]


_CREATE = re.compile(r"CREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?\"?([\w.]+)", re.I)


def created_tables(text: str) -> list[str]:
    """The tables whose ``CREATE TABLE`` statement appears in ``text``, sorted, lower-case."""
    return sorted({m.group(1).replace('"', "").lower() for m in _CREATE.finditer(text)})


# -- a structured view of the schema, for the published methods' own schema formats -----------


def schema_model(ddl: str) -> dict[str, TableInfo]:
    """Every table of ``ddl`` with its comment and its columns (definition and comment), in
    creation order. Pure.

    >>> m = schema_model("CREATE TABLE s.t (id bigint PRIMARY KEY, k text CHECK (k IN ('a', 'b')),"
    ...     " UNIQUE (k)); COMMENT ON TABLE s.t IS 'T.'; COMMENT ON COLUMN s.t.k IS 'Kind.';")
    >>> m["s.t"].comment, [(c.name, c.definition, c.comment) for c in m["s.t"].columns]
    ('T.', [('id', 'bigint PRIMARY KEY', ''), ('k', "text CHECK (k IN ('a', 'b'))", 'Kind.')])
    """
    return parse_ddl(ddl).tables


FOREIGN_KEYS_SQL = """
SELECT sn.nspname || '.' || s.relname || '.' || sa.attname,
       tn.nspname || '.' || t.relname || '.' || ta.attname
FROM pg_constraint c
JOIN pg_class s ON s.oid = c.conrelid JOIN pg_namespace sn ON sn.oid = s.relnamespace
JOIN pg_class t ON t.oid = c.confrelid JOIN pg_namespace tn ON tn.oid = t.relnamespace
JOIN LATERAL unnest(c.conkey, c.confkey) AS k(src, dst) ON true
JOIN pg_attribute sa ON sa.attrelid = c.conrelid AND sa.attnum = k.src
JOIN pg_attribute ta ON ta.attrelid = c.confrelid AND ta.attnum = k.dst
WHERE c.contype = 'f'
ORDER BY 1, 2
"""


def foreign_keys(dsn: str, tables: Iterable[str]) -> list[tuple[str, str]]:
    """The foreign-key column pairs (``schema.table.column``, referencing first) among
    ``tables``, read from the database's catalog on the read-only DSN, sorted."""
    import psycopg

    wanted = set(tables)
    with psycopg.connect(dsn, connect_timeout=10) as conn:
        rows = conn.execute(FOREIGN_KEYS_SQL).fetchall()
    return [
        (str(a), str(b))
        for a, b in rows
        if str(a).rsplit(".", 1)[0] in wanted and str(b).rsplit(".", 1)[0] in wanted
    ]
