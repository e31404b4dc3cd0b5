"""An OpenAI-compatible chat client with a persistent response cache and a billed-token meter.

Every LLM adapter (``raw-llm``, ``agent``, and tool adapters built on this module) talks to its
endpoint through :class:`ChatClient`, so every call is retried, cached, replayable offline and
metered the same way.

Public API (stable; adapters in other modules build on it):

- :class:`LLMConfig` -- endpoint, model, temperature, ``max_tokens``, per-request timeout, retry
  policy, key.
  ``LLMConfig.from_context(ctx)`` reads the ``--heron-*`` options from the context.
- :class:`ChatClient` -- ``client.chat(messages, tools=None, question_id=..., sample=0,
  meter=..., deadline=..., params=None)`` returns a :class:`ChatReply`. ``client_for(ctx, name,
  version)`` builds one from a :class:`~pytest_heron.core.types.BenchmarkContext`.
- :class:`ChatReply` -- ``content``, ``tool_calls`` (:class:`ToolCall`), ``finish_reason``,
  billed ``prompt_tokens`` / ``completion_tokens``, ``cached`` (replayed from the cache),
  ``latency_s`` (a replayed reply keeps the latency it had when it was recorded);
  ``message()`` is the assistant message to append to a conversation.
- :class:`Meter` -- sums what one question's calls billed: ``meter.usage()`` is the dict to put
  in ``Prediction.usage`` (``prompt_tokens``, ``completion_tokens``, ``calls``, ``cached_calls``,
  ``llm_ms``, and ``replayed_ms``: the recorded latency of the replayed calls, which the scorer
  adds to the question's latency); ``meter.latencies_s`` lists each call's latency.
- :class:`ResponseCache` -- the SQLite cache; :func:`cache_key` -- its key.
- :func:`extract_sql` -- the SQL in a model's free-text answer (from :mod:`.extract`).
- :func:`attach_usage` -- put a meter's usage on an error before re-raising it, so the runner
  records what a failed question billed.
- :func:`deadline_after` -- a ``time.monotonic()`` deadline from a per-question time limit.
- Errors, all :class:`~pytest_heron.core.errors.AdapterError` (so a question fails as
  ``adapter_error`` with the message): :class:`LLMError` (the endpoint failed after retries, or
  answered something unusable), :class:`LLMTimeout` (out of time: also a ``TimeoutError``, so
  the question is ``adapter_timeout``), :class:`CacheMiss` (offline and not cached),
  :class:`ToolsUnsupported` (the endpoint rejected a request with tools: HTTP 404 or 422, or
  a 400 whose message mentions tools or functions).

A typical adapter::

    def prepare(self, ctx):
        self.client = client_for(ctx, self.name, self.version)
        self.limit = ctx.limits.timeout_s

    def generate(self, q, sample=0):
        meter, deadline = Meter(), deadline_after(self.limit)
        reply = self.client.chat(messages, question_id=q.id, sample=sample, meter=meter,
                                 deadline=deadline)
        return Prediction(sql=extract_sql(reply.content), usage=meter.usage())

The cache key is the SHA-256 of canonical JSON (sorted keys, no whitespace) of everything that
shapes the answer: adapter name and version, model, the parameters sent (temperature,
``max_tokens``, ``tool_choice`` and any extra request parameters), messages, tools, schema data
version, question id and sample index; the cache files each reply under that key *and* the
endpoint that gave it (:func:`~.cache.endpoint_id`), so another server is asked afresh. Offline
without ``--heron-endpoint`` a request replays from whichever endpoint recorded it. Only
well-formed replies are stored; errors (HTTP failures, malformed or empty replies) are never
cached. A replayed call reports the tokens originally billed, its recorded latency, and counts
as a cached call (see DECISIONS.md).

What is sent: with tools, ``tool_choice`` is ``"auto"`` unless the caller chose (llama.cpp-style
servers ignore tools without it); an assistant turn that carries tool calls and no text is sent
with ``content: ""`` (OpenAI accepts ``null`` or a string there, llama-cpp-python only a
string); ``max_tokens`` is :attr:`LLMConfig.max_tokens` unless the caller set its own.

Retries, only for what may pass: HTTP 408, 409, 429, 502, 503 and 504, read errors and dropped
connections are retried with exponential backoff (``backoff_s * 2**attempt``, capped at
``max_backoff_s``), honouring a ``Retry-After`` header (also capped), at most ``max_attempts``
attempts and never past the caller's deadline; an HTTP 500 (usually the server failing on this
very request) is retried once. A refused connection is not retried: nothing listens there. Any
other status fails at once. Every message names the endpoint and keeps the server's reason
(its start and its end, when it is long). A request that runs out of time is abandoned with its
connection closed, so a llama.cpp-style server drops it from its queue. The SDK's own retries
are off.
"""

