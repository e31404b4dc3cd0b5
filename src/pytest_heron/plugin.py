"""pytest hooks for pytest-heron: options, collection, xdist hand-off, summary. Nothing else.

Importing this module is cheap: the benchmark's machinery is imported only when
``--heron-adapter`` is given, so plain ``pytest`` in any project is unaffected.
"""

from __future__ import annotations

import json
from collections.abc import Generator
from typing import TYPE_CHECKING, Any

import pytest

from pytest_heron import options
from pytest_heron.items import HeronCollector, HeronItem

if TYPE_CHECKING:
    from pytest_heron.run import HeronRun

RUN_KEY = pytest.StashKey["HeronRun"]()
PAYLOAD = "heron"
BASE_MARKERS = {
    "heron": "a pytest-heron benchmark question",
    "audit": "a pytest-heron gold audit check",
}


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    import pytest_heron.hookspecs as newhooks

    pluginmanager.add_hookspecs(newhooks)


def pytest_addoption(parser: pytest.Parser) -> None:
    options.register(parser)


def _adapter_name(config: pytest.Config) -> str | None:
    value = config.getoption("heron_adapter", None) or config.getini("heron_adapter")
    return str(value) if value else None


def pytest_configure(config: pytest.Config) -> None:
    for name, text in BASE_MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {text}")
    if not _adapter_name(config) or config.getoption("help", False):
        return  # `pytest --help` only lists the options, even with heron_adapter in the ini
    from pytest_heron.errors import HeronError
    from pytest_heron.run import HeronRun

    try:
        settings = options.resolve(config.getoption, config.getini)
        run = HeronRun(
            settings,
            hook=lambda n: config.hook.pytest_heron_make_adapter(config=config, name=n),
            rootdir=config.rootpath,
        )
    except HeronError as exc:
        raise pytest.UsageError(f"pytest-heron: {exc}") from None
    for q in run.questions.values():
        for marker in q.markers:
            config.addinivalue_line("markers", f"{marker}: pytest-heron question tag")
    config.stash[RUN_KEY] = run
    config.pluginmanager.register(HeronPlugin(config, run), "heron-run")
    # "xdist" when setuptools autoloading found it; "xdist.plugin" when loaded by module name
    # (-p xdist.plugin or PYTEST_PLUGINS, as with PYTEST_DISABLE_PLUGIN_AUTOLOAD=1)
    if any(config.pluginmanager.hasplugin(n) for n in ("xdist", "xdist.plugin")):
        config.pluginmanager.register(XdistHooks(run), "heron-xdist")


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


