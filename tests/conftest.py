"""Shared fixtures: a real embedded PostgreSQL 16 for the database tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pytest_heron.database.server import Server, embedded


@pytest.fixture(scope="session")
def server() -> Iterator[Server]:
    """The embedded server (started once; the benchmark's own cache folder, so states are
    shared with ordinary runs and built only once per data version)."""
    srv = embedded()
    yield srv
    srv.stop()


@pytest.fixture(scope="session")
def tiny_state(server: Server):  # type: ignore[no-untyped-def]
    from pytest_heron.database.states import ensure_state

    return ensure_state(server, "tiny", 42)
