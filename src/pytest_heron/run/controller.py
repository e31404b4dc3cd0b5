"""The benchmark run: states, adapter, outcomes, results. Used by the plugin's hooks.

One :class:`HeronRun` exists per pytest process. On the controller (or with ``-n 0``) it gets a
server and builds the states; on an xdist worker it receives the states from the controller
through ``workerinput`` and only answers questions. The stages it drives, in order:

1. :meth:`build_states`: a server (:mod:`~pytest_heron.database.server`), the seeded states
   (:mod:`~pytest_heron.database.states`), the run's :class:`Conditions` and the journal;
2. :meth:`answer`: one question through the adapter, the sandbox and the comparator
   (:func:`~pytest_heron.scoring.score.score_question`), giving an :class:`Outcome`;
3. :meth:`record`: the outcome kept and journaled;
4. :meth:`finish`: the :class:`Results` (metrics included), written where asked.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import platform
import sys
from collections.abc import Callable, Collection, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, replace
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import psycopg

from pytest_heron import __version__
from pytest_heron.board import BUILTIN_PRICES, Protocol, load_protocol
from pytest_heron.core.errors import (
    ENDPOINT_REFUSED,
    AdapterError,
    ConfigError,
    ErrorKind,
    HeronError,
    ResultsFileError,
)
from pytest_heron.core.paths import cache_dir
from pytest_heron.core.safe_text import printable
from pytest_heron.core.types import BenchmarkContext, Limits, LLMOptions
from pytest_heron.database import Server, State, StateRef, choose, ensure_state, seed_jobs, start
from pytest_heron.dataset import GoldQuestion, for_layout, load_questions, questions_digest
from pytest_heron.generate import load_bundle
from pytest_heron.options import Settings
from pytest_heron.results import (
    Comparison,
    Conditions,
    Journal,
    Results,
    check_writable,
    compare_runs,
    find_run,
    journal_path,
    read_journal,
    read_results,
    results_document,
    runs_folder,
    save_run,
    write_results,
)
from pytest_heron.sandbox import release_adapters
from pytest_heron.scoring import (
    WITHHELD,
    Outcome,
    load_prices,
    price_for,
    score_question,
    score_retrieval,
)
from pytest_heron.systems import (
    NEEDS,
    FileSystem,
    System,
    api_key,
    asks_a_model,
    check_declared,
    check_endpoint,
    check_extras,
    check_options,
    default_cache_path,
    endpoint_id,
    load_predictions,
    open_system,
)

Hook = Callable[[str], Any]


def _package_version(name: str) -> str | None:
    try:
        return version(name)
    except PackageNotFoundError:
        return None


class HeronRun:
    def __init__(
        self,
        settings: Settings,
        hook: Hook | None,
        rootdir: Path | None = None,
        *,
        selecting: bool = False,
    ) -> None:
        self.settings = settings
        self.hook = hook
        self.rootdir = (rootdir or Path.cwd()).absolute()
        loaded = load_questions(settings.questions, key_env=settings.sealed_key_env)
        if settings.questions is None:  # the built-in set has Citus-valid golds where needed
            loaded = for_layout(loaded, settings.layout)
        self.questions: dict[str, GoldQuestion] = {q.id: q for q in loaded}
        # with --heron-variants the public questions are the parents; the variants replace
        # them once the states exist (they are audited there), under ids known now
        self.parents = dict(self.questions)
        self.variant_short: dict[str, str] = {}
        self.variant_values: list[dict[str, Any]] | None = None
        self.price = price_for(settings.model, load_prices(settings.prices))  # fail fast
        name = settings.adapter or ""
        check_extras(name)
        check_options(
            name, model=settings.model, endpoint=settings.endpoint, offline=settings.offline
        )
        # fail fast on an unknown name too; an isolated adapter is looked up in its own process
        if ":" in name:
            _importable_from(self.rootdir, Path.cwd())
        # files the run will read or write, checked before any process starts: a bad journal or
        # a report.html that is a folder fails now, not after the run
        if settings.report is not None:
            from pytest_heron.site import check_report_folder

            check_report_folder(settings.report)
        if settings.resume and settings.output is not None:
            read_journal(journal_path(settings.output))
        self.system: System
        if name == "file":
            ids: Collection[str] = self.questions
            parents: dict[str, str] = {}  # a public id -> the run's first variant of it
            if settings.variants is not None:
                from pytest_heron.audit import variant_id, variant_ids

                ids = variant_ids(list(self.questions.values()), *settings.variants)
                seed = settings.variants[0]
                parents = {q.id: variant_id(q.id, seed, 0) for q in self.questions.values()}
            self.system = _file_system(settings, ids, every=not selecting, parents=parents)
        else:
            self.system = open_system(
                name,
                hook,
                in_process=settings.in_process,
                timeout_s=settings.timeout,
                # what an isolated adapter may not read, and the LLM cache folder it shares
                covered=[cache_dir(), *([settings.questions] if settings.questions else [])],
                shared=default_cache_path(settings.cache).parent,
                private=_outputs(settings, self.rootdir),
                network=settings.adapter_network,
                offline=settings.offline,
                python=settings.adapter_python,
            )
        self.asks_a_model = asks_a_model(name, self.system.needs)
        if name not in NEEDS:  # the built-ins were checked above, before the process
            try:  # what a third-party adapter declares it needs, checked as the built-ins' are
                check_declared(name, self.system.needs)
                check_options(
                    name,
                    model=settings.model,
                    endpoint=settings.endpoint,
                    offline=settings.offline,
                    declared=self.system.needs,
                )
            except ConfigError:
                self.system.close()
                raise
        self.adapter_version = self.system.version
        # --heron-task=retrieval, or an adapter that declares it: only its tables are scored
        self.task = "retrieval" if "retrieval" in (settings.task, self.system.task) else "sql"
        self.protocol = None if settings.protocol is None else _check_protocol(settings)
        refused = (
            None
            if self.protocol is None
            else self.protocol.isolation_problem(self.system.isolation)
        )
        if refused is not None:
            self.system.close()
            raise ConfigError(f"--heron-protocol {settings.protocol}: {refused}")
        if settings.output is not None:
            check_writable(settings.output, "--heron-output")
        if settings.report is not None:
            check_writable(settings.report, "--heron-report", folder=True)
        # the run to compare with, found now: "the newest" is the newest before this one
        self.baseline: Path | None = None
        if settings.compare is not None:
            self.baseline = find_run(runs_folder(self.rootdir), settings.compare)
            if self.baseline is not None:
                read_results(self.baseline)  # a broken file fails now, not after the run
        self.saved: Path | None = None
        self.comparison: Comparison | None = None
        self.compare_failures: list[str] = []
        self.compare_error: str | None = None
        self.server: Server | None = None
        self._pending: Future[tuple[str, Server]] | None = None  # see prestart()
        self.states: list[StateRef] = []
        self.conditions: Conditions | None = None
        self.outcomes: dict[str, Outcome] = {}
        self._context: BenchmarkContext | None = None
        self.results: Results | None = None
        self.journal: Journal | None = None
        self.resumed: list[str] = []
        self.dropped: list[str] = []  # journal records that failed validation (asked again)
        self.refused: list[str] = []  # journal records of a refused endpoint (asked again)

    # -- controller ---------------------------------------------------------------------------

    def prestart(self) -> None:
        """Start getting the server (choosing the backend, starting the embedded PostgreSQL)
        in a thread now, so it overlaps what the process does before :meth:`build_states`
        (pytest's configuration, collection set-up): starting PostgreSQL is another process's
        work, and the wait releases the GIL. Called on the controller only; its errors are
        raised by :meth:`build_states`."""
        if self._pending is None and self.server is None:
            s = self.settings
            pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="heron-server")
            self._pending = pool.submit(_get_server, s.backend, s.dsn)
            pool.shutdown(wait=False)  # the thread ends when the start does

    def build_states(self, progress: Callable[[str], None]) -> None:
        s = self.settings
        self._check_endpoint(progress)
        self.prestart()
        assert self._pending is not None
        pending, self._pending = self._pending, None
        kind, self.server = pending.result()
        progress(f"backend: {kind}")
        if self.system.note and self.system.isolation == "none":
            progress(self.system.note)  # e.g. "adapter isolation: none (bubblewrap is not ...)"
        built: list[State] = []
        for seed in s.seeds:  # the adapter gets a role on the first state only
            built.append(
                ensure_state(
                    self.server,
                    s.scale,
                    seed,
                    jobs=seed_jobs(),
                    progress=progress,
                    adapter=not built,
                    layout=s.layout,
                )
            )
        self.states = [st.ref() for st in built]
        if s.variants is not None:
            self._draw_variants(progress)
        self._check_gold()
        self.conditions = self._conditions(kind, built[0])
        if s.output is not None:
            self._open_journal()

    def _draw_variants(self, progress: Callable[[str], None]) -> None:
        """Replace the questions by their variants, drawn and audited on this run's states."""
        assert self.settings.variants is not None
        seed, count = self.settings.variants
        from pytest_heron.audit import draw_variants

        drawn, self.variant_short = draw_variants(
            list(self.parents.values()), seed, count, [st.admin_dsn for st in self.states]
        )
        if not drawn:
            raise HeronError(
                f"--heron-variants={seed}:{count}: no question of the set has parameters"
            )
        self.questions = {v.question.id: v.question for v in drawn}
        self.variant_values = [
            {"id": v.question.id, "parent": v.question.parent, "values": v.to_json()["parameters"]}
            for v in drawn
        ]
        progress(
            f"variants: {len(drawn)} drawn at seed {seed} ({count} per parameterised question)"
            + (f"; {len(self.variant_short)} question(s) short" if self.variant_short else "")
        )

    def _check_endpoint(self, progress: Callable[[str], None]) -> None:
        """An LLM adapter's endpoint answers and serves the model (before any state is built)."""
        s = self.settings
        if not self.asks_a_model or s.offline or not s.endpoint or not s.model:
            return
        note = check_endpoint(s.endpoint, s.model, api_key())
        progress(note or f"endpoint {s.endpoint} serves {s.model}")

    def _check_gold(self) -> None:
        """Every gold query plans on every state (``EXPLAIN``, nothing executed), so a question
        set or a state that cannot work fails once, before the first question, not 100 times.

        One read-only autocommit session per state, the states checked in parallel, one round
        trip per query (a failed EXPLAIN ends only its own implicit transaction)."""
        limit = max(1, int(self.settings.statement_timeout * 1000))
        questions = list(self.questions.values())

        def check(state: StateRef) -> list[str]:
            found: list[str] = []
            with psycopg.connect(state.admin_dsn, autocommit=True) as conn:
                conn.execute(
                    f"SET default_transaction_read_only = on; SET statement_timeout = {limit}"
                )
                for q in questions:
                    try:
                        conn.execute("EXPLAIN " + q.gold_sql.strip().rstrip(";"))
                    except psycopg.Error as exc:
                        first = (exc.diag.message_primary or str(exc)).strip()[:200]
                        first = WITHHELD if q.sealed else first
                        found.append(f"{q.id} on seed {state.seed}: {first}")
            return found

        with ThreadPoolExecutor(max_workers=max(1, len(self.states))) as pool:
            problems = [p for found in pool.map(check, self.states) for p in found]
        if problems:
            shown = "; ".join(problems[:5]) + (
                f"; and {len(problems) - 5} more" if len(problems) > 5 else ""
            )
            raise HeronError(
                f"the gold SQL of {len(problems)} question(s) does not run: {shown}. Check the "
                "question files (python -m pytest_heron.audit), or rebuild the states "
                "(heron seed --replace)."
            )

    def _conditions(self, backend: str, first: State) -> Conditions:
        s = self.settings
        assert self.server is not None
        with psycopg.connect(self.server.admin_dsn) as conn:
            row = conn.execute("SHOW server_version").fetchone()
        manifest = first.manifest
        own = self.system.conditions(self.context())
        return Conditions(
            adapter=s.adapter or "",
            adapter_version=None if self.adapter_version is None else str(self.adapter_version),
            scale=s.scale,
            seeds=tuple(s.seeds),
            states=s.states,
            model=s.model,
            temperature=s.temperature,
            samples=s.samples,
            endpoint=endpoint_id(s.endpoint) or None,
            max_tokens=s.max_tokens if s.model else None,  # LLM adapters need a model
            adapter_conditions={str(k): own[k] for k in sorted(own)},
            price=self.price,
            tables=_int_or_none(manifest.get("tables")),
            schemas=_int_or_none(manifest.get("schemas")),
            rows=_int_or_none(manifest.get("rows")),
            backend=backend,
            layout=s.layout,
            nodes=_int_or_none(manifest.get("nodes")) if s.layout != "standard" else None,
            postgres_version=str(row[0]) if row else None,
            heron_version=__version__,
            data_version=load_bundle().data_version,
            questions_digest=questions_digest(self.questions),
            sqlglot_version=_package_version("sqlglot"),
            psycopg_version=_package_version("psycopg"),
            started_at=dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            machine=f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores, "
            f"Python {platform.python_version()}",
            protocol=None if self.protocol is None else self.protocol.name,
            protocol_digest=None if self.protocol is None else self.protocol.digest,
            adapter_isolation=self.system.isolation,
            adapter_sandbox=self.system.sandbox,
            adapter_name=_adapter_name(self.system.adapter_name),
            task=self.task,
            variants=None
            if s.variants is None
            else {"seed": s.variants[0], "count": s.variants[1]},
        )

    def _open_journal(self) -> None:
        s = self.settings
        assert s.output is not None and self.conditions is not None
        self.journal = Journal(
            journal_path(s.output), self.conditions.fingerprint(), resume=s.resume
        )
        for qid, record in self.journal.previous.items():
            if qid not in self.questions:
                continue
            try:
                outcome = Outcome.from_json(record, f"journal record {qid!r}")
            except ResultsFileError:
                self.dropped.append(qid)  # asked again rather than trusted
                continue
            if outcome.error_kind == ErrorKind.ADAPTER_ERROR and (outcome.error or "").startswith(
                ENDPOINT_REFUSED
            ):
                self.refused.append(qid)  # the endpoint was down: asked again once it is back
                continue
            self.outcomes[qid] = outcome
        self.dropped.sort()
        self.refused.sort()
        self.resumed = sorted(self.outcomes)

    def fingerprint(self) -> dict[str, Any]:
        """What must be equal for a journal to be resumed."""
        assert self.conditions is not None
        return self.conditions.fingerprint()

    def worker_payload(self) -> dict[str, Any]:
        """What an xdist worker needs (called on the controller, which answers no question
        under xdist: its adapter process, used for the conditions, is closed here)."""
        assert self.conditions is not None
        self.system.close()
        return {
            "states": [asdict(st) for st in self.states],
            "conditions": self.conditions.to_json(),
            "resumed": self.resumed,
            "variants": self.variant_values,
        }

    def load_payload(self, payload: Mapping[str, Any]) -> None:
        self.states = [StateRef(**st) for st in payload["states"]]
        self.conditions = Conditions.from_json(payload["conditions"])
        self.resumed = list(payload.get("resumed", []))
        if payload.get("variants") is not None:
            from pytest_heron.audit import from_payload

            rebuilt = from_payload(self.parents, payload["variants"])
            self.questions = {q.id: q for q in rebuilt}

    def stop(self) -> None:
        release_adapters()
        self.system.close()
        if self._pending is not None:  # started, never used (the session ended before)
            pending, self._pending = self._pending, None
            with contextlib.suppress(Exception):  # nothing to stop: build_states reports it
                self.server = pending.result()[1]
        if self.server is not None:
            self.server.stop()
            self.server = None

    # -- answering ----------------------------------------------------------------------------

    def context(self) -> BenchmarkContext:
        """What the adapter is told: built once from :class:`Settings` and the first state."""
        if self._context is None:
            self._context = self._make_context()
        return self._context

    def _make_context(self) -> BenchmarkContext:
        s = self.settings
        bundle = load_bundle()
        return BenchmarkContext(
            dsn=self.states[0].adapter_dsn or "",  # never the scoring role's DSN
            dialect="postgres",
            scale=s.scale,
            seed=s.seed,
            schema_ddl=bundle.ddl,
            tables=tuple(sorted(bundle.tables)),
            limits=Limits(timeout_s=s.timeout, statement_timeout_s=s.statement_timeout),
            llm=LLMOptions(
                endpoint=s.endpoint,
                model=s.model,
                temperature=s.temperature,
                samples=s.samples,
                strategy=s.strategy,
                max_tokens=s.max_tokens,
                agent_mode=s.agent_mode,
                cache_path=str(default_cache_path(s.cache)),
                offline=s.offline,
            ),
            data_version=bundle.data_version,
            cli_cmd=s.cli_cmd,
        )

    def answer(self, q: GoldQuestion) -> Outcome:
        try:
            self.system.ready(self.context())
        except AdapterError as exc:
            return Outcome.blank(q).failed(ErrorKind.ADAPTER_ERROR, str(exc))
        if self.task == "retrieval":
            return score_retrieval(self.system, q, self.settings.timeout)
        return score_question(
            self.system,
            q,
            self.states,
            adapter_timeout=self.settings.timeout,
            statement_timeout=self.settings.statement_timeout,
            samples=self.settings.samples,
        )

    # -- results ------------------------------------------------------------------------------

    def record(self, outcome: Outcome) -> None:
        self.outcomes[outcome.id] = outcome
        if self.journal is not None:
            self.journal.append(outcome.to_json())

    def record_crash(self, qid: str, message: str) -> None:
        q = self.questions.get(qid)
        if q is None or qid in self.outcomes:
            return
        message = f"no outcome was reported ({WITHHELD})" if q.sealed else message
        self.record(Outcome.blank(q).failed(ErrorKind.INFRA_CRASH, message[-2000:]))

    def header(self) -> str:
        """The report header's line (see :func:`pytest_heron.results.header_line`)."""
        from pytest_heron.results import header_line

        s = self.settings
        return header_line(
            adapter=s.adapter or "",
            isolation=self.system.isolation,
            sandbox=self.system.sandbox,
            scale=s.scale,
            seeds=s.seeds,
            backend=s.backend,
            layout=s.layout,
            data_version=load_bundle().data_version,
            questions=len(self.questions),
            source="built-in" if s.questions is None else str(s.questions),
        )

    def finish(
        self, fields: Callable[[Results], Mapping[str, Any]] | None = None
    ) -> Results | None:
        if self.journal is not None:
            self.journal.close()
        if not self.outcomes or self.conditions is None:
            return None
        answered = len(self.outcomes)
        total = len(self.questions)
        conditions = replace(
            self.conditions,
            n_questions=answered,
            subset_of=total if answered < total else None,
        )
        self.results = results_document(conditions, list(self.outcomes.values()))
        if fields is not None:
            self.results = replace(self.results, extra=_scalar_fields(fields(self.results)))
        if self.settings.output is not None:
            write_results(self.settings.output, self.results)
        if self.settings.report is not None:
            from pytest_heron.site import write_report

            shown = [q for q in self.questions.values() if not q.sealed]  # sealed: ids only
            write_report(self.settings.report, self.results, shown)
        self._save_and_compare(self.results)
        return self.results

    def resumed_failures(self) -> list[str]:
        """The questions taken from the journal whose item would have failed had it run in this
        session (wrong answers without a gate; an infrastructure crash with one, as
        :class:`~pytest_heron.run.items.HeronItem` fails them): they count towards the exit
        status, which is then the whole run's, not only the part after the interrupt."""
        return [
            qid
            for qid in self.resumed
            if not self.outcomes[qid].correct
            and (not self.settings.gated or self.outcomes[qid].error_kind is ErrorKind.INFRA_CRASH)
        ]

    def gate_failures(self) -> list[str]:
        """Why the gate failed (``--heron-min-ex``, ``--heron-compare-fail``); empty when it
        passed, when none was asked for, or before the run finished."""
        out: list[str] = []
        minimum = self.settings.min_ex
        if minimum is not None and self.results is not None:
            ex = self.results.metrics.ex_multistate or 0.0
            if ex < minimum:
                out.append(f"multi-state EX {ex:.1f}% is below --heron-min-ex={minimum:g}")
        out.extend(self.compare_failures)
        return out

    def _save_and_compare(self, results: Results) -> None:
        s = self.settings
        if s.save is not None:
            self.saved = save_run(self.rootdir, results, s.save or None)
        if self.baseline is not None:
            baseline = read_results(self.baseline)
            try:
                self.comparison = compare_runs(
                    baseline, results, _shown(self.baseline, self.rootdir), "this run"
                )
            except HeronError as exc:  # no question in common: nothing to pair
                self.compare_error = f"{_shown(self.baseline, self.rootdir)}: {exc}"
                self.compare_failures = [self.compare_error] if s.compare_fail else []
                return
            self.compare_failures = self.comparison.failures(dict(s.compare_fail))


def _scalar_fields(found: Mapping[str, Any]) -> dict[str, str | int | float | bool | None]:
    """The results file's extra fields, checked: names are strings, values JSON scalars."""
    out: dict[str, str | int | float | bool | None] = {}
    for key, value in found.items():
        if not isinstance(key, str) or not (
            value is None or isinstance(value, (str, int, float, bool))
        ):
            raise ConfigError(
                f"pytest_heron_results_fields: field {key!r} = {value!r}: a field is a name and "
                "a string, number, true/false or null"
            )
        out[key] = value
    return out


def _outputs(settings: Settings, rootdir: Path) -> list[Path]:
    """What the run writes or has written, kept from the adapter's sandbox even where it lies
    inside a folder the adapter is shown: the results file and its journal, the report folder,
    the saved runs."""
    found = [runs_folder(rootdir)]
    if settings.output is not None:
        found += [settings.output, journal_path(settings.output)]
    if settings.report is not None:
        found.append(settings.report)
    return found


def _get_server(backend: str, dsn: str | None) -> tuple[str, Server]:
    kind = choose(backend, dsn)
    return kind, start(kind, dsn)


def _file_system(
    s: Settings,
    questions: Collection[str],
    *,
    every: bool = True,
    parents: Mapping[str, str] | None = None,
) -> System:
    """``--heron-adapter=file``: the predictions file, checked before the first question."""
    assert s.predictions is not None  # options.resolve requires it
    if s.samples != 1:
        raise ConfigError("--heron-adapter=file has one prediction per question: --heron-samples=1")
    return FileSystem(load_predictions(s.predictions, questions, every=every, parents=parents))


def _check_protocol(s: Settings) -> Protocol:
    """The protocol of ``--heron-protocol``, after checking the settings follow it (before the
    first question: a run that could not be published fails at once, naming the field)."""
    assert s.protocol is not None
    protocol = load_protocol(s.protocol)
    problems = protocol.mismatches(
        scale=s.scale,
        seeds=s.seeds,
        states=s.states,
        model=s.model,
        temperature=s.temperature,
        samples=s.samples,
    )
    if protocol.prices == BUILTIN_PRICES and s.prices is not None:
        problems.append(f"prices: the protocol {protocol.name!r} uses the built-in price table")
    if problems:
        raise ConfigError(f"--heron-protocol {s.protocol}: " + "; ".join(problems))
    return protocol


def _importable_from(*folders: Path) -> None:
    """Put the rootdir and the current folder at the end of ``sys.path``, so ``module:Class``
    finds a module there with the plain ``pytest`` command too (``python -m pytest`` puts the
    current folder first by itself). The adapter's own process gets this ``sys.path``."""
    for folder in folders:
        entry = str(folder.absolute())
        if entry not in sys.path:
            sys.path.append(entry)


def _shown(path: Path, rootdir: Path) -> str:
    """``path`` relative to the rootdir where it is inside it."""
    try:
        return str(path.relative_to(rootdir))
    except ValueError:
        return str(path)


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _adapter_name(name: str | None) -> str | None:
    """The adapter's ``name`` as the conditions record it: printable, at most 200 characters
    (it is the adapter's own text), None when empty."""
    return None if name is None else (printable(name)[:200] or None)
