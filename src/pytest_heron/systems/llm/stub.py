"""A deterministic OpenAI-compatible chat-completions endpoint on 127.0.0.1 (``heron stub-llm``).

It lets every LLM example run without a key or a network: the LLM adapters, a vendor's own
adapter and the test suite talk to it over real HTTP, so the client under test (the ``openai``
SDK or any other) runs unpatched.

Two ways to answer:

- :func:`oracle` (what ``heron stub-llm`` serves): for a built-in question it answers gold's SQL,
  except for every fifth question (``q005``, ``q010``, ...), which gets ``SELECT 1``, so a run
  shows both verdicts (80 % on the built-in set). It plays the agent's loop too: with tools it
  calls ``run_sql_query`` then ``results_ok``; asked for JSON it replies with the same actions.
  Billed usage is a deterministic count (about four characters a token). Text it does not
  recognise gets ``SELECT 1``. It is a stand-in for a model, never a result: its model name is
  ``heron-stub``.
- a script or a function of the request (the test suite's use): each POST to
  ``/v1/chat/completions`` is recorded in :attr:`ChatStub.requests` (its headers in
  :attr:`ChatStub.headers`) and answered by the *responder*: a function of the request body, or
  a list of replies consumed in order. A reply is a ``dict`` sent as the JSON body with status
  200 (build one with :func:`completion`) or a :class:`Raw`: any status, headers and body.

Use it as a context manager::

    with ChatStub([completion("SELECT 1", prompt_tokens=10, completion_tokens=2)]) as stub:
        client = openai.OpenAI(base_url=stub.url, api_key="test")
        ...
        assert len(stub.requests) == 1

With ``cors=True`` it answers like a provider that browsers may call: ``OPTIONS`` preflights get
the ``Access-Control-Allow-*`` headers (and are counted in :attr:`ChatStub.preflights`), and every
reply carries ``Access-Control-Allow-Origin: *``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Raw:
    """A reply given exactly: status, body bytes and extra headers."""

    status: int
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)


Reply = dict[str, Any] | Raw
DEFAULT_MODELS = ("stub-model", "m")  # what GET /models lists (the tests' model names)
Responder = Callable[[dict[str, Any]], Reply]


def completion(
    content: str | None,
    *,
    prompt_tokens: int = 0,
    completion_tokens: int = 0,
    tool_calls: Sequence[tuple[str, dict[str, Any]]] = (),
    model: str = "stub-model",
    finish_reason: str | None = None,
    cached_tokens: int | None = None,
    reasoning_tokens: int | None = None,
) -> dict[str, Any]:
    """A chat.completion body with one choice; ``tool_calls`` are ``(name, arguments)`` pairs.
    ``cached_tokens`` / ``reasoning_tokens`` add ``usage.prompt_tokens_details.cached_tokens`` /
    ``usage.completion_tokens_details.reasoning_tokens`` (parts of the two counts, as OpenAI
    reports them); left out when None, as providers without them do."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = [
            {
                "id": f"call_{i}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
            for i, (name, args) in enumerate(tool_calls)
        ]
    usage: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    if cached_tokens is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cached_tokens}
    if reasoning_tokens is not None:
        usage["completion_tokens_details"] = {"reasoning_tokens": reasoning_tokens}
    return {
        "id": "chatcmpl-stub",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": finish_reason or ("tool_calls" if tool_calls else "stop"),
            }
        ],
        "usage": usage,
    }


def rate_limited(retry_after: float = 0) -> Raw:
    """A 429 reply, the way providers send it."""
    body = json.dumps({"error": {"message": "rate limited", "type": "rate_limit"}}).encode()
    return Raw(429, body, {"Retry-After": f"{retry_after:g}"})


