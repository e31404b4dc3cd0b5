r"""What an OpenAI-compatible endpoint answers, as the LLM client hands it on: the errors an
LLM adapter raises (:class:`LLMError` and its kinds), one reply (:class:`ChatReply`, its
:class:`ToolCall`\ s), the parser of a chat.completion body, and the :class:`Meter` that sums
what one question's calls billed. Re-exported by :mod:`.client`, the module adapters import."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pytest_heron.core.errors import AdapterError, OutOfTime
from pytest_heron.systems.llm.cache import (
    canonical_json,
)


class LLMError(AdapterError):
    """The endpoint failed after retries or answered something unusable."""


class LLMTimeout(LLMError, OutOfTime):
    """The call ran out of the question's time (``adapter_timeout``, like every adapter's)."""


class CacheMiss(LLMError):
    """Offline mode and the cache holds no reply for this request."""


class ToolsUnsupported(LLMError):
    """The endpoint (or model) does not support tool calls."""


# -- replies and the meter --------------------------------------------------------------------


@dataclass(frozen=True)
class ToolCall:
    """One function call the model asked for; ``arguments`` is the raw JSON text it sent."""

    id: str
    name: str
    arguments: str

    def parsed_arguments(self) -> dict[str, Any]:
        """The arguments as a dict; ``{}`` when they are not a JSON object."""
        try:
            value = json.loads(self.arguments or "{}")
        except ValueError:
            return {}
        return value if isinstance(value, dict) else {}


@dataclass(frozen=True)
class ChatReply:
    """The first choice of one chat completion, with what it billed."""

    content: str | None
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached: bool = False
    latency_s: float = 0.0
    # parts of the two above, when the provider reports them (None when it does not):
    # usage.prompt_tokens_details.cached_tokens, usage.completion_tokens_details.reasoning_tokens
    prompt_tokens_cached: int | None = None
    completion_tokens_reasoning: int | None = None

    def message(self) -> dict[str, Any]:
        """The assistant message to append to the conversation for the next call."""
        msg: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            msg["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for c in self.tool_calls
            ]
        return msg

    def to_record(self) -> dict[str, Any]:
        """What the cache stores (the billed usage and the original latency included)."""
        return {
            "content": self.content,
            "tool_calls": [[c.id, c.name, c.arguments] for c in self.tool_calls],
            "finish_reason": self.finish_reason,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "latency_s": self.latency_s,
            "prompt_tokens_cached": self.prompt_tokens_cached,
            "completion_tokens_reasoning": self.completion_tokens_reasoning,
        }

    @classmethod
    def from_record(cls, record: Mapping[str, Any], *, latency_s: float | None = None) -> ChatReply:
        """A replayed reply: ``cached``, with the latency it had when recorded (``latency_s``
        when the record has none)."""
        recorded = record.get("latency_s")
        if isinstance(recorded, (int, float)) and not isinstance(recorded, bool) and recorded >= 0:
            latency_s = float(recorded)
        return cls(
            content=record.get("content"),
            tool_calls=tuple(
                ToolCall(str(i), str(n), str(a)) for i, n, a in record.get("tool_calls") or []
            ),
            finish_reason=record.get("finish_reason"),
            prompt_tokens=int(record.get("prompt_tokens") or 0),
            completion_tokens=int(record.get("completion_tokens") or 0),
            cached=True,
            latency_s=latency_s or 0.0,
            prompt_tokens_cached=_opt_int(record.get("prompt_tokens_cached")),
            completion_tokens_reasoning=_opt_int(record.get("completion_tokens_reasoning")),
        )


_bill_observer: Callable[[ChatReply], None] | None = None


def observe_bills(observer: Callable[[ChatReply], None] | None) -> None:
    """Have ``observer(reply)`` called for every reply any :class:`Meter` counts (None: stop).

    The adapter's own process (:mod:`pytest_heron.systems.child`) uses it to tell the harness
    what has been billed so far, so a question whose process is killed past its time limit
    keeps the tokens of the replies that did arrive. The observer must not raise.
    """
    global _bill_observer
    _bill_observer = observer


class Meter:
    """Sums one question's LLM calls: billed tokens (a replayed call counts the tokens it
    originally billed), calls, cached calls and each call's latency (a replayed call's recorded
    one, also summed apart as ``replayed_ms``). Thread-safe. Every reply counted is also shown
    to the observer of :func:`observe_bills`, if one is set."""

    def __init__(self, *, observed: bool = True) -> None:
        self._lock = threading.Lock()
        self.observed = observed  # False: not shown to the observer (the observer's own meter)
        self.calls = 0
        self.cached_calls = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.prompt_tokens_cached: int | None = None  # None until a reply reports it
        self.completion_tokens_reasoning: int | None = None
        self.latencies_s: list[float] = []
        self.replayed_s = 0.0

    def add(self, reply: ChatReply) -> None:
        with self._lock:
            self.calls += 1
            self.cached_calls += int(reply.cached)
            self.prompt_tokens += reply.prompt_tokens
            self.completion_tokens += reply.completion_tokens
            if reply.prompt_tokens_cached is not None:
                self.prompt_tokens_cached = (
                    self.prompt_tokens_cached or 0
                ) + reply.prompt_tokens_cached
            if reply.completion_tokens_reasoning is not None:
                self.completion_tokens_reasoning = (
                    self.completion_tokens_reasoning or 0
                ) + reply.completion_tokens_reasoning
            self.latencies_s.append(reply.latency_s)
            if reply.cached:
                self.replayed_s += reply.latency_s
        observer = _bill_observer
        if observer is not None and self.observed:
            observer(reply)

    def usage(self) -> dict[str, int]:
        """The ``Prediction.usage`` dict (``replayed_ms`` only when a call was replayed)."""
        with self._lock:
            out = {
                "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens,
                "calls": self.calls,
                "cached_calls": self.cached_calls,
                "llm_ms": round(sum(self.latencies_s) * 1000),
            }
            if self.cached_calls:
                out["replayed_ms"] = round(self.replayed_s * 1000)
            if self.prompt_tokens_cached is not None:
                out["prompt_tokens_cached"] = self.prompt_tokens_cached
            if self.completion_tokens_reasoning is not None:
                out["completion_tokens_reasoning"] = self.completion_tokens_reasoning
            return out


def attach_usage(exc: BaseException, meter: Meter) -> None:
    """Record on ``exc`` (as ``exc.usage``) what the meter counted, when it counted any call;
    the runner puts it in the failed question's ``usage`` so billed tokens are never lost."""
    if meter.calls:
        with contextlib.suppress(AttributeError):  # an exception type with __slots__
            exc.usage = meter.usage()  # type: ignore[attr-defined]


