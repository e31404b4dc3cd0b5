"""The adapter's own process: ``python -m pytest_heron.systems.child PARENT_PID``.

Started by :class:`pytest_heron.systems.process.ChildSystem`, one per pytest process. It
imports and instantiates the adapter, prepares it and answers ``generate`` requests; nothing of
the scorer is imported here, so there is nothing to patch.

The wire is one JSON object per line. Requests arrive on file descriptor 0 and replies leave on
file descriptor 1, but before any adapter code runs both are moved to private descriptors: fd 0
becomes ``/dev/null`` and fd 1 a copy of fd 2 (a pipe the parent drains), so whatever the adapter
reads or prints cannot reach the wire. Requests (``op``): ``load`` (``name``, ``sys_path``),
``conditions`` (``ctx``), ``prepare`` (``ctx``), ``generate`` (``question``, ``sample``,
``seq``). While it answers a ``generate``, the process also sends ``{"billed": usage, "seq":
seq}`` lines, one per LLM reply its meters count (see :meth:`Child.billing`). Every reply has
``ok``; a failed one carries ``kind``, ``message`` and ``usage`` (what the adapter
attached to its exception as ``exc.usage``). Everything sent is plain JSON: the helpers below
turn contexts, questions and answers into it and back.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import inspect
import json
import os
import signal
import sys
import threading
from collections.abc import Iterator, Mapping
from typing import IO, Any

from pytest_heron.core.errors import (
    AdapterError,
    AdapterLookupError,
    ErrorKind,
    InvalidPrediction,
    adapter_failure_kind,
)
from pytest_heron.core.types import BenchmarkContext, Limits, LLMOptions, Prediction, Question

PR_SET_PDEATHSIG = 1  # prctl(2): the signal this process gets when its parent dies
PR_SET_DUMPABLE = 4  # prctl(2): 0 closes /proc/PID/mem, environ and ptrace to others of its uid


# -- plain JSON both ways ---------------------------------------------------------------------


def plain(value: Any) -> Any:
    """A JSON-safe copy: mappings (keys as strings), lists, numbers, strings, None; anything
    else as its ``str``."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def context_to_json(ctx: BenchmarkContext) -> dict[str, Any]:
    data = dataclasses.asdict(ctx)
    data["tables"] = list(ctx.tables)
    return data


def context_from_json(data: Mapping[str, Any]) -> BenchmarkContext:
    values = dict(data)
    values["tables"] = tuple(values.get("tables", ()))
    values["limits"] = Limits(**values.get("limits", {}))
    values["llm"] = LLMOptions(**values.get("llm", {}))
    return BenchmarkContext(**values)


def question_to_json(q: Question) -> dict[str, Any]:
    return {**dataclasses.asdict(q), "traps": list(q.traps)}


def question_from_json(data: Mapping[str, Any]) -> Question:
    return Question(**{**data, "traps": tuple(data.get("traps", ()))})


def answer_to_json(raw: Any) -> dict[str, Any]:
    """What ``generate`` returned, as JSON the parent turns back with :func:`answer_from_json`
    (a Prediction's ``trace`` is not sent: nothing in the score reads it)."""
    if isinstance(raw, Prediction):
        return {
            "prediction": {
                "sql": plain(raw.sql),
                "tables_in_context": plain(raw.tables_in_context),
                "tables_ranked": plain(raw.tables_ranked),
                "usage": plain(raw.usage),
            }
        }
    if isinstance(raw, str):
        return {"text": raw}
    if isinstance(raw, Mapping):
        return {"mapping": plain(raw)}
    return {"other": type(raw).__name__}


def accepts_sample(adapter: Any) -> bool:
    """Whether ``adapter.generate`` takes a ``sample`` keyword (see :class:`Adapter`)."""
    try:
        params = inspect.signature(adapter.generate).parameters.values()
    except (TypeError, ValueError, AttributeError):
        return False
    return any(p.name == "sample" or p.kind is p.VAR_KEYWORD for p in params)


def declared_needs(adapter: Any) -> dict[str, Any]:
    """What an adapter says it needs before it can answer (both optional class attributes):
    ``needs_llm = True`` (it asks a model: the run then requires ``--heron-model`` and an
    endpoint that answers, as for the built-in LLM adapters) and ``requires``, the top-level
    modules it imports lazily; the ones not importable here are returned as ``missing``."""
    llm = getattr(adapter, "needs_llm", False) is True
    wanted = getattr(adapter, "requires", ())
    names = [m for m in wanted if isinstance(m, str)] if isinstance(wanted, (list, tuple)) else []
    from pytest_heron.systems.preflight import missing_modules

    return {"llm": llm, "missing": [m[:200] for m in missing_modules(names[:100])]}


def failure(exc: BaseException, op: str = "generate") -> dict[str, Any]:
    """The reply for an adapter that raised: its kind, its message and its billed usage. Kinds
    are the ones an adapter can earn by raising (the parent accepts no other). Outside
    ``generate`` the message always starts with the exception's type."""
    try:
        text = str(exc)
    except Exception:  # an exception whose __str__ fails still costs only its question
        text = "(its message could not be read)"
    kind = str(adapter_failure_kind(exc))  # the one classification (errors.py)
    if isinstance(exc, TimeoutError):
        message = text or "the adapter timed out"
    elif isinstance(exc, AdapterError):
        message = text
    elif isinstance(exc, Exception):
        message = f"{type(exc).__name__}: {text}"
    else:  # SystemExit, KeyboardInterrupt, GeneratorExit: the adapter's own, not the run's
        message = f"the adapter raised {type(exc).__name__}: {text}".rstrip(": ")
    if op != "generate":
        message = f"{type(exc).__name__}: {text}".rstrip(": ")
    try:
        usage = plain(getattr(exc, "usage", None))
    except Exception:
        usage = None
    return {"ok": False, "kind": kind, "message": message, "usage": usage}


