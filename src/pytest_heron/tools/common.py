"""What the tool adapters share: optional-extra imports, the schema cut per table, and a
recording proxy for tools that call the LLM themselves.

- :func:`require` imports a tool's package or fails with the exact pip command to run.
- :func:`split_statements`, :func:`table_chunks`, :func:`table_comments`: the benchmark's DDL
  (``BenchmarkContext.schema_ddl``, statements with ``COMMENT ON`` lines) cut into one text per
  table, the way a retrieval-augmented tool is meant to be trained on it.
- :func:`tables_mentioned`: which known tables a text names (schema-qualified), in order.
- :class:`LLMProxy`: an OpenAI-compatible forwarding proxy on 127.0.0.1. A tool that owns its
  HTTP client (``vanna``, ``langchain``, the ``promptquery`` subprocess) is pointed at it; the
  proxy forwards every request unchanged to the real endpoint and records request and response,
  so the adapter can report the tokens the endpoint billed and what the tool put in its prompts.
"""

from __future__ import annotations

import importlib
import json
import re
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import ModuleType
from typing import Any

from pytest_heron.errors import AdapterError

PLACEHOLDER_KEY = "heron-no-key"


def api_key() -> str:
    """``HERON_API_KEY``, else ``OPENAI_API_KEY``, else a placeholder (local servers need none)."""
    import os

    return os.environ.get("HERON_API_KEY") or os.environ.get("OPENAI_API_KEY") or PLACEHOLDER_KEY


def require(module: str, *, adapter: str, extra: str) -> ModuleType:
    """Import ``module`` or raise AdapterError naming the extra that provides it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise AdapterError(
            f"the {adapter} adapter needs the optional dependency {module!r} ({exc}); "
            f"install it with: pip install 'pytest-heron[{extra}]'"
        ) from None


def need_endpoint(options: Any, adapter: str) -> tuple[str, str]:
    """The ``(endpoint, model)`` options, or AdapterError saying which flag is missing."""
    endpoint, model = options.get("endpoint"), options.get("model")
    if not endpoint:
        raise AdapterError(
            f"the {adapter} adapter needs --heron-endpoint (an OpenAI-compatible base URL)"
        )
    if not model:
        raise AdapterError(f"the {adapter} adapter needs --heron-model (the model name)")
    return str(endpoint), str(model)


# -- the schema, table by table ---------------------------------------------------------------

_QUALIFIED = re.compile(r"^\s*(?:CREATE\s+TABLE|COMMENT\s+ON\s+TABLE)\s+([\w.]+)", re.I)
_COLUMN_COMMENT = re.compile(r"^\s*COMMENT\s+ON\s+COLUMN\s+(\w+)\.(\w+)\.(\w+)", re.I)
_TABLE_COMMENT = re.compile(r"^\s*COMMENT\s+ON\s+TABLE\s+([\w.]+)\s+IS\s+'(.*)'\s*$", re.I | re.S)


def split_statements(ddl: str) -> list[str]:
    """The statements of ``ddl`` (without their ``;``), skipping ``--`` comment lines; a ``;``
    or ``--`` inside a quoted string does not count.

    >>> split_statements("-- hi\\nCREATE TABLE a.b (x int);\\nCOMMENT ON TABLE a.b IS 'p; q';")
    ['CREATE TABLE a.b (x int)', "COMMENT ON TABLE a.b IS 'p; q'"]
    """
    out: list[str] = []
    buf: list[str] = []
    i, n = 0, len(ddl)
    quoted = False
    while i < n:
        ch = ddl[i]
        if quoted:
            buf.append(ch)
            if ch == "'":
                if i + 1 < n and ddl[i + 1] == "'":
                    buf.append("'")
                    i += 1
                else:
                    quoted = False
        elif ch == "'":
            quoted = True
            buf.append(ch)
        elif ch == "-" and ddl.startswith("--", i):
            end = ddl.find("\n", i)
            i = n if end < 0 else end
            continue
        elif ch == ";":
            text = "".join(buf).strip()
            if text:
                out.append(text)
            buf = []
        else:
            buf.append(ch)
        i += 1
    tail = "".join(buf).strip()
    if tail:
        out.append(tail)
    return out


def _owner(statement: str) -> str | None:
    m = _QUALIFIED.match(statement)
    if m:
        return m.group(1).lower()
    m = _COLUMN_COMMENT.match(statement)
    if m:
        return f"{m.group(1)}.{m.group(2)}".lower()
    return None


def table_chunks(ddl: str) -> dict[str, str]:
    """One DDL text per table: its ``CREATE TABLE`` and its ``COMMENT ON`` statements, each
    ending in ``;``, keyed by the schema-qualified name, in the order the tables are created.

    >>> table_chunks("CREATE SCHEMA s; CREATE TABLE s.t (x int); COMMENT ON COLUMN s.t.x IS 'n';")
    {'s.t': "CREATE TABLE s.t (x int);\\nCOMMENT ON COLUMN s.t.x IS 'n';"}
    """
    parts: dict[str, list[str]] = {}
    for statement in split_statements(ddl):
        owner = _owner(statement)
        if owner is not None:
            parts.setdefault(owner, []).append(statement + ";")
    return {name: "\n".join(stmts) for name, stmts in parts.items()}


def table_comments(ddl: str) -> dict[str, str]:
    """The ``COMMENT ON TABLE`` text of each table (quotes unescaped)."""
    out: dict[str, str] = {}
    for statement in split_statements(ddl):
        m = _TABLE_COMMENT.match(statement)
        if m:
            out[m.group(1).lower()] = m.group(2).replace("''", "'")
    return out


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
    """One request the tool sent and what the endpoint answered."""

    path: str
    request: Any
    status: int
    response: Any  # the parsed JSON body, or None when it was not JSON
    raw: bytes = field(default=b"", repr=False)


@dataclass
class Recording:
    """The exchanges of one question."""

    exchanges: list[Exchange] = field(default_factory=list)

    def usage(self) -> dict[str, int]:
        """Billed tokens summed from each response's ``usage`` (``calls`` counts requests)."""
        prompt = completion = 0
        for ex in self.exchanges:
            usage = ex.response.get("usage") if isinstance(ex.response, dict) else None
            if isinstance(usage, dict):
                prompt += int(usage.get("prompt_tokens") or 0)
                completion += int(usage.get("completion_tokens") or 0)
        return {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "calls": len(self.exchanges),
        }

    def chats(self) -> Iterator[tuple[list[dict[str, Any]], str]]:
        """``(messages, reply text)`` of each successful chat-completion exchange."""
        for ex in self.exchanges:
            if not ex.path.endswith("/chat/completions") or not isinstance(ex.request, dict):
                continue
            if ex.status != 200 or not isinstance(ex.response, dict):
                continue
            choices = ex.response.get("choices") or [{}]
            message = choices[0].get("message") or {}
            yield list(ex.request.get("messages") or []), str(message.get("content") or "")


