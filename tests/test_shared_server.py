"""Several users of one embedded server at once: a process's handle on it, and the catalog
statements two pytest processes may run on the same rows (xdist workers, inner sessions)."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict

from pytest_heron.database.server import Server, embedded
from pytest_heron.sandbox import roles


def _handles(server: Server) -> list[int]:
    pgdata = Path(str(conninfo_to_dict(server.admin_dsn)["host"]))
    return [int(p) for p in json.loads((pgdata / ".handle_pids.json").read_text())]


def test_a_second_server_stopped_in_this_process_keeps_the_sessions_hold(server: Server) -> None:
    """What an in-process pytest run does (start, then stop, the embedded server in the test's
    own process) gives back its own hold only: the process keeps its handle and the server keeps
    running for the session (and for the other xdist worker)."""
    assert os.getpid() in _handles(server)
    inner = embedded()
    inner.stop()
    inner.stop()  # stopping one Server twice counts once
    assert os.getpid() in _handles(server)
    with psycopg.connect(server.admin_dsn) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_two_runs_dropping_the_same_stale_adapter_role_both_go_on(
    server: Server, tiny_state: Any
) -> None:
    """Two runs starting at once both find a dead run's adapter role: one drops it, the other
    leaves it to the first (the stale role's lease is held while it is dropped), and neither
    fails."""
    db = tiny_state.database
    dead, _ = roles.create_adapter_role(server.admin_dsn, tiny_state.admin_dsn, db, ["core"])
    roles._LEASES.pop(dead).conn.close()  # its run was killed
    results: list[list[str]] = []
    errors: list[BaseException] = []

    def start() -> None:
        try:
            results.append(roles.drop_stale_adapters(server.admin_dsn))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=start) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    assert sum(dead in dropped for dropped in results) == 1, results
    with psycopg.connect(server.admin_dsn) as conn:
        left = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (dead,)).fetchone()
    assert left is None
