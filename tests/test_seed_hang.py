"""Seeding cannot hang later runs, and does not follow PGCLIENTENCODING.

A ``heron seed`` killed with SIGKILL mid-load used to leave forked workers holding its admin
session and the state's build lock, so the next build waited forever. Both checks run the real
``heron`` command in subprocesses with a bounded ``timeout`` (not a timing assert).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from pytest_heron.database.server import Server

GOLDEN = Path(__file__).parent / "golden" / "tiny_42.tsv"
DATABASE = "heron_test_killed_seed"


def _heron(*args: str) -> list[str]:
    return [sys.executable, "-m", "pytest_heron.cli", *args]


def _as_user(dsn: str) -> tuple[str, dict[str, str]]:
    """``dsn`` as a user would write it (no client_encoding: the environment decides), with
    its password in the environment (``PGPASSWORD``) rather than on the command line, where
    ``ps`` shows it; and that environment, with ``PGCLIENTENCODING=LATIN1``."""
    params = {k: str(v) for k, v in conninfo_to_dict(dsn).items() if k != "client_encoding"}
    env = dict(os.environ, PGPASSWORD=params.pop("password"), PGCLIENTENCODING="LATIN1")
    return make_conninfo(**params), env


def _drop(server: Server) -> None:
    with psycopg.connect(server.admin_dsn, autocommit=True) as conn:
        for name in (DATABASE, f"{DATABASE}__building"):
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


def test_a_killed_seed_leaves_nothing_that_blocks_the_next(server: Server) -> None:
    _drop(server)
    dsn, env = _as_user(server.admin_dsn)
    seed = ["seed", "--scale", "tiny", "--seed", "42", "--database", DATABASE, "--jobs", "2"]
    proc = subprocess.Popen(
        _heron(*seed, "--dsn", dsn),
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    try:
        assert proc.stderr is not None
        for line in proc.stderr:  # wait until the load has started, with its workers
            if "loading" in line:
                break
        else:
            raise AssertionError("heron seed ended before loading")
        parent = psutil.Process(proc.pid)
        workers: list[psutil.Process] = []
        while len(workers) < 2 and proc.poll() is None:
            workers = parent.children(recursive=True)
        assert workers, "no seeding workers were seen"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        _, alive = psutil.wait_procs(workers, timeout=30)
        assert alive == [], f"seeding workers outlived their parent: {alive}"
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    # The next build, with a client encoding that used to store mojibake, finishes; its data
    # hash exactly as the golden file says.
    again = subprocess.run(
        _heron(*seed, "--dsn", dsn), capture_output=True, text=True, env=env, timeout=600
    )
    assert again.returncode == 0, again.stderr[-2000:]
    assert json.loads(again.stdout)["database"] == DATABASE
    sums = subprocess.run(
        _heron("checksum", "--dsn", dsn, "--database", DATABASE),
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    _drop(server)
    assert sums.returncode == 0, sums.stderr[-2000:]
    assert sums.stdout.splitlines() == GOLDEN.read_text().splitlines()


def test_checksums_ignore_pgclientencoding(server: Server, tiny_state: object) -> None:
    dsn, env = _as_user(server.admin_dsn)
    sums = subprocess.run(
        _heron("checksum", "--dsn", dsn, "--scale", "tiny", "--seed", "42"),
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert sums.returncode == 0, sums.stderr[-2000:]
    assert sums.stdout.splitlines() == GOLDEN.read_text().splitlines()


def test_seeding_workers_let_go_of_the_parents_sessions(server: Server) -> None:
    from pytest_heron.generate import load

    with psycopg.connect(server.admin_dsn, autocommit=True) as conn:
        assert load._live_inherited() >= 1  # this process holds a session
        with load._pool(1) as pool:
            assert pool.submit(load._live_inherited).result(timeout=60) == 0
        # the worker let go without ending the parent's session
        assert conn.execute("SELECT 1").fetchone() == (1,)