class ChatStub:
    """The endpoint; see the module docstring."""

    def __init__(
        self,
        responder: Responder | Sequence[Reply],
        models: Sequence[str] | None = DEFAULT_MODELS,
        *,
        cors: bool = False,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.models = None if models is None else list(models)  # None: no GET /models (404)
        self.cors = cors
        self.preflights = 0
        if callable(responder):
            self._responder: Responder = responder
        else:
            script = list(responder)
            lock = threading.Lock()

            def scripted(_body: dict[str, Any]) -> Reply:
                with lock:
                    if not script:
                        return Raw(500, b'{"error": {"message": "chat stub: script exhausted"}}')
                    return script.pop(0)

            self._responder = scripted
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []  # each request's headers, names lower-cased
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer((host, port), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """The base URL to give an OpenAI-compatible client (ends in ``/v1``)."""
        host = str(self._server.server_address[0])
        return f"http://{host}:{self.port}/v1"

    def start(self) -> ChatStub:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> ChatStub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _send(self, reply: Reply) -> None:
                if isinstance(reply, Raw):
                    status, body, headers = reply.status, reply.body, dict(reply.headers)
                    headers.setdefault("Content-Type", "application/json")
                else:
                    status, body = 200, json.dumps(reply).encode()
                    headers = {"Content-Type": "application/json"}
                self.send_response(status)
                if stub.cors:
                    headers.setdefault("Access-Control-Allow-Origin", "*")
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_OPTIONS(self) -> None:
                if not stub.cors:
                    self._send(Raw(405, b'{"error": {"message": "method not allowed"}}'))
                    return
                with stub._lock:
                    stub.preflights += 1
                allow = {
                    "Access-Control-Allow-Methods": "GET, POST, OPTIONS",
                    "Access-Control-Allow-Headers": "authorization, content-type",
                    "Access-Control-Max-Age": "600",
                }
                self._send(Raw(204, b"", allow))

            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/models") and stub.models is not None:
                    listed = [{"id": name, "object": "model"} for name in stub.models]
                    self._send({"object": "list", "data": listed})
                else:
                    self._send(Raw(404, b'{"error": {"message": "not found"}}'))

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(Raw(404, b'{"error": {"message": "not found"}}'))
                    return
                try:
                    body = json.loads(raw)
                except json.JSONDecodeError:
                    self._send(Raw(400, b'{"error": {"message": "invalid JSON"}}'))
                    return
                with stub._lock:
                    stub.requests.append(body)
                    stub.headers.append({k.lower(): v for k, v in self.headers.items()})
                try:
                    reply = stub._responder(body)
                except Exception as exc:  # a bug in a test's responder: say so to the client
                    message = json.dumps({"error": {"message": f"chat stub responder: {exc!r}"}})
                    reply = Raw(500, message.encode())
                self._send(reply)

        return Handler


STUB_MODEL = "heron-stub"


def _tokens(text: str) -> int:
    return max(1, (len(text) + 3) // 4)


def oracle(questions: dict[str, str] | None = None) -> Responder:
    """The deterministic responder of ``heron stub-llm`` (see the module docstring).
    ``questions`` maps a question's English to the SQL to answer (default: the built-in set,
    gold's SQL, ``SELECT 1`` for every fifth question)."""
    if questions is None:
        from pytest_heron.dataset import load_questions

        questions = {}
        for q in load_questions(None):
            number = int("".join(ch for ch in q.id if ch.isdigit()) or "0")
            questions[q.question.strip()] = "SELECT 1" if number % 5 == 0 else q.gold_sql.strip()
    answers = dict(questions)

    def respond(body: dict[str, Any]) -> Reply:
        messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
        sql = "SELECT 1"
        for message in reversed(messages):
            content = message.get("content")
            known = isinstance(content, str) and content.strip() in answers
            if message.get("role") == "user" and known:
                sql = answers[str(content).strip()]
                break
        asked = sum(_tokens(str(m.get("content") or "")) for m in messages)
        answered = any(m.get("role") == "assistant" for m in messages)
        tools = {
            str((t.get("function") or {}).get("name"))
            for t in body.get("tools") or []
            if isinstance(t, dict)
        }
        if "run_sql_query" in tools:  # the agent, tools mode: query once, then submit
            call = ("results_ok", {}) if answered else ("run_sql_query", {"sql": sql})
            return completion(
                None,
                tool_calls=[call],
                prompt_tokens=asked,
                completion_tokens=_tokens(sql),
                model=STUB_MODEL,
            )
        if body.get("response_format"):  # the agent, grammar mode: the same, as JSON replies
            action = (
                {"action": "results_ok", "sql": ""}
                if answered
                else {"action": "run_sql_query", "sql": sql}
            )
            text = json.dumps(action)
        else:
            text = f"```sql\n{sql}\n```"
        return completion(
            text, prompt_tokens=asked, completion_tokens=_tokens(text), model=STUB_MODEL
        )

    return respond


def serve(host: str = "127.0.0.1", port: int = 0, *, cors: bool = False) -> ChatStub:
    """Start the oracle endpoint (not yet serving until :meth:`ChatStub.start`); with ``cors``
    it answers browsers' preflights and allows any origin (the browser runner's page)."""
    return ChatStub(oracle(), models=(STUB_MODEL,), cors=cors, host=host, port=port)