from __future__ import annotations

import dataclasses
import email.utils
import json
import os
import re
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_heron.core.errors import ENDPOINT_REFUSED, AdapterError
from pytest_heron.systems.llm.cache import (
    KEY_FORMAT,
    ResponseCache,
    cache_key,
    canonical_json,
    default_cache_path,
    endpoint_id,
)
from pytest_heron.systems.llm.extract import extract_sql
from pytest_heron.systems.llm.replies import (
    CacheMiss as CacheMiss,
)
from pytest_heron.systems.llm.replies import (
    ChatReply as ChatReply,
)
from pytest_heron.systems.llm.replies import (
    LLMError as LLMError,
)
from pytest_heron.systems.llm.replies import (
    LLMTimeout as LLMTimeout,
)
from pytest_heron.systems.llm.replies import (
    Meter as Meter,
)
from pytest_heron.systems.llm.replies import (
    ToolCall as ToolCall,
)
from pytest_heron.systems.llm.replies import (
    ToolsUnsupported as ToolsUnsupported,
)
from pytest_heron.systems.llm.replies import (
    attach_usage as attach_usage,
)
from pytest_heron.systems.llm.replies import (
    observe_bills as observe_bills,
)
from pytest_heron.systems.llm.replies import (
    parse_completion as parse_completion,
)

__all__ = [
    "KEY_FORMAT",
    "CacheMiss",
    "ChatClient",
    "ChatReply",
    "LLMConfig",
    "LLMError",
    "LLMTimeout",
    "Meter",
    "ResponseCache",
    "ToolCall",
    "ToolsUnsupported",
    "api_key",
    "attach_usage",
    "cache_key",
    "canonical_json",
    "client_for",
    "deadline_after",
    "default_cache_path",
    "endpoint_id",
    "extract_sql",
    "observe_bills",
    "require_sdk",
]

if TYPE_CHECKING:
    import openai

    from pytest_heron.core.types import BenchmarkContext

PLACEHOLDER_KEY = "heron-no-key"  # local servers (Ollama, vLLM, llama.cpp) accept any key
RETRY_STATUSES = frozenset({408, 409, 429, 502, 503, 504})
ONCE_STATUSES = frozenset({500})  # retried once: usually the server failing on this very request
TOOL_REJECT_STATUSES = frozenset({400, 404, 422})
DEFAULT_MAX_TOKENS = 2048  # --heron-max-tokens
REASON_HEAD, REASON_TAIL = 300, 900  # of a long server message, the characters kept each end


def api_key() -> str:
    """``HERON_API_KEY``, else ``OPENAI_API_KEY``, else a placeholder (local servers need none)."""
    return os.environ.get("HERON_API_KEY") or os.environ.get("OPENAI_API_KEY") or PLACEHOLDER_KEY


@dataclass(frozen=True)
class LLMConfig:
    """How to reach the model. ``endpoint`` is the base URL (ending in ``/v1`` for most servers)."""

    endpoint: str | None
    model: str
    temperature: float = 0.0
    max_tokens: int | None = DEFAULT_MAX_TOKENS  # None: let the server decide (not advised)
    timeout_s: float = 120.0  # per request (further bounded by the caller's deadline)
    max_attempts: int = 6
    backoff_s: float = 1.0
    max_backoff_s: float = 30.0
    api_key: str = field(default_factory=api_key, repr=False)

    @classmethod
    def from_context(cls, ctx: BenchmarkContext, **overrides: Any) -> LLMConfig:
        """Build from ``ctx.llm`` and ``ctx.limits``; raise AdapterError when the model is
        missing or (online) the endpoint is."""
        llm = ctx.llm
        if not llm.model:
            raise AdapterError("LLM adapters need --heron-model (the model name to ask)")
        if not llm.endpoint and not llm.offline:
            raise AdapterError(
                "LLM adapters need --heron-endpoint (an OpenAI-compatible base URL such as "
                "https://api.openai.com/v1), or --heron-offline to replay from the cache"
            )
        values: dict[str, Any] = {
            "endpoint": llm.endpoint,
            "model": llm.model,
            "temperature": llm.temperature,
            "max_tokens": llm.max_tokens,
            "timeout_s": ctx.limits.timeout_s,
        }
        values.update(overrides)
        return cls(**values)


