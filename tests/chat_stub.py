"""A scripted OpenAI-compatible chat-completions endpoint on 127.0.0.1, for the LLM adapter tests.

It speaks real HTTP on a real socket, so the client under test (the ``openai`` SDK or any other)
is exercised unpatched. Each POST to ``/v1/chat/completions`` is recorded in :attr:`requests`
(the parsed JSON body; its headers in :attr:`headers`) and answered by the *responder*: a
function of the request body, or a script (a list of replies consumed in order). A reply is

- a ``dict``: sent as the JSON body with status 200 (build one with :func:`completion`);
- a :class:`Raw`: any status, headers and body (for 429s, 500s, malformed JSON, empty bodies).

Use it as a context manager::

    with ChatStub([completion("SELECT 1", prompt_tokens=10, completion_tokens=2)]) as stub:
        client = openai.OpenAI(base_url=stub.url, api_key="test")
        ...
        assert len(stub.requests) == 1

With ``cors=True`` it answers like a provider that browsers may call: ``OPTIONS`` preflights get
the ``Access-Control-Allow-*`` headers (and are counted in :attr:`preflights`), and every reply
carries ``Access-Control-Allow-Origin: *`` (the browser runner's tests use this).

The stub can also run as a separate process (``python tests/chat_stub.py PORT SCRIPT.json``) for
tests that need the endpoint to outlive or be killed independently of the pytest process.
"""

from __future__ import annotations

import json
import sys
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
    ) -> None:
        self.cors = cors
        self.preflights = 0
        self.models = None if models is None else list(models)  # None: no GET /models (404)
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
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """The base URL to give an OpenAI-compatible client (ends in ``/v1``)."""
        return f"http://127.0.0.1:{self.port}/v1"

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


def _main(argv: list[str]) -> None:
    """``python chat_stub.py PORT_FILE SCRIPT.json``: serve a script of completion bodies until
    killed, writing the chosen port to PORT_FILE and appending each request to PORT_FILE.log."""
    port_file, script_file = argv
    with open(script_file) as f:
        script = json.load(f)
    stub = ChatStub(script)
    log = open(port_file + ".log", "a")  # noqa: SIM115

    original = stub._responder

    def logged(body: dict[str, Any]) -> Reply:
        log.write(json.dumps(body) + "\n")
        log.flush()
        return original(body)

    stub._responder = logged
    stub.start()
    with open(port_file, "w") as f:
        f.write(str(stub.port))
    threading.Event().wait()


if __name__ == "__main__":
    _main(sys.argv[1:])
