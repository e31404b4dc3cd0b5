"""The benchmark's hook objects, one per xdist role (as pytest-xdist registers its ``DSession``
only on the controller): :class:`Controller` builds the states, records every outcome, finishes
the run and prints the summary; :class:`Worker` takes the states the controller handed over.
Both collect the questions and attach each outcome to its report (:class:`_Both`). Without
xdist the one process is the controller and runs the questions too."""

from __future__ import annotations

import json
from collections.abc import Generator
from typing import TYPE_CHECKING, Any

import pytest

from pytest_heron.run.items import HeronCollector, HeronItem

if TYPE_CHECKING:
    from pytest_heron.run.controller import HeronRun

PAYLOAD = "heron"  # the key of the outcome in a report's user_properties, and of the workerinput


class _Both:
    """What every process does: collect the questions, report each outcome, stop the run."""

    def __init__(self, config: pytest.Config, run: HeronRun) -> None:
        self.config = config
        self.run = run
        self.paths_given = bool(getattr(config.option, "file_or_dir", None))

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

    def _deselect_resumed(self, config: pytest.Config, items: list[pytest.Item]) -> None:
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

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        try:  # the adapter's process (every process), the server (the controller)
            self.run.stop()
        except KeyboardInterrupt:  # a second Ctrl-C while stopping: one line, no traceback
            import sys

            print(
                "heron: interrupted while stopping; the embedded server stops when its last "
                "user exits",
                file=sys.stderr,
            )


class Worker(_Both):
    """An xdist worker: the controller built the states; their DSNs come in ``workerinput``."""

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        payload = self.config.workerinput[PAYLOAD]  # type: ignore[attr-defined]
        self.run.load_payload(json.loads(payload))

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(
        self, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        self._deselect_resumed(config, items)


class Controller(_Both):
    """The process pytest was started in: states, outcomes, the results, the summary, the gate."""

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")

        def progress(msg: str) -> None:
            if reporter is not None:
                reporter.write_line(f"heron: {msg}")

        from pytest_heron.core.errors import HeronError

        try:
            self.run.build_states(progress)
        except HeronError as exc:
            raise pytest.UsageError(f"pytest-heron: {exc}") from None

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(
        self, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        from pytest_heron.systems import FileSystem

        if isinstance(self.run.system, FileSystem):
            from pytest_heron.systems import missing_for

            selected = [i.question.id for i in items if isinstance(i, HeronItem)]
            problem = missing_for(self.run.system.predictions, selected)
            if problem is not None:
                raise pytest.UsageError(f"pytest-heron: {problem}")
        self._deselect_resumed(config, items)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        for key, value in report.user_properties:
            if key == PAYLOAD and isinstance(value, dict):
                from pytest_heron.scoring import Outcome

                self.run.record(Outcome.from_json(value, f"the outcome of {report.nodeid}"))
                return
        if report.failed and report.nodeid.startswith("heron::"):
            qid = report.nodeid.split("::", 1)[1]
            self.run.record_crash(
                qid, f"no outcome was reported ({report.when}): {report.longreprtext}"
            )

    def pytest_report_header(self, config: pytest.Config) -> str:
        return self.run.header()

    def _fields(self, results: Any) -> dict[str, Any]:
        """What the ``pytest_heron_results_fields`` implementations add (a name twice: an
        error naming it)."""
        merged: dict[str, Any] = {}
        for found in self.config.hook.pytest_heron_results_fields(
            config=self.config, results=results
        ):
            if not found:
                continue
            for key in sorted(found):
                if key in merged:
                    raise pytest.UsageError(
                        f"pytest-heron: the results field {key!r} is added by two "
                        "pytest_heron_results_fields hooks"
                    )
                merged[key] = found[key]
        return merged

    @pytest.hookimpl(wrapper=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Generator[None, object, object]:
        result = yield
        from pytest_heron.core.errors import HeronError

        try:
            self.run.finish(fields=self._fields)
        except HeronError as exc:  # a plugin's results field that is not a scalar
            raise pytest.UsageError(f"pytest-heron: {exc}") from None
        if self.run.gate_failures():
            session.testsfailed += 1
        # a resumed run exits as the whole run would have: what failed before the interrupt
        # (now taken from the journal, not run again) still fails it
        session.testsfailed += len(self.run.resumed_failures())
        return result

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        # a resumed run with every question in its journal ran no item: that is a finished
        # run, not pytest's "no tests collected" (exit status 5)
        if (
            session.exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED
            and self.run.resumed
            and self.run.results is not None
        ):
            session.exitstatus = pytest.ExitCode.OK

    def pytest_terminal_summary(
        self, terminalreporter: Any, exitstatus: int | pytest.ExitCode
    ) -> None:
        if int(exitstatus) == int(pytest.ExitCode.INTERRUPTED):
            self._resume_hint(terminalreporter)
            return
        if self.run.results is None:
            return
        from pytest_heron.results import summary_lines

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
            failed = self.run.resumed_failures()
            tr.write_line(
                f"resumed: {len(self.run.resumed)} questions taken from the journal"
                + (f", {len(failed)} of them failed: {' '.join(failed)}" if failed else ""),
                red=bool(failed),
            )
            if failed:  # on pytest's last line too: "N failed in the journal"
                tr.stats.setdefault("failed in the journal", []).extend(failed)
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
        self._gate_verdict(tr, exitstatus)

    def _resume_hint(self, tr: Any) -> None:
        """After Ctrl-C: how to continue (the journal beside --heron-output keeps every answer)."""
        output = self.run.settings.output
        if output is None:
            tr.write_line(
                "heron: interrupted; nothing was kept. With --heron-output=FILE every answer is "
                "journaled, and the same command with --heron-resume continues where it stopped",
                yellow=True,
            )
            return
        done = len(self.run.outcomes)
        tr.write_line(
            f"heron: interrupted after {done} question(s), journaled beside {output}; run the same "
            "command with --heron-resume to continue",
            yellow=True,
        )

    def _gate_verdict(self, tr: Any, exitstatus: int | pytest.ExitCode) -> None:
        """One closing line when a gate was asked for: what the exit status means. A failed
        gate is also counted on pytest's last line (``1 heron gate failed``), so that line never
        reads as a plain pass when the status is 1."""
        if not self.run.settings.gated:
            return
        failures = self.run.gate_failures()
        if failures:
            tr.stats.setdefault("heron gate failed", []).append(self)
            tr.write_line(
                f"heron gate: FAILED ({'; '.join(failures)}); exit status 1", red=True, bold=True
            )
        elif int(exitstatus) == 0:
            tr.write_line(
                "heron gate: passed (wrong answers are counted as xfailed); exit status 0",
                green=True,
                bold=True,
            )
        else:
            tr.write_line(
                f"heron gate: passed, but the session failed for another reason (exit status "
                f"{int(exitstatus)}: see the failures above)",
                yellow=True,
                bold=True,
            )

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


class XdistHooks:
    """Hand the built states to every xdist worker (registered only when xdist is present)."""

    def __init__(self, run: HeronRun) -> None:
        self.run = run

    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput[PAYLOAD] = json.dumps(self.run.worker_payload())