def deadline_after(seconds: float | None, margin_s: float = 1.0) -> float | None:
    """A ``time.monotonic()`` deadline ``seconds`` from now, less a margin for the adapter's own
    work after its last call (never less than half the limit); None without a limit."""
    if seconds is None:
        return None
    limit = float(seconds)
    return time.monotonic() + max(limit / 2, limit - margin_s)


def retry_after_s(headers: Mapping[str, str] | None, now: float | None = None) -> float | None:
    """Seconds a ``Retry-After`` (or ``retry-after-ms``) header asks to wait, or None.

    >>> retry_after_s({"retry-after": "2"})
    2.0
    >>> retry_after_s({"retry-after-ms": "250"})
    0.25
    >>> retry_after_s({"retry-after": "soon"}) is None
    True
    """
    if not headers:
        return None
    lower = {str(k).lower(): str(v) for k, v in headers.items()}
    if "retry-after-ms" in lower:
        try:
            return max(0.0, float(lower["retry-after-ms"]) / 1000)
        except ValueError:
            pass
    value = lower.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def backoff_s(attempt: int, base: float, cap: float, retry_after: float | None) -> float:
    """Wait before retry number ``attempt`` (0-based): the server's Retry-After when given,
    else ``base * 2**attempt``; never more than ``cap``.

    >>> [backoff_s(a, 1.0, 5.0, None) for a in range(4)]
    [1.0, 2.0, 4.0, 5.0]
    >>> backoff_s(0, 1.0, 5.0, 60.0)
    5.0
    """
    wanted = retry_after if retry_after is not None else base * (2**attempt)
    return max(0.0, min(cap, wanted))


