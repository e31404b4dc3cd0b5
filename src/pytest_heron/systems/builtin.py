"""The built-in adapters: ``gold`` (the harness's reference) and ``cli`` (any command)."""

from __future__ import annotations

import contextlib
import json
import os
import select
import shlex
import signal
import subprocess
import time
from typing import TYPE_CHECKING, Any

from pytest_heron.core.errors import AdapterError
from pytest_heron.core.types import DEFAULT_TIMEOUT_S, BenchmarkContext, Prediction, Question

if TYPE_CHECKING:
    from pytest_heron.dataset import GoldQuestion

MAX_CLI_OUTPUT = 64 * 1024 * 1024  # what a command may print on stdout for one answer
STDERR_TAIL = 64 * 1024  # what is kept of its stderr (the end is quoted on a failure)
TICK_S = 0.05  # how often the exit of the command is looked for when no pidfd is available


class GoldAdapter:
    """Answers every question with its gold SQL: the sanity check that must score 100%.

    It is the harness's own reference, not a system under test: the harness answers ``gold``
    from the question set with :meth:`answer` (see :mod:`pytest_heron.systems.answerers`); the
    adapter protocol's ``generate`` gets a public :class:`Question`, which has no gold."""

    name = "gold"
    version = "1"

    def prepare(self, ctx: BenchmarkContext) -> None:
        self.ctx = ctx

    @staticmethod
    def answer(q: GoldQuestion) -> Prediction:
        return Prediction(sql=q.gold_sql, tables_in_context=list(q.gold_tables))

    def generate(self, q: Question) -> Prediction:
        raise AdapterError("the gold adapter is answered by the harness, not through generate")


class CliAdapter:
    """Runs ``--heron-cli-cmd`` once per question: a JSON object on stdin (id, question, dialect,
    dsn); stdout is a JSON object (``sql``, optional ``tables``, ``usage``) or plain SQL text.
    A non-zero exit is an adapter error carrying the end of stderr.

    The command runs in a process group of its own. Its answer is what it printed by the time
    its main process exited: output is read until then, then what is left in the pipes, and the
    group is killed (a background child holding stdout open neither delays the answer nor
    outlives it). At ``--heron-timeout`` the whole group gets SIGKILL."""

    name = "cli"
    version = "1"

    def __init__(self) -> None:
        self.command: list[str] = []
        self.timeout: float = DEFAULT_TIMEOUT_S
        self.dsn = ""

    def prepare(self, ctx: BenchmarkContext) -> None:
        cmd = ctx.cli_cmd
        if not cmd:
            raise AdapterError("the cli adapter needs --heron-cli-cmd (the command to run)")
        self.command = shlex.split(str(cmd))
        self.timeout = ctx.limits.timeout_s
        self.dsn = ctx.dsn

    def generate(self, q: Question) -> Any:
        payload = json.dumps(
            {"id": q.id, "question": q.question, "dialect": "postgres", "dsn": self.dsn}
        )
        code, stdout, stderr = run_command(self.command, payload.encode(), self.timeout)
        if code != 0:
            tail = stderr.decode("utf-8", "replace").strip()[-1000:] or "(no stderr)"
            raise AdapterError(f"the command exited with status {code}: {tail}")
        try:
            out = stdout.decode("utf-8").strip()
        except UnicodeDecodeError as exc:
            raise AdapterError(f"the command printed bytes that are not UTF-8: {exc}") from None
        if out.startswith("{"):
            try:
                return json.loads(out)
            except json.JSONDecodeError as exc:
                raise AdapterError(f"the command printed invalid JSON: {exc}") from None
        return out


def _exited(pid: int) -> bool:
    """Whether process ``pid`` has exited, without reaping it (its group id stays reserved)."""
    return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None


def run_command(command: list[str], payload: bytes, timeout_s: float) -> tuple[int, bytes, bytes]:
    """Run ``command`` in a new session with ``payload`` on stdin; its exit status, stdout and the
    end of its stderr (see :class:`CliAdapter`). TimeoutError past ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    try:
        proc = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            bufsize=0,
            start_new_session=True,
        )
    except FileNotFoundError:
        raise AdapterError(f"--heron-cli-cmd: command not found: {command[0]!r}") from None
    except PermissionError:
        raise AdapterError(f"--heron-cli-cmd: cannot execute {command[0]!r}") from None
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    out, err = bytearray(), bytearray()
    pidfd: int | None = None
    with contextlib.suppress(AttributeError, OSError):
        pidfd = os.pidfd_open(proc.pid)  # readable once the process exits (Linux 5.3+)
    try:
        readers = {proc.stdout.fileno(): out, proc.stderr.fileno(): err}
        for fd in readers:
            os.set_blocking(fd, False)
        inp: int | None = proc.stdin.fileno()
        os.set_blocking(proc.stdin.fileno(), False)
        pending = memoryview(payload)
        poller = select.poll()
        for fd in readers:
            poller.register(fd, select.POLLIN)
        poller.register(proc.stdin.fileno(), select.POLLOUT)
        if pidfd is not None:
            poller.register(pidfd, select.POLLIN)
        while not _exited(proc.pid):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(
                    f"the command ran longer than {timeout_s:g}s (--heron-timeout); its process "
                    "group was killed"
                )
            wait = remaining if pidfd is not None else min(remaining, TICK_S)
            for fd, _event in poller.poll(max(1, int(wait * 1000))):
                if fd == inp:
                    try:
                        pending = pending[os.write(inp, pending) :]
                    except BlockingIOError:
                        continue
                    except OSError:  # it closed its stdin: what it did not read is dropped
                        pending = pending[:0]
                    if not pending:
                        poller.unregister(inp)
                        proc.stdin.close()
                        inp = None
                elif fd in readers and not _drain(fd, readers[fd], fd == proc.stderr.fileno()):
                    poller.unregister(fd)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)  # its background children: the answer is in
        for fd, buffer in readers.items():  # what was written before; nothing more can come
            _drain(fd, buffer, fd == proc.stderr.fileno(), chunks=(MAX_CLI_OUTPUT >> 16) + 2)
    finally:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)  # the group: background children too
        proc.wait()
        if pidfd is not None:
            os.close(pidfd)
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            with contextlib.suppress(OSError):
                pipe.close()
    return proc.returncode, bytes(out), bytes(err)


def _drain(fd: int, buffer: bytearray, tail_only: bool, chunks: int | None = 16) -> bool:
    """Read what ``fd`` has now (at most ``chunks`` reads) into ``buffer``; False at end of file.
    Stdout past MAX_CLI_OUTPUT is an AdapterError; of stderr only the last STDERR_TAIL bytes
    are kept."""
    while chunks is None or chunks > 0:
        if chunks is not None:
            chunks -= 1
        try:
            chunk = os.read(fd, 1 << 16)
        except BlockingIOError:
            return True
        if not chunk:
            return False
        buffer += chunk
        if tail_only and len(buffer) > STDERR_TAIL:
            del buffer[: len(buffer) - STDERR_TAIL]
        elif not tail_only and len(buffer) > MAX_CLI_OUTPUT:
            raise AdapterError(f"the command printed more than {MAX_CLI_OUTPUT >> 20} MiB")
    return True