class LLMProxy:
    """A forwarding proxy on 127.0.0.1 for one adapter instance; see the module docstring.

    ``url`` ends in ``/v1`` like any OpenAI-compatible base URL; a request to ``url + X`` is
    sent to ``upstream + X`` with the same body and ``Authorization`` header. Use
    :meth:`record` around one question to get its :class:`Recording`.
    """

    def __init__(self, upstream: str, *, timeout_s: float = 120.0) -> None:
        self.upstream = upstream.rstrip("/")
        self.timeout_s = timeout_s
        self._current = Recording()
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

    def record(self) -> Recording:
        """Start a fresh recording (the previous one is kept by whoever holds it)."""
        with self._lock:
            self._current = Recording()
            return self._current

    def _forward(self, method: str, path: str, body: bytes, headers: dict[str, str]) -> Exchange:
        import httpx

        suffix = path[3:] if path.startswith("/v1") else path
        try:
            reply = httpx.request(
                method,
                self.upstream + suffix,
                content=body if method == "POST" else None,
                headers=headers,
                timeout=self.timeout_s,
            )
            status, raw = reply.status_code, reply.content
        except httpx.HTTPError as exc:
            status = 502
            raw = json.dumps({"error": {"message": f"heron proxy: {exc!r}"}}).encode()
        try:
            parsed = json.loads(raw) if raw else None
        except ValueError:
            parsed = None
        try:
            request = json.loads(body) if body else None
        except ValueError:
            request = None
        return Exchange(path=suffix, request=request, status=status, response=parsed, raw=raw)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _relay(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                headers = {"Content-Type": "application/json"}
                auth = self.headers.get("Authorization")
                if auth:
                    headers["Authorization"] = auth
                ex = proxy._forward(method, self.path, body, headers)
                if method == "POST":
                    with proxy._lock:
                        proxy._current.exchanges.append(ex)
                raw = ex.raw
                self.send_response(ex.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def do_GET(self) -> None:
                self._relay("GET")

            def do_POST(self) -> None:
                self._relay("POST")

        return Handler


# -- a small lexical index (the stand-in for a tool's vector store) ---------------------------

_WORD = re.compile(r"[a-z0-9]+")


def words(text: str) -> list[str]:
    """Lower-case alphanumeric words; ``snake_case`` and ``schema.table`` split into parts.

    >>> words("COMMENT ON TABLE sales.order_items IS 'Line items'")
    ['comment', 'on', 'table', 'sales', 'order', 'items', 'is', 'line', 'items']
    """
    return _WORD.findall(text.lower())


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
        idf = {t: math.log(1 + (n - self.df[t] + 0.5) / (self.df[t] + 0.5)) for t in q if t in self.df}
        out = []
        for tf, length in zip(self.docs, self.lengths, strict=True):
            norm = self.K1 * (1 - self.B + self.B * length / avg)
            out.append(
                sum(idf[t] * tf[t] * (self.K1 + 1) / (tf[t] + norm) for t in idf if t in tf)
            )
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