class ChatClient:
    """One endpoint and model, with retries, the cache and offline replay (see the module doc)."""

    def __init__(
        self,
        config: LLMConfig,
        *,
        adapter: str,
        adapter_version: str | None = None,
        cache: ResponseCache | None = None,
        offline: bool = False,
        data_version: str | None = None,
    ) -> None:
        if offline and cache is None:
            raise AdapterError("--heron-offline needs the LLM cache")
        self.config = config
        self.adapter = adapter
        self.adapter_version = adapter_version
        self.cache = cache
        self.offline = offline
        self.data_version = data_version
        self._sdk: openai.OpenAI | None = None
        self._sdk_lock = threading.Lock()

    def _client(self) -> openai.OpenAI:
        with self._sdk_lock:
            if self._sdk is None:
                import openai

                self._sdk = openai.OpenAI(
                    base_url=self.config.endpoint,
                    api_key=self.config.api_key,
                    max_retries=0,
                    timeout=self.config.timeout_s,
                )
            return self._sdk

    def key(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None,
        question_id: str,
        sample: int,
        params: Mapping[str, Any] | None = None,
    ) -> str:
        return cache_key(
            adapter=self.adapter,
            adapter_version=self.adapter_version,
            model=self.config.model,
            params=self.sent_params(params, tools),
            messages=messages,
            tools=tools,
            data_version=self.data_version,
            question_id=question_id,
            sample=sample,
        )

    @property
    def endpoint(self) -> str:
        """The endpoint as messages, the cache and the conditions name it."""
        return endpoint_id(self.config.endpoint)

    def sent_params(
        self, params: Mapping[str, Any] | None, tools: Sequence[Mapping[str, Any]] | None
    ) -> dict[str, Any]:
        """The request parameters besides model, messages and tools: temperature, ``max_tokens``
        (unless the caller set it or ``max_completion_tokens``), ``tool_choice`` ``"auto"``
        with tools (unless the caller chose), then the caller's own."""
        out: dict[str, Any] = {"temperature": float(self.config.temperature)}
        given = dict(params or {})
        if (
            self.config.max_tokens is not None
            and "max_tokens" not in given
            and "max_completion_tokens" not in given
        ):
            out["max_tokens"] = int(self.config.max_tokens)
        if tools and "tool_choice" not in given:
            out["tool_choice"] = "auto"
        out.update(given)
        return out

    def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        question_id: str,
        sample: int = 0,
        tools: Sequence[Mapping[str, Any]] | None = None,
        meter: Meter | None = None,
        deadline: float | None = None,
        params: Mapping[str, Any] | None = None,
    ) -> ChatReply:
        """One chat completion: from the cache if recorded, else from the endpoint (recorded on
        success). ``deadline`` is a ``time.monotonic()`` instant no request or retry may pass;
        ``params`` are extra request parameters (part of the cache key). Raises LLMError,
        CacheMiss or ToolsUnsupported; an empty reply (no text, no tool calls) is an LLMError
        whose tokens are still metered."""
        started = time.monotonic()
        key = self.key(messages, tools=tools, question_id=question_id, sample=sample, params=params)
        endpoint = self.endpoint
        if self.cache is not None:
            record = self.cache.get(key, endpoint if endpoint or not self.offline else None)
            if record is not None:
                reply = ChatReply.from_record(record, latency_s=time.monotonic() - started)
                if meter is not None:
                    meter.add(reply)
                return reply
        if self.offline:
            where = self.cache.path if self.cache is not None else "(no cache)"
            source = f"endpoint {endpoint}, " if endpoint else ""
            raise CacheMiss(
                f"--heron-offline: no cached reply for question {question_id} (sample {sample}, "
                f"{source}model {self.config.model}, adapter {self.adapter}) in {where}; run "
                "once without --heron-offline to record it"
            )
        if not self.config.endpoint:
            raise AdapterError("LLM adapters need --heron-endpoint")
        reply = self._request(messages, tools, params, deadline)
        reply = dataclasses.replace(reply, latency_s=time.monotonic() - started)
        if meter is not None:
            meter.add(reply)
        if not (reply.content or "").strip() and not reply.tool_calls:
            raise LLMError(
                f"the model returned an empty reply (finish_reason={reply.finish_reason!r})"
            )
        if self.cache is not None:
            self.cache.put(
                key,
                reply.to_record(),
                model=self.config.model,
                question=question_id,
                endpoint=endpoint,
            )
        return reply

    def _request(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None,
        params: Mapping[str, Any] | None,
        deadline: float | None,
    ) -> ChatReply:
        import openai

        where = self.endpoint
        request: dict[str, Any] = {
            "model": self.config.model,
            "messages": wire_messages(messages),
            **self.sent_params(params, tools),
        }
        if tools:
            request["tools"] = list(tools)
        attempts = max(1, self.config.max_attempts)
        last = "no attempt was made"
        failed_500 = False
        for attempt in range(attempts):
            timeout = self.config.timeout_s
            if deadline is not None:
                timeout = min(timeout, deadline - time.monotonic())
                if timeout <= 0:
                    raise LLMTimeout(f"out of time for the LLM call to {where} ({last})")
            retry_after: float | None = None
            timed_out = False
            try:
                raw = (
                    self._client()
                    .with_options(timeout=timeout)
                    .chat.completions.with_raw_response.create(**request)
                )
                text = raw.http_response.text
            except openai.APIStatusError as exc:
                status = exc.status_code
                reason = _error_message(exc)
                last = f"HTTP {status}: {reason}"
                if tools and _refuses_tools(status, reason):
                    raise ToolsUnsupported(
                        f"the endpoint {where} rejected a request with tools ({last}); the model "
                        "or server does not support tool calls"
                    ) from None
                if status == 400 and _wants_max_completion_tokens(request, reason):
                    request["max_completion_tokens"] = request.pop("max_tokens")
                    continue  # at once, with the parameter this model takes
                if status in ONCE_STATUSES and not failed_500:
                    failed_500 = True
                elif status in ONCE_STATUSES:
                    raise LLMError(
                        f"the endpoint {where} failed the request twice: {last}"
                    ) from None
                elif status not in RETRY_STATUSES:
                    raise LLMError(f"the endpoint {where} refused the request: {last}") from None
                retry_after = retry_after_s(dict(exc.response.headers))
            except openai.APITimeoutError:
                timed_out = True
                # the SDK's HTTP layer closes the connection of a request it gave up on, so a
                # llama.cpp-style server drops it from its queue (tested)
                last = f"no reply within {timeout:.1f}s; the request was abandoned"
            except openai.APIConnectionError as exc:
                if _refused(exc):
                    raise LLMError(
                        f"{ENDPOINT_REFUSED}{where}: the connection was refused "
                        "(is the server running, and is --heron-endpoint right?)"
                    ) from None
                last = f"{type(exc).__name__}: {_cause(exc)}"
            except ValueError as exc:  # the SDK lets a JSONDecodeError out on a non-JSON 200
                raise LLMError(f"malformed response from the endpoint {where}: {exc}") from None
            else:
                try:
                    body = json.loads(text)
                except ValueError:
                    snippet = text[:200] if text.strip() else "(an empty body)"
                    raise LLMError(
                        f"malformed response from the endpoint {where}: not JSON: {snippet!r}"
                    ) from None
                return parse_completion(body)
            if attempt + 1 >= attempts:
                if timed_out:
                    raise LLMTimeout(f"the LLM call to {where} timed out {attempts} times ({last})")
                break
            wait = backoff_s(attempt, self.config.backoff_s, self.config.max_backoff_s, retry_after)
            if deadline is not None and time.monotonic() + wait >= deadline:
                raise LLMTimeout(f"out of time retrying the LLM call to {where} ({last})")
            time.sleep(wait)
        raise LLMError(f"the LLM call to {where} failed after {attempts} attempts: {last}")


