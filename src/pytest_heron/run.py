"""The benchmark run: states, adapter, outcomes, results. Used by the plugin's hooks.

One :class:`HeronRun` exists per pytest process. On the controller (or with ``-n 0``) it gets a
server and builds the states; on an xdist worker it receives the states from the controller
through ``workerinput`` and only answers questions.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import platform
from collections.abc import Callable, Mapping
from dataclasses import asdict
from typing import Any

import psycopg

from pytest_heron import __version__
from pytest_heron.database.server import Server, choose, start
from pytest_heron.database.states import State, ensure_state
from pytest_heron.dataset.questions import load_questions
from pytest_heron.errors import AdapterError
from pytest_heron.generate import load_bundle
from pytest_heron.options import Settings
from pytest_heron.results import document as report
from pytest_heron.results.journal import Journal, journal_path
from pytest_heron.sandbox.roles import release_adapters
from pytest_heron.scoring.pricing import load_prices, price_for
from pytest_heron.scoring.score import StateRef, new_outcome, score_question
from pytest_heron.systems.llm.cache import default_cache_path
from pytest_heron.systems.registry import make_adapter
from pytest_heron.types import Adapter, BenchmarkContext, Question

Hook = Callable[[str], Any]
SEED_JOBS = max(1, min(4, os.cpu_count() or 1))  # processes that load a missing state


class HeronRun:
    def __init__(self, settings: Settings, hook: Hook | None) -> None:
        self.settings = settings
        self.hook = hook
        self.questions: dict[str, Question] = {q.id: q for q in load_questions(settings.questions)}
        probe = make_adapter(settings.adapter or "", hook)  # fail fast on an unknown name
        self.adapter_version = getattr(probe, "version", None)
        self.price = price_for(settings.model, load_prices(settings.prices))  # fail fast too
        self.server: Server | None = None
        self.states: list[StateRef] = []
        self.conditions: dict[str, Any] = {}
        self.outcomes: dict[str, dict[str, Any]] = {}
        self._adapter: Adapter | None = None
        self._adapter_error: str | None = None
        self.results: dict[str, Any] | None = None
        self.journal: Journal | None = None
        self.resumed: list[str] = []

    # -- controller ---------------------------------------------------------------------------

    def build_states(self, progress: Callable[[str], None]) -> None:
        s = self.settings
        kind = choose(s.backend, s.dsn)
        progress(f"backend: {kind}")
        self.server = start(kind, s.dsn)
        built: list[State] = []
        for seed in s.seeds:  # the adapter gets a role on the first state only
            built.append(
                ensure_state(
                    self.server, s.scale, seed, jobs=SEED_JOBS, progress=progress, adapter=not built
                )
            )
        self.states = [
            StateRef(st.seed, st.database, st.admin_dsn, st.reader_dsn, st.adapter_dsn)
            for st in built
        ]
        with psycopg.connect(self.server.admin_dsn) as conn:
            version = conn.execute("SHOW server_version").fetchone()
        first = built[0].manifest
        self.conditions = {
            "adapter": s.adapter,
            "adapter_version": self.adapter_version,
            "scale": s.scale,
            "seeds": list(s.seeds),
            "states": s.states,
            "model": s.model,
            "temperature": s.temperature,
            "samples": s.samples,
            "strategy": s.strategy if s.adapter == "raw-llm" else None,
            "price": self.price,
            "n_questions": None,
            "tables": first.get("tables"),
            "schemas": first.get("schemas"),
            "rows": first.get("rows"),
            "backend": kind,
            "postgres_version": str(version[0]) if version else None,
            "heron_version": __version__,
            "started_at": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores, "
            f"Python {platform.python_version()}",
        }

        if s.output is not None:
            self.journal = Journal(journal_path(s.output), self.fingerprint(), resume=s.resume)
            self.outcomes.update(
                {k: v for k, v in self.journal.previous.items() if k in self.questions}
            )
            self.resumed = sorted(self.outcomes)

    def fingerprint(self) -> dict[str, Any]:
        """What must be equal for a journal to be resumed."""
        digest = hashlib.sha256()
        for q in self.questions.values():
            digest.update(f"{q.id}\x1f{q.gold_sql}\x1e".encode())
        c = self.conditions
        return {
            "adapter": c["adapter"],
            "adapter_version": c["adapter_version"],
            "scale": c["scale"],
            "seeds": c["seeds"],
            "model": c["model"],
            "temperature": c["temperature"],
            "samples": c["samples"],
            "strategy": c["strategy"],
            "data_version": load_bundle().data_version,
            "questions": digest.hexdigest()[:16],
            "heron_version": c["heron_version"],
        }

    def worker_payload(self) -> dict[str, Any]:
        return {
            "states": [asdict(st) for st in self.states],
            "conditions": self.conditions,
            "resumed": self.resumed,
        }

    def load_payload(self, payload: Mapping[str, Any]) -> None:
        self.states = [StateRef(**st) for st in payload["states"]]
        self.conditions = dict(payload["conditions"])
        self.resumed = list(payload.get("resumed", []))

    def stop(self) -> None:
        release_adapters()
        if self.server is not None:
            self.server.stop()
            self.server = None

    # -- answering ----------------------------------------------------------------------------

    def adapter(self) -> Adapter:
        if self._adapter is None and self._adapter_error is None:
            s = self.settings
            ctx = BenchmarkContext(
                dsn=self.states[0].adapter_dsn or "",  # never the scoring role's DSN
                dialect="postgres",
                scale=s.scale,
                seed=s.seed,
                schema_ddl=load_bundle().ddl,
                tables=tuple(sorted(load_bundle().tables)),
                options={
                    "cli_cmd": s.cli_cmd,
                    "timeout": s.timeout,
                    "endpoint": s.endpoint,
                    "model": s.model,
                    "temperature": s.temperature,
                    "samples": s.samples,
                    "strategy": s.strategy,
                    "llm_cache": str(default_cache_path(s.cache)),
                    "offline": s.offline,
                    "statement_timeout": s.statement_timeout,
                    "data_version": load_bundle().data_version,
                },
            )
            try:
                adapter = make_adapter(s.adapter or "", self.hook)
                adapter.prepare(ctx)
                self._adapter = adapter
            except Exception as exc:
                self._adapter_error = f"the adapter failed to prepare: {type(exc).__name__}: {exc}"
        if self._adapter is None:
            raise AdapterError(self._adapter_error or "the adapter is not available")
        return self._adapter

    def answer(self, q: Question) -> dict[str, Any]:
        try:
            adapter = self.adapter()
        except AdapterError as exc:
            out = new_outcome(q)
            out.update(error_kind="adapter_error", error=str(exc))
            return out
        return score_question(
            adapter,
            q,
            self.states,
            adapter_timeout=self.settings.timeout,
            statement_timeout=self.settings.statement_timeout,
            samples=self.settings.samples,
        )

    # -- results ------------------------------------------------------------------------------

    def record(self, outcome: Mapping[str, Any]) -> None:
        self.outcomes[str(outcome["id"])] = dict(outcome)
        if self.journal is not None:
            self.journal.append(outcome)

    def record_crash(self, qid: str, message: str) -> None:
        q = self.questions.get(qid)
        if q is None or qid in self.outcomes:
            return
        out = new_outcome(q)
        out.update(error_kind="infra_crash", error=message[-2000:])
        self.record(out)

    def finish(self) -> dict[str, Any] | None:
        if self.journal is not None:
            self.journal.close()
        if not self.outcomes:
            return None
        conditions = dict(self.conditions, n_questions=len(self.outcomes))
        self.results = report.results_document(conditions, list(self.outcomes.values()))
        if self.settings.output is not None:
            report.write_results(self.settings.output, self.results)
        if self.settings.report is not None:
            from pytest_heron.results.folder import write_report

            write_report(self.settings.report, self.results)
        return self.results
