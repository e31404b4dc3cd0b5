"""``heron seed`` and ``heron checksum``, end to end on the embedded server."""

from __future__ import annotations

import json
import subprocess
import sys

import psycopg
from psycopg import sql

from pytest_heron.backends import Server


def _heron(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest_heron.cli", *args],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def _checksums(server: Server, database: str) -> list[str]:
    done = _heron("checksum", "--dsn", server.admin_dsn, "--database", database)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_seed_jobs_and_checksum_round_trip(server: Server) -> None:
    names = ["heron_test_jobs1", "heron_test_jobs2", "heron_test_seed43"]
    runs = [("42", "1"), ("42", "2"), ("43", "2")]
    for name, (seed, jobs) in zip(names, runs, strict=True):
        done = _heron(
            "seed",
            "--scale",
            "tiny",
            "--seed",
            seed,
            "--dsn",
            server.admin_dsn,
            "--database",
            name,
            "--jobs",
            jobs,
            "--replace",
        )
        assert done.returncode == 0, done.stderr
        last = json.loads(done.stdout.strip().splitlines()[-1])
        assert set(last) == {"database", "dsn", "tables", "schemas", "rows", "seconds"}
        assert last["database"] == name and last["rows"] > 0
        assert "loaded" in done.stderr  # progress goes to stderr
    one, two, other = (_checksums(server, n) for n in names)
    assert one == two  # --jobs 2 gives the same bytes as --jobs 1
    assert one[-1].startswith("total\t") and one[-1] != other[-1]  # another seed differs
    for line in one:
        name, rows, sha = line.split("\t")
        assert int(rows) >= 0 and len(sha) == 64
    with psycopg.connect(server.admin_dsn, autocommit=True) as conn:
        for name in names:
            conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


def test_checksum_of_a_missing_database_is_a_clear_error(server: Server) -> None:
    done = _heron("checksum", "--dsn", server.admin_dsn, "--database", "heron_does_not_exist")
    assert done.returncode == 2
    assert "does not exist" in done.stderr and "Traceback" not in done.stderr
