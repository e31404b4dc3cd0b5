"""An adapter in a process of its own (:class:`ChildSystem`): the harness's end of the pipe to
:mod:`.child`, with deadlines, caps on what comes back and the jail of :mod:`.jail` when the
harness can give the adapter a user of its own."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pytest_heron.core.errors import (
    AdapterError,
    AdapterLookupError,
    AdapterTimeout,
    ErrorKind,
    InvalidPrediction,
)
from pytest_heron.core.types import BenchmarkContext, Prediction
from pytest_heron.dataset import GoldQuestion
from pytest_heron.systems import child as wire
from pytest_heron.systems import jail as jails
from pytest_heron.systems.interpreter import Interpreter
from pytest_heron.systems.registry import wrong_type

if TYPE_CHECKING:
    from pytest_heron.systems.bubblewrap import Sandbox


MAX_REPLY_BYTES = 64 * 1024 * 1024  # one reply from the adapter's process (a prediction, mostly)
MAX_MESSAGE_CHARS = 4000  # of an error message that came from the adapter's process
MAX_BILLED_BYTES = 64 * 1024  # of one billing line (a usage dict is far smaller)
MAX_BILLED_LINES = 10_000  # per request: one per LLM reply (an agent makes at most 20 calls)
LOG_TAIL_BYTES = 4000  # what is kept of the adapter process's prints (shown when it dies)
CLOSE_GRACE_S = 2.0  # an idle process asked to exit gets this long before SIGKILL
LOAD_GRACE_S = 30.0  # starting Python and importing the adapter: --heron-timeout plus this


class _Overdue(Exception):
    pass


class _Gone(Exception):
    pass


def _status(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"


def answer_from_json(value: Any) -> Any:
    """What the adapter's process sent back as its answer, as ``generate`` returned it (the
    inverse of :func:`pytest_heron.systems.child.answer_to_json`)."""
    if isinstance(value, Mapping) and len(value) == 1:
        if isinstance(value.get("text"), str):
            return value["text"]
        if isinstance(value.get("mapping"), Mapping):
            return dict(value["mapping"])
        if isinstance(value.get("prediction"), Mapping):
            p = value["prediction"]
            return Prediction(
                sql=p.get("sql"),
                tables_in_context=p.get("tables_in_context"),
                tables_ranked=p.get("tables_ranked"),
                usage=p.get("usage"),
            )
        if "other" in value:
            raise wrong_type(str(value["other"])[:100])
    raise InvalidPrediction("the adapter's process sent an answer of no known form")


class ChildSystem:
    """An adapter in a process of its own (see the module docstring and
    :mod:`pytest_heron.systems.child` for the wire). The process is started and the adapter
    loaded at once (the name is checked before the first question); ``ready`` prepares it."""

    def __init__(
        self,
        name: str,
        timeout_s: float,
        jail: jails.Jail | Sandbox | None = None,
        interpreter: Interpreter | None = None,
    ) -> None:
        self.name = name
        self._python = Interpreter.of(None) if interpreter is None else interpreter
        self.timeout_s = timeout_s
        self.note: str | None = None
        self._jail = jail
        self.isolation = jails.NONE if jail is None else jail.level
        self._proc: subprocess.Popen[bytes] | None = None
        self._log = bytearray()
        self._prepared = False
        self._error: str | None = None
        self._ctx: BenchmarkContext | None = None
        self._seq = 0  # numbers the requests, so a billing line is read for its own only
        self._billed: Any = None  # the last billing line of the current request
        try:
            info = self._load(timeout_s)
        except AdapterLookupError:
            self.close()
            raise
        except (AdapterError, AdapterTimeout, TimeoutError) as exc:
            self.close()
            raise AdapterLookupError(f"adapter {name!r} could not be loaded: {exc}") from None
        version = info.get("version")
        self.version: str | None = None if version is None else str(version)
        own, task = info.get("name"), info.get("task")
        self.adapter_name: str | None = None if own is None else str(own)
        self.task: str | None = None if task is None else str(task)
        self.takes_sample = info.get("sample") is True
        self._has_conditions = info.get("conditions") is True
        needs = info.get("needs")
        needs = needs if isinstance(needs, dict) else {}
        missing = needs.get("missing")
        self.needs: Mapping[str, Any] = {
            "llm": needs.get("llm") is True,
            "missing": [str(m)[:200] for m in missing[:100]] if isinstance(missing, list) else [],
        }

    # -- the process

    def _start(self) -> None:
        self._log.clear()
        executable, env = self._python.executable, self._python.environment(os.environ)
        fds: tuple[int, ...] = ()
        if self._jail is None:
            command = [executable, "-m", "pytest_heron.systems.child", str(os.getpid())]
        else:  # in the sandbox (bubblewrap.py), or the fallback jail (jail.py)
            command = self._jail.command(os.getpid())
            executable, env = self._jail.executable(), self._jail.environment()
            fds = self._jail.pass_fds()
        try:
            self._popen(command, executable, env, fds)
        finally:
            if self._jail is not None:
                self._jail.started()

    def _popen(
        self,
        command: list[str],
        executable: str,
        env: dict[str, str] | None,
        fds: tuple[int, ...],
    ) -> None:
        self._proc = subprocess.Popen(
            command,
            executable=executable,
            env=env,
            pass_fds=fds,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            bufsize=0,
            start_new_session=True,  # its own process group, killed as one
        )
        assert self._proc.stdin is not None
        os.set_blocking(self._proc.stdin.fileno(), False)

    def _kill(self) -> int | None:
        """SIGKILL the process group, reap the process; its exit status."""
        proc, self._proc, self._prepared = self._proc, None, False
        if proc is None:
            return None
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)  # before the reap: the group id cannot be reused
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        code = proc.wait()
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
        return code

    def close(self) -> None:
        """Ask an idle process to exit (its wire closed), then kill what is left of its group."""
        proc = self._proc
        if proc is not None:
            if proc.stdin is not None:
                with contextlib.suppress(OSError):
                    proc.stdin.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(CLOSE_GRACE_S)
            self._kill()
        if self._jail is not None:
            self._jail.close()

    def _tail(self) -> str:
        text = self._log.decode("utf-8", "replace").strip()
        return f"; its last output: {text[-500:]}" if text else ""

    def _keep_log(self, chunk: bytes) -> None:
        self._log += chunk
        if len(self._log) > LOG_TAIL_BYTES:
            del self._log[: len(self._log) - LOG_TAIL_BYTES]

    def _exchange(self, request: Mapping[str, Any], deadline: float) -> Any:
        """Send one request, read its reply line, draining the process's prints meanwhile."""
        proc = self._proc
        assert proc is not None and proc.stdin and proc.stdout and proc.stderr
        pending = memoryview(json.dumps(request).encode("utf-8", "surrogatepass") + b"\n")
        out, err, inp = proc.stdout.fileno(), proc.stderr.fileno(), proc.stdin.fileno()
        poller = select.poll()
        poller.register(out, select.POLLIN)
        poller.register(err, select.POLLIN)
        poller.register(inp, select.POLLOUT)
        reply = bytearray()
        seq = request.get("seq")
        billing_lines = 0
        while True:
            while (end := reply.find(b"\n")) >= 0 and reply.startswith(b'{"billed"'):
                line = bytes(reply[:end])
                del reply[: end + 1]  # a billing line, not the reply
                billing_lines += 1
                if billing_lines > MAX_BILLED_LINES:
                    raise AdapterError(
                        f"the adapter's process sent more than {MAX_BILLED_LINES:,} billing "
                        "lines for one request"
                    )
                self._note_billed(line, seq)
            if end >= 0:
                break
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise _Overdue
            for fd, event in poller.poll(max(1, int(remaining * 1000))):
                if fd == inp:
                    try:
                        pending = pending[os.write(inp, pending) :]
                    except BlockingIOError:
                        continue
                    except OSError:  # BrokenPipeError: the process is gone
                        raise _Gone from None
                    if not pending:
                        poller.unregister(inp)
                    continue
                chunk = os.read(fd, 1 << 20) if event & (select.POLLIN | select.POLLHUP) else b""
                if fd == err:
                    if chunk:
                        self._keep_log(chunk)
                    else:
                        poller.unregister(err)
                elif not chunk:
                    raise _Gone
                else:
                    reply += chunk
                    if len(reply) > MAX_REPLY_BYTES:
                        raise AdapterError(
                            f"the adapter's reply is larger than {MAX_REPLY_BYTES >> 20} MiB"
                        )
        try:
            return json.loads(bytes(reply[: reply.index(b"\n")]))
        except (ValueError, RecursionError):
            raise AdapterError("the adapter's process sent a malformed reply") from None

    def _note_billed(self, line: bytes, seq: Any) -> None:
        """Keep what a billing line of the current request says (see :mod:`..child`); lines of
        another request, oversized or malformed ones are ignored (the score reads only the
        counters of it, as of any usage an adapter reports)."""
        if len(line) > MAX_BILLED_BYTES:
            return
        try:
            value = json.loads(line)
        except (ValueError, RecursionError):
            return
        if (
            isinstance(value, dict)
            and value.get("seq") == seq
            and isinstance(value.get("billed"), dict)
        ):
            self._billed = value["billed"]

    def _call(self, request: Mapping[str, Any], timeout_s: float, what: str) -> dict[str, Any]:
        """One request and its reply, within ``timeout_s``; a failed reply raised as the
        exception the scorer knows (AdapterError, InvalidPrediction, TimeoutError) with the
        usage the adapter attached. Past the deadline, or if the process dies or misbehaves,
        it is killed (the next request starts a fresh one)."""
        if self._proc is None:
            self._start()
        self._seq += 1
        self._billed = None
        lost: Exception
        try:
            reply = self._exchange({**request, "seq": self._seq}, time.monotonic() + timeout_s)
        except _Overdue:
            self._kill()
            lost = AdapterTimeout(
                f"the adapter did not {what} within {timeout_s:g}s (--heron-timeout); its "
                "process was killed"
            )
            lost.usage = self._billed  # type: ignore[attr-defined]  # the replies that arrived
            raise lost from None
        except _Gone:
            tail = self._tail()
            code = self._kill()
            lost = AdapterError(
                f"the adapter's process ended ({_status(code)}) before it could {what}{tail}"
            )
            lost.usage = self._billed  # type: ignore[attr-defined]
            raise lost from None
        except AdapterError:
            self._kill()
            raise
        if not isinstance(reply, dict):
            self._kill()
            raise AdapterError("the adapter's process sent a reply that is not an object")
        if reply.get("ok") is True:
            return reply
        kind, message = reply.get("kind"), str(reply.get("message"))[:MAX_MESSAGE_CHARS]
        exc: Any
        if kind == "lookup":
            exc = AdapterLookupError(message)
        elif kind == ErrorKind.INVALID_PREDICTION:
            exc = InvalidPrediction(message)
        elif kind == ErrorKind.ADAPTER_TIMEOUT:
            exc = TimeoutError(message)
        else:
            exc = AdapterError(message)
        exc.usage = reply.get("usage")  # what it billed (score.py reads it)
        raise exc

    def _load(self, timeout_s: float) -> dict[str, Any]:
        request = {"op": "load", "name": self.name, "sys_path": self._python.sys_path()}
        if self._proc is None:
            self._start()
        return self._call(request, timeout_s + LOAD_GRACE_S, "load")

    @property
    def sandbox(self) -> str | None:
        """The isolation's mechanism, for the conditions (None: not isolated)."""
        return None if self._jail is None else self._jail.mechanism

    # -- the answerer

    def _seen(self, ctx: BenchmarkContext) -> dict[str, Any]:
        """``ctx`` as the adapter's process is sent it. A jailed process started before the
        server's socket was known is stopped here (the next request starts one that sees it)."""
        if self._jail is None:
            return wire.context_to_json(ctx)
        if self._jail.expose(ctx.dsn) and self._proc is not None:
            self._kill()
        return wire.context_to_json(self._jail.context(ctx))

    def conditions(self, ctx: BenchmarkContext) -> dict[str, Any]:
        if not self._has_conditions:
            return {}
        try:
            seen = self._seen(ctx)
            if self._proc is None:
                self._load(self.timeout_s)
            reply = self._call(
                {"op": "conditions", "ctx": seen},
                self.timeout_s,
                "report its conditions",
            )
        except (AdapterError, AdapterTimeout, TimeoutError) as exc:
            raise AdapterLookupError(
                f"adapter {self.name!r}: conditions(ctx) failed: {exc}"
            ) from None
        value = reply.get("value")
        return dict(value) if isinstance(value, Mapping) else {}

    def ready(self, ctx: BenchmarkContext) -> None:
        self._ctx = ctx
        if self._error is not None:
            raise AdapterError(self._error)
        if self._proc is not None and self._prepared:
            return
        timeout = ctx.limits.timeout_s
        try:
            seen = self._seen(ctx)
            if self._proc is None:
                self._load(timeout)
            self._call({"op": "prepare", "ctx": seen}, timeout, "finish prepare(ctx)")
            self._prepared = True
        except (AdapterTimeout, AdapterError, AdapterLookupError, TimeoutError) as exc:
            self._error = f"the adapter failed to prepare: {exc}"
        if self._error is not None:
            self._kill()
            raise AdapterError(self._error)

    def ask(self, q: GoldQuestion, timeout_s: float, sample: int | None) -> Any:
        if self._proc is None or not self._prepared:
            if self._ctx is None:
                raise AdapterError("the adapter is not prepared")
            self.ready(self._ctx)  # a fresh process after a kill
        request = {
            "op": "generate",
            "question": wire.question_to_json(q.public()),
            "sample": sample,
        }
        reply = self._call(request, timeout_s, "answer")
        return answer_from_json(reply.get("value"))