def wire_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The messages as sent: an assistant turn with tool calls and no text gets ``content: ""``
    (OpenAI takes ``null`` or a string there; llama-cpp-python answers ``null`` with HTTP 500).

    >>> wire_messages([{"role": "assistant", "content": None, "tool_calls": [{"id": "1"}]}])
    [{'role': 'assistant', 'content': '', 'tool_calls': [{'id': '1'}]}]
    """
    out = []
    for m in messages:
        message = dict(m)
        tool_turn = message.get("role") == "assistant" and message.get("tool_calls")
        if tool_turn and message.get("content") is None:
            message["content"] = ""
        out.append(message)
    return out


def _wants_max_completion_tokens(request: Mapping[str, Any], reason: str) -> bool:
    """Whether a 400 says this model takes ``max_completion_tokens`` instead of the
    ``max_tokens`` the client set (OpenAI's reasoning models do)."""
    return "max_tokens" in request and "max_completion_tokens" in reason


def _refused(exc: BaseException) -> bool:
    """Whether a connection error is a refused connection (nothing listens at the address)."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, ConnectionRefusedError) or "connection refused" in str(cur).lower():
            return True
        cur = cur.__cause__ or cur.__context__
    return False


def _cause(exc: BaseException) -> str:
    """The innermost cause's text (the SDK's own message is just "Connection error.")."""
    cur: BaseException = exc
    while cur.__cause__ is not None and cur.__cause__ is not cur:
        cur = cur.__cause__
    text = str(cur) or type(cur).__name__
    return text if cur is exc else f"{exc} ({type(cur).__name__}: {text})"


def _refuses_tools(status: int, message: str) -> bool:
    """Whether an HTTP error on a request with tools means "no tool support": a 404 or 422, or
    a 400 whose message is about tools or functions (a 400 for, say, an over-long prompt is
    not)."""
    if status not in TOOL_REJECT_STATUSES:
        return False
    return status != 400 or bool(re.search(r"tool|function", message, re.IGNORECASE))


def _error_message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return keep_ends(str(inner["message"]))
        if isinstance(inner, str):
            return keep_ends(inner)
        if isinstance(body.get("detail"), (str, list, dict)):  # FastAPI's shape
            detail = body["detail"]
            return keep_ends(detail if isinstance(detail, str) else canonical_json(detail))
    return keep_ends(str(getattr(exc, "message", exc)))


def keep_ends(text: str, head: int = REASON_HEAD, tail: int = REASON_TAIL) -> str:
    """A long server message cut in the middle: the cause of a failure is often at the end
    (a traceback's last line), its context at the start.

    >>> keep_ends("a" * 5 + "b" * 5, head=2, tail=3)
    'aa [... 5 characters ...] bbb'
    """
    text = text.strip()
    if len(text) <= head + tail:
        return text
    return f"{text[:head]} [... {len(text) - head - tail} characters ...] {text[-tail:]}"


def require_sdk(adapter: str) -> None:
    """Raise AdapterError with the pip command when the ``openai`` package is missing."""
    try:
        import openai  # noqa: F401
    except ImportError:
        raise AdapterError(
            f"the {adapter} adapter needs the OpenAI SDK (package 'openai'); "
            "install it with: pip install 'pytest-heron[llm]'"
        ) from None


def client_for(
    ctx: BenchmarkContext, adapter: str, adapter_version: str | None, **overrides: Any
) -> ChatClient:
    """The client an adapter uses, from ``ctx.llm`` (``--heron-endpoint``, ``--heron-model``,
    ``--heron-temperature``, ``--heron-cache``, ``--heron-offline``) and ``ctx.limits``
    (``--heron-timeout``); ``overrides`` replace :class:`LLMConfig` fields. Without the OpenAI
    SDK (the ``llm`` extra) it raises AdapterError naming the pip command, so an LLM adapter
    fails at prepare."""
    require_sdk(adapter)
    config = LLMConfig.from_context(ctx, **overrides)
    path = ctx.llm.cache_path
    cache = ResponseCache(Path(path) if path else default_cache_path())
    return ChatClient(
        config,
        adapter=adapter,
        adapter_version=adapter_version,
        cache=cache,
        offline=ctx.llm.offline,
        data_version=ctx.data_version or None,
    )
