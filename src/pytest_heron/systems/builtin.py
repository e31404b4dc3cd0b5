"""The built-in adapters: ``gold`` (the harness's reference) and ``cli`` (any command)."""

from __future__ import annotations

import json
import shlex
import subprocess
from typing import Any

from pytest_heron.errors import AdapterError
from pytest_heron.types import BenchmarkContext, Prediction, Question


class GoldAdapter:
    """Answers every question with its gold SQL: the sanity check that must score 100%."""

    name = "gold"
    version = "1"

    def prepare(self, ctx: BenchmarkContext) -> None:
        self.ctx = ctx

    def generate(self, q: Question) -> Prediction:
        return Prediction(sql=q.gold_sql, tables_in_context=list(q.gold_tables))


class CliAdapter:
    """Runs ``--heron-cli-cmd`` once per question: a JSON object on stdin (id, question, dialect,
    dsn); stdout is a JSON object (``sql``, optional ``tables``, ``usage``) or plain SQL text.
    A non-zero exit is an adapter error carrying the end of stderr."""

    name = "cli"
    version = "1"

    def __init__(self) -> None:
        self.command: list[str] = []
        self.timeout: float | None = None
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
        try:
            done = subprocess.run(
                self.command,
                input=payload,
                capture_output=True,
                text=True,
                timeout=self.timeout,
                check=False,
            )
        except FileNotFoundError:
            raise AdapterError(f"--heron-cli-cmd: command not found: {self.command[0]!r}") from None
        except subprocess.TimeoutExpired:
            raise TimeoutError(f"the command ran longer than {self.timeout:g}s") from None
        if done.returncode != 0:
            tail = done.stderr.strip()[-1000:] or "(no stderr)"
            raise AdapterError(f"the command exited with status {done.returncode}: {tail}")
        out = done.stdout.strip()
        if out.startswith("{"):
            try:
                return json.loads(out)
            except json.JSONDecodeError as exc:
                raise AdapterError(f"the command printed invalid JSON: {exc}") from None
        return out