class HeronPlugin:
    """The benchmark's hooks, registered only when ``--heron-adapter`` is given."""

    def __init__(self, config: pytest.Config, run: HeronRun) -> None:
        self.config = config
        self.run = run
        self.paths_given = bool(getattr(config.option, "file_or_dir", None))

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        if _is_worker(self.config):
            payload = self.config.workerinput[PAYLOAD]  # type: ignore[attr-defined]
            self.run.load_payload(json.loads(payload))
            return
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")

        def progress(msg: str) -> None:
            if reporter is not None:
                reporter.write_line(f"heron: {msg}")

        from pytest_heron.errors import HeronError

        try:
            self.run.build_states(progress)
        except HeronError as exc:
            raise pytest.UsageError(f"pytest-heron: {exc}") from None

    def pytest_ignore_collect(self, collection_path: Any, config: pytest.Config) -> bool | None:
        # With --heron-adapter and no paths, the run is the benchmark only.
        return True if not self.paths_given else None

    @pytest.hookimpl(wrapper=True)
    def pytest_make_collect_report(
        self, collector: pytest.Collector
    ) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
        rep = yield
        if isinstance(collector, pytest.Session) and rep.passed:
            path = self.config.rootpath / "heron"
            rep.result.append(
                HeronCollector.from_parent(
                    collector, name="heron", nodeid="heron", path=path, run=self.run
                )
            )
        return rep

    def pytest_collection_modifyitems(
        self, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        done = set(self.run.resumed)
        if not done:
            return
        skipped = [i for i in items if isinstance(i, HeronItem) and i.question.id in done]
        if skipped:
            config.hook.pytest_deselected(items=skipped)
            items[:] = [i for i in items if i not in skipped]

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        rep = yield
        if isinstance(item, HeronItem) and call.when == "call" and item.outcome is not None:
            rep.user_properties.append((PAYLOAD, item.outcome.to_json()))
        return rep

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if _is_worker(self.config):
            return
        for key, value in report.user_properties:
            if key == PAYLOAD and isinstance(value, dict):
                from pytest_heron.scoring.outcome import Outcome

                self.run.record(Outcome.from_json(value, f"the outcome of {report.nodeid}"))
                return
        if report.failed and report.nodeid.startswith("heron::"):
            qid = report.nodeid.split("::", 1)[1]
            self.run.record_crash(
                qid, f"no outcome was reported ({report.when}): {report.longreprtext}"
            )

    @pytest.hookimpl(wrapper=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Generator[None, object, object]:
        result = yield
        if _is_worker(self.config):
            return result
        doc = self.run.finish()
        minimum = self.run.settings.min_ex
        if doc is not None and minimum is not None:
            ex = doc.metrics.ex_multistate or 0.0
            if ex < minimum:
                session.testsfailed += 1
        if self.run.compare_failures:
            session.testsfailed += 1
        return result

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        # a resumed run with every question in its journal ran no item: that is a finished
        # run, not pytest's "no tests collected" (exit status 5)
        if (
            not _is_worker(self.config)
            and session.exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED
            and self.run.resumed
            and self.run.results is not None
        ):
            session.exitstatus = pytest.ExitCode.OK

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if _is_worker(self.config) or self.run.results is None:
            return
        from pytest_heron.results.terminal import summary_lines

        tr = terminalreporter
        tr.write_sep("=", "heron benchmark")
        for line in summary_lines(self.run.results):
            tr.write_line(line)
        minimum = self.run.settings.min_ex
        ex = self.run.results.metrics.ex_multistate or 0.0
        if minimum is not None:
            verdict = "FAILED" if ex < minimum else "passed"
            tr.write_line(
                f"--heron-min-ex={minimum:g}: multi-state EX {ex:.1f}% -> {verdict}",
                red=ex < minimum,
                green=ex >= minimum,
            )
        if self.run.system.note:
            tr.write_line(f"adapter not isolated: {self.run.system.note}", yellow=True)
        if self.run.resumed:
            tr.write_line(f"resumed: {len(self.run.resumed)} questions taken from the journal")
        if self.run.dropped:
            tr.write_line(
                f"journal: {len(self.run.dropped)} record(s) were not valid outcomes and their "
                f"questions were asked again: {' '.join(self.run.dropped)}",
                yellow=True,
            )
        if self.run.refused:
            tr.write_line(
                f"journal: {len(self.run.refused)} question(s) had failed because the endpoint "
                f"refused the connection, and were asked again: {' '.join(self.run.refused)}",
                yellow=True,
            )
        if self.run.settings.output is not None:
            tr.write_line(f"results written to {self.run.settings.output}")
        self._compared(tr)
        if self.run.settings.report is not None:
            tr.write_line(f"report written to {self.run.settings.report}/report.html")

    def _compared(self, tr: Any) -> None:
        """What --heron-save and --heron-compare did (after the summary)."""
        run = self.run
        if run.saved is not None:
            tr.write_line(f"run saved as {run.saved}")
        if run.settings.compare is None:
            return
        if run.compare_error is not None:
            tr.write_line(f"--heron-compare: {run.compare_error}", red=bool(run.compare_failures))
            return
        if run.comparison is None:
            tr.write_line(
                "--heron-compare: no saved run to compare with yet (save one with --heron-save)",
                yellow=True,
            )
            return
        tr.write_sep("-", f"heron compare: {run.comparison.a_name} (A) against this run (B)")
        for line in run.comparison.lines():
            tr.write_line(line)
        warning = run.comparison.warning()
        if warning:
            tr.write_line(f"warning: {warning}", yellow=True)
        for failure in run.compare_failures:
            tr.write_line(f"--heron-compare-fail: {failure} -> FAILED", red=True)
        if run.settings.compare_fail and not run.compare_failures:
            limits = ",".join(f"{k}:{v:g}" for k, v in run.settings.compare_fail)
            tr.write_line(f"--heron-compare-fail={limits}: passed", green=True)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        self.run.stop()  # the adapter's process (every process), the server (the controller)


class XdistHooks:
    """Hand the built states to every xdist worker (registered only when xdist is present)."""

    def __init__(self, run: HeronRun) -> None:
        self.run = run

    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput[PAYLOAD] = json.dumps(self.run.worker_payload())
