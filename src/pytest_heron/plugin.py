"""pytest hooks for pytest-heron: options, configuration, the hook objects registered by role
(:mod:`pytest_heron.run.hooks`) and the vendor kit's fixtures. Nothing else.

Importing this module is cheap: the benchmark's machinery is imported only when
``--heron-adapter`` is given, so plain ``pytest`` in any project is unaffected.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import TYPE_CHECKING, Any

import pytest

from pytest_heron import options

if TYPE_CHECKING:
    from pytest_heron.run import HeronRun

RUN_KEY: pytest.StashKey[HeronRun] = pytest.StashKey()
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
    from pytest_heron.core.errors import HeronError
    from pytest_heron.run import HeronRun

    try:
        settings = options.resolve(config.getoption, config.getini)
        run = HeronRun(
            settings,
            hook=lambda n: _make_adapter_hook(config, n),
            rootdir=config.rootpath,
            selecting=bool(config.option.keyword or config.option.markexpr),
        )
    except HeronError as exc:
        raise pytest.UsageError(f"pytest-heron: {exc}") from None
    for q in run.questions.values():
        for marker in q.markers:
            config.addinivalue_line("markers", f"{marker}: pytest-heron question tag")
    config.stash[RUN_KEY] = run
    # one hook object per role (as pytest-xdist registers its DSession on the controller only)
    from pytest_heron.run import Controller, Worker, XdistHooks

    if hasattr(config, "workerinput"):
        config.pluginmanager.register(Worker(config, run), "heron-worker")
        return
    config.pluginmanager.register(Controller(config, run), "heron-controller")
    run.prestart()  # the server starts while pytest finishes configuring
    # "xdist" when setuptools autoloading found it; "xdist.plugin" when loaded by module name
    # (-p xdist.plugin or PYTEST_PLUGINS, as with PYTEST_DISABLE_PLUGIN_AUTOLOAD=1)
    if any(config.pluginmanager.hasplugin(n) for n in ("xdist", "xdist.plugin")):
        config.pluginmanager.register(XdistHooks(run), "heron-xdist")


def _make_adapter_hook(config: pytest.Config, name: str) -> Any:
    """Call the ``pytest_heron_make_adapter`` hooks; one that raises is one sentence naming the
    file (usually a conftest.py) and line that raised, not an INTERNALERROR."""
    try:
        return config.hook.pytest_heron_make_adapter(config=config, name=name)
    except Exception as exc:
        import traceback

        from pytest_heron.core.errors import AdapterLookupError

        files = {
            str(getattr(impl.plugin, "__file__", "") or "")
            for impl in config.hook.pytest_heron_make_adapter.get_hookimpls()
        }
        where = "a pytest_heron_make_adapter hook"
        for frame in reversed(traceback.extract_tb(exc.__traceback__)):
            if frame.filename in files:
                shown = _relative(frame.filename, config)
                where = f"the pytest_heron_make_adapter hook in {shown}:{frame.lineno}"
                break
        raise AdapterLookupError(
            f"{where} raised {type(exc).__name__}: {exc} (while making adapter {name!r}). "
            "Fix that hook, or name another adapter."
        ) from None


def _relative(path: str, config: pytest.Config) -> str:
    from pathlib import Path

    try:
        return str(Path(path).relative_to(config.rootpath))
    except ValueError:
        return path


# -- the vendor kit: fixtures for a vendor's own tests (session/kit.py; docs/vendor-kit.md) -----


@pytest.fixture(scope="session")
def heron_kit(request: pytest.FixtureRequest) -> Generator[Any, None, None]:
    """The states, questions and scorer behind the other heron_* fixtures (session scope)."""
    from pytest_heron.core.errors import HeronError
    from pytest_heron.run import Kit

    config = request.config
    run = config.stash.get(RUN_KEY, None)
    reporter = config.pluginmanager.get_plugin("terminalreporter")

    def progress(msg: str) -> None:
        if reporter is not None:
            reporter.write_line(f"heron: {msg}")

    try:
        settings = options.resolve(config.getoption, config.getini)
        kit = Kit(settings, states=run.states if run is not None else None, progress=progress)
    except HeronError as exc:
        pytest.fail(f"pytest-heron: {exc}", pytrace=False)
    yield kit
    kit.close()


@pytest.fixture(scope="session")
def heron_questions(heron_kit: Any) -> Any:
    """The question set by id, as an adapter sees it (``Question``: no gold)."""
    return heron_kit.questions


@pytest.fixture(scope="session")
def heron_state(heron_kit: Any) -> Any:
    """The first seeded state: ``.dsn`` (the adapter role's, read-only), ``.database``,
    ``.scale``, ``.seed``. Built on first use (``--heron-scale``, ``--heron-seed``)."""
    return heron_kit.state()


@pytest.fixture(scope="session")
def heron_score(heron_kit: Any) -> Any:
    """``heron_score(question, sql)``: the ``Outcome`` of ``sql`` as the answer to ``question``
    (an id or a ``Question``) on every state; ``heron_score.explain(outcome)`` is the
    benchmark's failure message."""
    from pytest_heron.run import Scorer

    return Scorer(heron_kit)
