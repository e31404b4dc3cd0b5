"""A recording proxy for the tools that call the LLM themselves.

:class:`LLMProxy` is an OpenAI-compatible endpoint on 127.0.0.1 in front of the project's LLM
layer (:mod:`pytest_heron.llm`). A tool that owns its HTTP client (``vanna``, ``langchain``, the
``promptquery`` subprocess) is pointed at it; each request goes through the same
:class:`~pytest_heron.llm.ChatClient` as the other LLM adapters (retries, the response cache,
offline replay, the billed-token meter), and the proxy records request and reply
(:class:`Exchange`, per question a :class:`Recording`) so the adapter can report what the tool
put in its prompts.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from pytest_heron import AdapterError, OutOfTime
from pytest_heron.llm import ChatClient, ChatReply, Meter, attach_usage

__all__ = ["Exchange", "LLMProxy", "Recording", "completion_body"]


# -- the recording proxy ----------------------------------------------------------------------


@dataclass
class Exchange:
    """One chat request the tool sent and the completion body it got back (None on error)."""

    request: dict[str, Any]
    response: dict[str, Any] | None
    error: str | None = None
    timed_out: bool = False  # the error was the question running out of time


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
        an endpoint that failed after retries), else do nothing. Out of time, it is an
        :class:`~pytest_heron.core.errors.OutOfTime` (``adapter_timeout``, like every adapter's)."""
        first = next((ex for ex in self.exchanges if ex.error), None)
        if first is not None:
            kind = OutOfTime if first.timed_out else AdapterError
            exc = kind(f"{tool}: the LLM call failed: {first.error}")
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


class _QuietServer(ThreadingHTTPServer):
    """A server that keeps quiet about a client that went away: the tool that gave up on a
    request is not news, and a traceback on stderr would land under the next question."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            return
        super().handle_error(request, client_address)


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
        self._server = _QuietServer(("127.0.0.1", 0), self._handler())
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
            late = isinstance(exc, TimeoutError)
            with self._lock:
                rec.exchanges.append(Exchange(body, None, message, timed_out=late))
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
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(raw)))
                    self.end_headers()
                    self.wfile.write(raw)
                except OSError:  # the tool gave up on this request and closed its connection
                    self.close_connection = True

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
