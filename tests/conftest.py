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
# The tests' adapters live in pytester folders (mode 0700, root's) and write files there, which
# the jailed adapter user cannot: the suite runs them as before; tests/test_adapter_isolation.py
# turns the jail on (HERON_ADAPTER_ISOLATION, see pytest_heron/systems/jail.py).
os.environ.setdefault("HERON_ADAPTER_ISOLATION", "none")

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
