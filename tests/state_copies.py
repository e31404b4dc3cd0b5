"""Copies of the seeded ``tiny`` state for tests that change a state (``CREATE DATABASE …
TEMPLATE``, as pytest-postgresql does).

PostgreSQL copies a database only while nobody else is connected to it, and the shared
``tiny``/42 state is read all the time by the other xdist worker and by inner sessions. So the
copies come from a template of their own, :data:`TEMPLATE`: a ``tiny``/42 state under another
name that no test reads, built once per test cache (and again when the data version changes,
like every state) by the state builder itself. A copy then takes a second or so, never a seed.
A copy is stamped as a state of its own name, so :func:`ensure_state` hands it out with a
scoring role of its own; both go when the test ends.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from psycopg import sql

from pytest_heron.database.manifest import read_manifest, valid
from pytest_heron.database.server import Server
from pytest_heron.database.states import State, ensure_state, reader_role

TEMPLATE = "heron_test_template_tiny_42"  # read by no test: the source of every copy
PREFIX = "heron_test_copy_"
BUSY_WAIT_S = 120.0  # how long a copy waits for a template another process is preparing


def _template(server: Server) -> None:
    """Build (or check) :data:`TEMPLATE`; its manifest is read without connecting to it."""
    with psycopg.connect(server.admin_dsn, autocommit=True) as conn:
        if valid(read_manifest(conn, TEMPLATE), TEMPLATE):
            return
    ensure_state(server, "tiny", 42, database=TEMPLATE)


def _create_copy(server: Server, name: str) -> dict[str, object]:
    """``CREATE DATABASE name TEMPLATE`` :data:`TEMPLATE`, stamped as a state named ``name``.
    The only sessions on the template are short ones of another process checking or building
    it (the state builder's grants): a copy that meets one waits and tries again."""
    deadline = time.monotonic() + BUSY_WAIT_S
    with psycopg.connect(server.admin_dsn, autocommit=True) as conn:
        while True:
            try:
                conn.execute(
                    sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                        sql.Identifier(name), sql.Identifier(TEMPLATE)
                    )
                )
                break
            except psycopg.errors.ObjectInUse:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        manifest = dict(read_manifest(conn, TEMPLATE), database=name)
        conn.execute(
            sql.SQL("COMMENT ON DATABASE {} IS {}").format(
                sql.Identifier(name), sql.Literal(json.dumps(manifest, sort_keys=True))
            )
        )
    return manifest


def drop_copy(server: Server, name: str) -> None:
    """Drop a copy and its scoring role (the role's grants were all in the copy or on it)."""
    with psycopg.connect(server.admin_dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
        conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(reader_role(name))))


@contextmanager
def tiny_copy(server: Server, name: str | None = None) -> Iterator[State]:
    """A private copy of the seeded ``tiny``/42 state, ready as :func:`ensure_state` leaves a
    state (scoring role reset, PUBLIC kept out); dropped on exit."""
    _template(server)
    name = name or f"{PREFIX}{uuid.uuid4().hex[:12]}"
    try:
        _create_copy(server, name)
        yield ensure_state(server, "tiny", 42, database=name)
    finally:
        drop_copy(server, name)