# -- the process ------------------------------------------------------------------------------


class Child:
    """The request loop's state: the adapter once loaded, and the reply pipe (shared by the
    final replies and the billing lines, so one lock keeps lines whole)."""

    def __init__(self, replies: IO[bytes] | None = None) -> None:
        self.adapter: Any = None
        self.replies = replies
        self._lock = threading.Lock()

    def send(self, text: str) -> None:
        """Write one JSON line on the wire (whole, whichever thread sends)."""
        if self.replies is None:
            return
        data = text.encode("utf-8", "surrogatepass") + b"\n"
        with self._lock:
            self.replies.write(data)
            self.replies.flush()

    @contextlib.contextmanager
    def billing(self, seq: Any) -> Iterator[None]:
        """While the adapter answers: after each LLM reply it gets, a line ``{"billed": usage,
        "seq": seq}`` with what this request has billed so far (the parent keeps the last one
        in case it has to kill this process before the answer)."""
        try:
            from pytest_heron.systems.llm import client as llm
        except ImportError:  # an adapter in its own environment, without heron's dependencies:
            yield  # it asks its model with its own client (see --heron-adapter-python)
            return
        meter = llm.Meter(observed=False)
        lock = threading.Lock()
        observing = [True]

        def observe(reply: Any) -> None:
            with lock:
                if observing[0]:  # not after the answer: a late line would be the next one's
                    meter.add(reply)
                    with contextlib.suppress(Exception):  # a closed pipe: the parent is gone
                        self.send(json.dumps({"billed": meter.usage(), "seq": seq}))

        llm.observe_bills(observe)
        try:
            yield
        finally:
            with lock:
                observing[0] = False
            llm.observe_bills(None)

    def handle(self, request: Mapping[str, Any]) -> dict[str, Any]:
        op = request.get("op")
        if op == "load":
            return self.load(str(request["name"]), list(request.get("sys_path", [])))
        if self.adapter is None:
            return {"ok": False, "kind": ErrorKind.ADAPTER_ERROR, "message": "no adapter is loaded"}
        if op == "conditions":
            describe = getattr(self.adapter, "conditions", None)
            own = dict(describe(context_from_json(request["ctx"]))) if callable(describe) else {}
            return {"ok": True, "value": plain(own)}
        if op == "prepare":
            self.adapter.prepare(context_from_json(request["ctx"]))
            return {"ok": True}
        if op == "generate":
            q = question_from_json(request["question"])
            sample = request.get("sample")
            generate: Any = self.adapter.generate  # ``sample`` is an optional extension
            with self.billing(request.get("seq")):
                raw = generate(q) if sample is None else generate(q, sample=sample)
            return {"ok": True, "value": answer_to_json(raw)}
        return {"ok": False, "kind": ErrorKind.ADAPTER_ERROR, "message": f"unknown request {op!r}"}

    def load(self, name: str, sys_path: list[str]) -> dict[str, Any]:
        for entry in reversed(sys_path):  # the pytest process's import path, first
            if entry not in sys.path:
                sys.path.insert(0, entry)
        from pytest_heron.systems.registry import make_adapter

        try:
            self.adapter = make_adapter(name)
        except AdapterLookupError as exc:
            return {"ok": False, "kind": "lookup", "message": str(exc)}
        version = getattr(self.adapter, "version", None)
        return {
            "ok": True,
            "version": None if version is None else str(version),
            "name": plain(getattr(self.adapter, "name", None)),
            "task": plain(getattr(self.adapter, "task", None)),
            "sample": accepts_sample(self.adapter),
            "needs": declared_needs(self.adapter),
            "conditions": callable(getattr(self.adapter, "conditions", None)),
        }


def _die_with(parent: int) -> None:
    """Be killed when the pytest process dies, even while the adapter holds the GIL (Linux),
    and be no longer dumpable: another process of the same user (another run's adapter in the
    fallback jail) cannot trace this one or read its memory or environment. In the bubblewrap
    sandbox the parent is the sandbox's PID 1 (``1``)."""
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)


def _wire() -> tuple[IO[bytes], IO[bytes]]:
    """Move the request and reply pipes off fds 0 and 1 (see the module docstring)."""
    requests = os.fdopen(os.dup(0), "rb")
    replies = os.fdopen(os.dup(1), "wb")
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    sys.stdin = open(os.devnull, encoding="utf-8")  # noqa: SIM115 (lives as long as the process)
    with contextlib.suppress(AttributeError, ValueError):
        sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    return requests, replies


def main(argv: list[str]) -> None:
    _die_with(int(argv[0]) if argv else os.getppid())
    requests, replies = _wire()
    child = Child(replies)
    while True:
        line = requests.readline()
        if not line:
            return  # the parent closed the wire: done
        op = "generate"
        try:
            request = json.loads(line)
            op = str(request.get("op"))
            reply = child.handle(request)
        except BaseException as exc:
            reply = failure(exc, op)
        try:
            data = json.dumps(reply)
        except (TypeError, ValueError) as exc:
            data = json.dumps(failure(InvalidPrediction(f"the answer is not JSON: {exc}")))
        child.send(data)


if __name__ == "__main__":
    main(sys.argv[1:])
