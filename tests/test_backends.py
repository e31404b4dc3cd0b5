"""Backends on real servers: embedded PostgreSQL 16, a DSN, docker where an engine answers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from pytest_heron.core.errors import BackendError
from pytest_heron.database import server as backends


def test_embedded_is_postgres_16(server: backends.Server) -> None:
    with psycopg.connect(server.admin_dsn) as conn:
        version = conn.execute("SHOW server_version_num").fetchone()
    assert version is not None and 160000 <= int(version[0]) < 170000
    assert server.kind == "embedded"


def test_embedded_data_dir_lives_in_the_cache_folder(server: backends.Server) -> None:
    with psycopg.connect(server.admin_dsn) as conn:
        row = conn.execute("SHOW data_directory").fetchone()
    assert row is not None and str(backends.cache_dir().resolve()) in str(row[0])


def test_dsn_backend_uses_the_given_server(server: backends.Server) -> None:
    other = backends.start("dsn", server.admin_dsn)
    assert other.kind == "dsn"
    with psycopg.connect(other.dsn("postgres")) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_bad_dsn_is_a_clear_error() -> None:
    with pytest.raises(BackendError, match="not a valid connection string"):
        backends.from_dsn("this is = not a dsn = at all")


def test_auto_prefers_a_dsn() -> None:
    assert backends.choose("auto", "host=/tmp") == "dsn"
    assert backends.choose("embedded", "host=/tmp") == "embedded"


def test_auto_without_docker_is_embedded(monkeypatch: pytest.MonkeyPatch) -> None:
    if backends.docker_available(timeout=1.0) is None:
        pytest.skip("a Docker engine answers here, so auto picks docker")
    assert backends.choose("auto", None) == "embedded"


def test_docker_backend() -> None:
    reason = backends.docker_available(timeout=2.0)
    if reason is not None:
        pytest.skip(f"docker backend not testable here: {reason}")
    server = backends.start("docker", None)
    try:
        with psycopg.connect(server.admin_dsn) as conn:
            version = conn.execute("SHOW server_version_num").fetchone()
        assert version is not None and int(version[0]) // 10000 == 16
    finally:
        server.stop()


def test_docker_backend_without_engine_says_why() -> None:
    if backends.docker_available(timeout=2.0) is None:
        pytest.skip("a Docker engine answers here")
    with pytest.raises(BackendError, match="--heron-backend=docker: "):
        backends.docker()


def test_two_processes_starting_one_embedded_server_share_it(tmp_path: Path) -> None:
    code = (
        "import sys, psycopg\n"
        "from pathlib import Path\n"
        "from pytest_heron.database.server import embedded\n"
        "srv = embedded(Path(sys.argv[1]))\n"
        "with psycopg.connect(srv.admin_dsn) as c:\n"
        "    print(c.execute('SELECT pg_postmaster_start_time()').fetchone()[0])\n"
        "srv.stop()\n"
    )
    data = tmp_path / "pg"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(data)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err for _, err in outs]
    assert (data / "PG_VERSION").read_text().strip() == "16"


def test_the_test_session_keeps_out_of_the_users_cache(server: backends.Server) -> None:
    from conftest import TEST_CACHE, USER_CACHE
    from pytest_heron.core.paths import cache_dir

    assert cache_dir().resolve() == TEST_CACHE.resolve() != USER_CACHE.resolve()
    with psycopg.connect(server.admin_dsn) as conn:
        row = conn.execute("SHOW data_directory").fetchone()
    assert row is not None and Path(str(row[0])).resolve().is_relative_to(TEST_CACHE.resolve())
    # and what the tests start inherits it
    code = "from pytest_heron.core.paths import cache_dir; print(cache_dir())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert Path(out.stdout.strip()).resolve() == TEST_CACHE.resolve()
