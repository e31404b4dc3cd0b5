"""How the harness asks a system under test for its answers: the answerers.

:func:`open_system` turns ``--heron-adapter NAME`` into one of:

- :class:`GoldSystem` for ``gold``: the harness's own reference, answered from the question set
  (it needs the gold); no adapter protocol, no process.
- :class:`ChildSystem` for an entry point or ``module:attr`` (the default): the adapter lives in
  a process of its own (:mod:`pytest_heron.systems.child`), one per pytest process, started in
  its own session. ``prepare`` and ``generate`` each get ``--heron-timeout``; past it the whole
  process group gets SIGKILL and a fresh process is loaded and prepared for the next question
  (the question keeps the tokens its LLM replies billed before the kill: the process reports
  them as they arrive).
  Whatever the adapter does there (patch the scorer, hold the GIL, exit, raise
  ``KeyboardInterrupt``, print) reaches the harness only as its answer or as that question's
  ``adapter_error`` / ``adapter_timeout``.
- :class:`InProcessSystem` for an adapter made by the ``pytest_heron_make_adapter`` hook (its
  code lives in the pytest process), for any adapter with ``--heron-in-process`` (debugging),
  and for ``cli`` (harness code whose command is already a process group of its own): the
  adapter is called in a thread and abandoned at the deadline. Only ``cli`` counts as isolated.

Every answerer hands the adapter ``q.public()``, never the :class:`GoldQuestion` itself.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Protocol

from pytest_heron.core.errors import AdapterError, AdapterLookupError, AdapterTimeout, ConfigError
from pytest_heron.core.types import Adapter, BenchmarkContext
from pytest_heron.dataset import GoldQuestion
from pytest_heron.systems import child as wire
from pytest_heron.systems import jail as jails
from pytest_heron.systems.builtin import CliAdapter, GoldAdapter
from pytest_heron.systems.predictions import PredictionFile
from pytest_heron.systems.registry import GROUP, instantiate, known_adapters

NO_NEEDS: Mapping[str, Any] = {"llm": False, "missing": []}  # gold and file: harness code only
CLI_GRACE_S = 2.0  # the cli adapter enforces --heron-timeout itself; the thread waits this longer


class System(Protocol):
    """What the scorer asks of a system under test (see the module docstring)."""

    version: str | None  # the adapter's ``version`` attribute, recorded in the conditions
    adapter_name: str | None  # the adapter's ``name`` attribute, recorded beside its spec
    task: str | None  # the adapter's ``task`` attribute ("retrieval": it ranks tables only)
    isolation: str  # how the adapter was kept from the harness's files (jail.LEVELS)

    @property
    def sandbox(self) -> str | None:  # the isolation's mechanism ("bubblewrap 0.8.0, ...")
        ...

    takes_sample: bool  # whether ``generate`` gets ``sample=`` (see :class:`Adapter`)
    needs: Mapping[str, Any]  # what the adapter declares it needs (see child.declared_needs)
    note: str | None  # said in the summary when the adapter is not isolated

    def conditions(self, ctx: BenchmarkContext) -> dict[str, Any]: ...

    def ready(self, ctx: BenchmarkContext) -> None: ...

    def ask(self, q: GoldQuestion, timeout_s: float, sample: int | None) -> Any: ...

    def close(self) -> None: ...


def open_system(
    name: str,
    hook: Callable[[str], Any] | None = None,
    *,
    in_process: bool = False,
    timeout_s: float,
    covered: Sequence[Path] = (),
    shared: Path | None = None,
    private: Sequence[Path] = (),
    network: str = "auto",
    offline: bool = False,
    python: Path | None = None,
) -> System:
    """The answerer of ``--heron-adapter name``. Lookup order as in
    :func:`~pytest_heron.systems.registry.make_adapter` (entry points, the hook, ``module:attr``),
    but no adapter module is imported here unless the adapter is to run in this process: a
    :class:`ChildSystem` resolves the name in its own process, at once, so an unknown name still
    fails before the first question. ``covered``, ``private`` and ``shared`` are what an
    isolated adapter may not read (the harness's data; the run's outputs) and the LLM cache
    folder it shares; ``network`` is ``--heron-adapter-network`` and ``python`` the
    interpreter of ``--heron-adapter-python`` (see
    :mod:`pytest_heron.systems.bubblewrap` and :mod:`pytest_heron.systems.jail`)."""
    if name == "gold":
        return GoldSystem()
    if name == "cli":
        return InProcessSystem(CliAdapter, note=None, grace_s=CLI_GRACE_S)
    names = {ep.name for ep in entry_points(group=GROUP)}
    made = None
    if name not in names and hook is not None:
        made = hook(name)
    if python is not None and (in_process or made is not None):
        raise ConfigError(
            "--heron-adapter-python starts the adapter's own process: it cannot be combined "
            "with --heron-in-process or an adapter made by the pytest_heron_make_adapter hook"
        )
    if made is not None:
        where = f"the adapter made by pytest_heron_make_adapter({name!r})"
        again = hook
        assert again is not None
        return InProcessSystem(
            lambda: instantiate(again(name), where),
            probe=instantiate(made, where),
            note="it came from the pytest_heron_make_adapter hook and ran inside the pytest "
            "process (it could reach the scorer)",
        )
    if name not in names and ":" not in name:
        raise AdapterLookupError(
            f"unknown adapter {name!r}. Known adapters: {', '.join(known_adapters()) or 'none'}; "
            "or give module:Class, or provide one with the pytest_heron_make_adapter hook."
        )
    if in_process:
        from pytest_heron.systems.registry import make_adapter

        return InProcessSystem(
            lambda: make_adapter(name),
            note="--heron-in-process: it ran inside the pytest process (it could reach the "
            "scorer; a hang was abandoned, not killed)",
        )
    from pytest_heron.systems.interpreter import Interpreter
    from pytest_heron.systems.process import ChildSystem

    interpreter = Interpreter.of(python)
    jail = jails.open_jail(
        name,
        covered,
        shared,
        private=private,
        network=network,
        offline=offline,
        interpreter=interpreter,
    )
    system = ChildSystem(name, timeout_s, jail=jail, interpreter=interpreter)
    if jail is None:
        system.note = jails.missing_note()
    return system


# -- gold ------------------------------------------------------------------------------------------


class GoldSystem:
    """``gold``: every question answered with its own gold SQL, by the harness."""

    version: str | None = GoldAdapter.version
    adapter_name: str | None = GoldAdapter.name
    task: str | None = None
    takes_sample = False
    note: str | None = None
    isolation = jails.NOT_NEEDED
    sandbox: str | None = None
    needs: Mapping[str, Any] = NO_NEEDS

    def conditions(self, ctx: BenchmarkContext) -> dict[str, Any]:
        return {}

    def ready(self, ctx: BenchmarkContext) -> None:
        pass

    def ask(self, q: GoldQuestion, timeout_s: float, sample: int | None) -> Any:
        return GoldAdapter.answer(q)

    def close(self) -> None:
        pass


# -- a file of predictions --------------------------------------------------------------------


class FileSystem:
    """``file``: every question answered from a checked predictions file
    (:mod:`pytest_heron.systems.predictions`), by the harness; no adapter code runs."""

    version: str | None = None
    adapter_name: str | None = "file"
    task: str | None = None
    takes_sample = False
    note: str | None = None
    isolation = jails.NOT_NEEDED
    sandbox: str | None = None
    needs: Mapping[str, Any] = NO_NEEDS

    def __init__(self, predictions: PredictionFile) -> None:
        self.predictions = predictions

    def conditions(self, ctx: BenchmarkContext) -> dict[str, Any]:
        return {
            "predictions": self.predictions.path.name,
            "predictions_sha256": self.predictions.sha256,
        }

    def ready(self, ctx: BenchmarkContext) -> None:
        pass

    def ask(self, q: GoldQuestion, timeout_s: float, sample: int | None) -> Any:
        sql = self.predictions.sql.get(q.id)
        if sql is None:  # cannot happen after the file's check; kept as a clear failure
            raise AdapterError(f"the predictions file has no prediction for {q.id}")
        return {
            "sql": sql,
            "tables": self.predictions.tables.get(q.id),
            "tables_ranked": self.predictions.ranked.get(q.id),
        }

    def close(self) -> None:
        pass


# -- in this process -------------------------------------------------------------------------------


def call_in_thread(call: Callable[[], Any], timeout_s: float, what: str) -> Any:
    """``call()`` in a daemon thread; AdapterTimeout after ``timeout_s`` (the call is abandoned:
    a thread cannot be killed). A BaseException that is not an Exception becomes AdapterError."""
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=work, name="heron-adapter", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        raise AdapterTimeout(
            f"the adapter did not {what} within {timeout_s:g}s (--heron-timeout); its call was "
            "abandoned"
        )
    if "error" in box:
        error = box["error"]
        if not isinstance(error, Exception):  # KeyboardInterrupt, SystemExit: the adapter's own
            raise AdapterError(
                f"the adapter raised {type(error).__name__}: {error}".rstrip(": ")
            ) from None
        raise error
    return box.get("value")


class InProcessSystem:
    """An adapter called in a thread of this process (see the module docstring). A probe
    instance answers ``version``, ``conditions`` and whether ``generate`` takes ``sample``; a
    second one is prepared once and answers."""

    def __init__(
        self,
        make: Callable[[], Adapter],
        *,
        note: str | None,
        grace_s: float = 0.0,
        probe: Adapter | None = None,
    ) -> None:
        self.make = make
        self.note = note
        self.isolation = jails.NONE
        self.sandbox: str | None = None
        self.grace_s = grace_s
        self.probe = make() if probe is None else probe
        version = getattr(self.probe, "version", None)
        self.version: str | None = None if version is None else str(version)
        name, task = getattr(self.probe, "name", None), getattr(self.probe, "task", None)
        self.adapter_name: str | None = None if name is None else str(name)
        self.task: str | None = None if task is None else str(task)
        self.takes_sample = wire.accepts_sample(self.probe)
        self.needs: Mapping[str, Any] = wire.declared_needs(self.probe)
        self._adapter: Adapter | None = None
        self._error: str | None = None

    def conditions(self, ctx: BenchmarkContext) -> dict[str, Any]:
        describe = getattr(self.probe, "conditions", None)
        return dict(describe(ctx)) if callable(describe) else {}

    def ready(self, ctx: BenchmarkContext) -> None:
        if self._adapter is None and self._error is None:
            try:
                adapter = self.make()
                timeout = ctx.limits.timeout_s + self.grace_s
                call_in_thread(lambda: adapter.prepare(ctx), timeout, "finish prepare(ctx)")
                self._adapter = adapter
            except AdapterTimeout as exc:
                self._error = f"the adapter failed to prepare: {exc}"
            except Exception as exc:
                self._error = f"the adapter failed to prepare: {type(exc).__name__}: {exc}"
        if self._adapter is None:
            raise AdapterError(self._error or "the adapter could not be made")

    def ask(self, q: GoldQuestion, timeout_s: float, sample: int | None) -> Any:
        if self._adapter is None:
            raise AdapterError(self._error or "the adapter is not prepared")
        generate: Any = self._adapter.generate  # ``sample`` is an optional extension
        public = q.public()
        return call_in_thread(
            (lambda: generate(public))
            if sample is None
            else (lambda: generate(public, sample=sample)),
            timeout_s + self.grace_s,
            "answer",
        )

    def close(self) -> None:
        pass