# -- the client -------------------------------------------------------------------------------


def parse_completion(body: Any) -> ChatReply:
    """A :class:`ChatReply` from a chat.completion body; LLMError when it is not one."""
    if not isinstance(body, dict):
        raise LLMError(
            f"malformed response from the endpoint: a {type(body).__name__}, not an object"
        )
    if isinstance(body.get("error"), dict):
        message = body["error"].get("message") or body["error"]
        raise LLMError(f"the endpoint answered with an error: {message}")
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise LLMError("malformed response from the endpoint: no choices")
    message = choices[0].get("message")
    if not isinstance(message, dict):
        raise LLMError("malformed response from the endpoint: the first choice has no message")
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        content = json.dumps(content)  # some servers send content parts; keep them readable
    calls = []
    for i, raw in enumerate(message.get("tool_calls") or []):
        if not isinstance(raw, dict) or not isinstance(raw.get("function"), dict):
            raise LLMError("malformed response from the endpoint: a tool call has no function")
        fn = raw["function"]
        arguments = fn.get("arguments")
        if not isinstance(arguments, str):
            arguments = canonical_json(arguments if arguments is not None else {})
        calls.append(ToolCall(str(raw.get("id") or f"call_{i}"), str(fn.get("name")), arguments))
    usage: dict[str, Any] = body["usage"] if isinstance(body.get("usage"), dict) else {}
    return ChatReply(
        content=content,
        tool_calls=tuple(calls),
        finish_reason=choices[0].get("finish_reason"),
        prompt_tokens=_int(usage.get("prompt_tokens")),
        completion_tokens=_int(usage.get("completion_tokens")),
        prompt_tokens_cached=_detail(usage, "prompt_tokens_details", "cached_tokens"),
        completion_tokens_reasoning=_detail(usage, "completion_tokens_details", "reasoning_tokens"),
    )


def _detail(usage: Mapping[str, Any], group: str, name: str) -> int | None:
    """``usage[group][name]`` as a count >= 0, or None when the provider does not report it."""
    details = usage.get(group)
    return _opt_int(details.get(name)) if isinstance(details, Mapping) else None


def _opt_int(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        return None
    try:
        return int(value)
    except (OverflowError, ValueError):  # inf, nan
        return None


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0
