"""The ``promptquery`` adapter: the PromptQuery CLI in one-shot mode (``pip install
'pytest-heron[promptquery]'``).

Each question runs ``python -m promptquery --query QUESTION --out json --model openai/MODEL
--selector-model openai/MODEL DSN`` (the installed CLI, from the interpreter running the
benchmark) on the read-only DSN. PromptQuery ranks the tables with TF-IDF, lets the LLM pick up
to 15, adds foreign-key neighbours, asks the LLM for SQL, runs it read-only and, on a database
error, asks once for a repair. Its OpenAI client honours ``OPENAI_BASE_URL``; the adapter sets it
to its :class:`~.proxy.LLMProxy` (the project's LLM layer: cache, offline replay, meter), sets
``OPENAI_API_KEY`` to a placeholder (the real key stays with the LLM layer), and removes
``ANTHROPIC_API_KEY`` from the child's environment so the provider is the one asked for.
PromptQuery always asks for temperature 0; ``--heron-temperature`` does not reach it.

One-shot JSON mode prints the *result rows* on stdout, not the SQL (the SQL goes to stderr as
rich-formatted text). The adapter therefore takes the SQL from the recorded LLM exchanges, with
PromptQuery's own ``extract_sql`` and its repair rule: the generated SQL, replaced by each
repair reply that is non-empty, different and passes PromptQuery's ``validate_select_only``.
This is the SQL PromptQuery last ran.

Reports: that SQL, billed usage of every call (selector, generator, repair), and
``tables_in_context``: the ``TABLE`` entries of the generator's prompt. Exit status 1 (LLM or
connection error, empty SQL) is an adapter error carrying the end of stderr; 2 (PromptQuery's
safety guard refused) and 3 (the database rejected the SQL) still return the SQL, which the
benchmark then scores like any other.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from typing import Any

from pytest_heron import AdapterError, BenchmarkContext, Prediction, Question
from pytest_heron.llm import PLACEHOLDER_KEY, attach_usage, client_for

from .proxy import LLMProxy, Recording
from .schema_text import require

GENERATOR_MARK = "You are a senior data engineer writing PostgreSQL queries."
REPAIR_MARK = "The query below failed when run against the database."


def prompt_tables(system_prompt: str) -> list[str]:
    """The tables listed in a PromptQuery generator prompt (``TABLE name`` lines), sorted.

    >>> prompt_tables("Available schema:\\nTABLE core.users\\n  id bigint\\n\\nTABLE core.tenants")
    ['core.tenants', 'core.users']
    """
    return sorted({m.group(1).lower() for m in re.finditer(r"^TABLE (\S+)$", system_prompt, re.M)})


def final_sql(recording: Recording, extract: Any, validate: Any) -> tuple[str, list[str]]:
    """The SQL PromptQuery ended with and the tables of its generator prompt (see the module
    docstring); ``extract``/``validate`` are PromptQuery's own functions."""
    current = ""
    tables: list[str] = []
    for messages, reply in recording.chats():
        system = next((str(m["content"]) for m in messages if m.get("role") == "system"), "")
        user = next((str(m["content"]) for m in messages if m.get("role") == "user"), "")
        if not system.startswith(GENERATOR_MARK):
            continue  # the table selector
        if user.startswith(REPAIR_MARK):
            repaired = extract(reply)
            if not repaired or repaired == current:
                continue
            try:
                validate(repaired)
            except Exception:
                continue
            current = repaired
        else:
            current = extract(reply)
            tables = prompt_tables(system)
    return current, tables


class PromptQueryAdapter:
    """See the module docstring."""

    name = "promptquery"
    version = "1"

    def __init__(self) -> None:
        self.proxy: LLMProxy | None = None
        self.command: list[str] = []
        self.env: dict[str, str] = {}
        self.timeout: float | None = None
        self.dsn = ""
        self.extract: Any = None
        self.validate: Any = None

    def prepare(self, ctx: BenchmarkContext) -> None:
        require("promptquery.cli", adapter="promptquery", extra="promptquery")
        require("openai", adapter="promptquery", extra="promptquery")
        self.extract = require(
            "promptquery.llm", adapter="promptquery", extra="promptquery"
        ).extract_sql
        self.validate = require(
            "promptquery.safety", adapter="promptquery", extra="promptquery"
        ).validate_select_only
        client = client_for(ctx, self.name, self.version)
        self.timeout = ctx.limits.timeout_s
        self.proxy = LLMProxy(client)
        spec = f"openai/{client.config.model}"
        self.command = [sys.executable, "-m", "promptquery", "--out", "json"]
        self.command += ["--model", spec, "--selector-model", spec]
        self.dsn = ctx.dsn
        env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
        env.update(
            OPENAI_BASE_URL=self.proxy.url,
            OPENAI_API_KEY=PLACEHOLDER_KEY,
            COLUMNS="200",
            NO_COLOR="1",
            TERM="dumb",
        )
        self.env = env

    def generate(self, q: Question, sample: int = 0) -> Prediction:
        if self.proxy is None:
            raise AdapterError("the promptquery adapter was not prepared")
        recording = self.proxy.record(q.id, sample, self.timeout)
        try:
            done = subprocess.run(
                [*self.command, "--query", q.question, self.dsn],
                capture_output=True,
                text=True,
                env=self.env,
                timeout=self.timeout,
                check=False,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired:
            late = TimeoutError(f"promptquery ran longer than {self.timeout:g}s")
            attach_usage(late, recording.meter)
            raise late from None
        sql, tables = final_sql(recording, self.extract, self.validate)
        if done.returncode not in (0, 2, 3) or not sql:
            errors = recording.errors()
            why = f"the LLM call failed: {errors[0]}" if errors else done.stderr.strip()[-1000:]
            failed = AdapterError(
                f"promptquery exited with status {done.returncode}: {why or '(no stderr)'}"
            )
            attach_usage(failed, recording.meter)
            raise failed
        return Prediction(
            sql=sql,
            tables_in_context=tables,
            usage=recording.usage(),
            trace={"exit_status": done.returncode, "stderr": done.stderr[-2000:]},
        )
