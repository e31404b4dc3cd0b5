"""Shared fixtures: a real embedded PostgreSQL 16 for the database tests.

The test session never uses the user's own heron cache folder (their embedded server, seeded
states and LLM cache): before anything else it points ``HERON_CACHE_DIR`` at a folder of its own,
``$HERON_TEST_CACHE_DIR`` when set (CI may share one between runs on purpose), else
``pytest-heron-tests`` beside the user's heron cache. Every process the tests start (pytester
runs, ``heron`` commands) inherits it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import platformdirs
import pytest

USER_CACHE = Path(platformdirs.user_cache_dir("pytest-heron"))  # the one the tests never touch
TEST_CACHE = Path(
    os.environ.get("HERON_TEST_CACHE_DIR") or USER_CACHE.with_name("pytest-heron-tests")
).expanduser()
os.environ["HERON_CACHE_DIR"] = str(TEST_CACHE)

from pytest_heron.database.server import Server, embedded  # noqa: E402  (after the cache is set)


@pytest.fixture(scope="session")
def server() -> Iterator[Server]:
    """The test session's embedded server (started once; states are built once per data
    version and reused by later test sessions)."""
    srv = embedded()
    yield srv
    srv.stop()


@pytest.fixture(scope="session")
def tiny_state(server: Server):  # type: ignore[no-untyped-def]
    from pytest_heron.database.states import ensure_state

    return ensure_state(server, "tiny", 42)


@pytest.fixture(autouse=True)
def _lean_inner_sessions(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Inner sessions (pytester's, in-process or subprocess) load only the heron plugin and
    xdist's, not every installed pytest plugin (see tests/inner.py)."""
    if "pytester" in request.fixturenames:
        # An in-process run (pytester.runpytest) drops the modules it imported when it ends;
        # numpy refuses to be imported twice in a process, so the run's stages are imported here,
        # before pytester takes its snapshot of sys.modules.
        import pytest_heron.run  # noqa: F401
        from inner import LEAN_ENV

        for key, value in LEAN_ENV.items():
            monkeypatch.setenv(key, value)
