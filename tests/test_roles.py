"""Roles and secrets, tried as a hostile system under test would, on the real embedded server.

Each attack is first shown to take effect where it can (so the test could fail), then the next
run (``ensure_state`` again, as every run does) is checked to have undone it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from pytest_heron import sandbox
from pytest_heron.core.errors import BackendError
from pytest_heron.database import manifest, states
from pytest_heron.database.server import Server, embedded, secret_path, trusting
from pytest_heron.database.states import ensure_state, reader_role
from pytest_heron.sandbox import roles

REVIEWED = Path(__file__).parent / "data" / "reader_functions.tsv"
NOWHERE = "/nonexistent/heron-no-passfile"


def _refused(dsn: str) -> str:
    """The server's refusal of a connection to ``dsn`` (fails the test if it connects)."""
    try:
        psycopg.connect(dsn, connect_timeout=10).close()
    except psycopg.OperationalError as exc:
        return str(exc)
    pytest.fail(f"connected: {conninfo_to_dict(dsn).get('user')}@{conninfo_to_dict(dsn)['dbname']}")


def _with(dsn: str, **params: str) -> str:
    return make_conninfo(dsn, **params)


def test_embedded_server_asks_everyone_for_a_password(server: Server) -> None:
    params = conninfo_to_dict(server.admin_dsn)
    pgdata = Path(str(params["host"]))
    assert not trusting(pgdata / "pg_hba.conf")
    assert secret_path(pgdata).stat().st_mode & 0o777 == 0o600
    no_password = _with(server.admin_dsn, password="", passfile=NOWHERE)
    assert "password" in _refused(no_password)
    assert "password" in _refused(_with(server.admin_dsn, password="heron_reader"))


def test_a_trust_data_directory_is_migrated_in_place(tmp_path: Path) -> None:
    pgdata = tmp_path / "pg16"
    first = embedded(pgdata)
    try:
        with psycopg.connect(first.admin_dsn, autocommit=True) as conn:
            conn.execute("CREATE DATABASE heron_marker")
    finally:
        first.stop()
    # What an earlier heron left: trust for every local connection (same file, same owner).
    with open(pgdata / "pg_hba.conf", "w") as f:
        f.write("local all all trust\nhost all all 127.0.0.1/32 trust\n")
    secret_path(pgdata).unlink()
    again = embedded(pgdata)
    try:
        assert not trusting(pgdata / "pg_hba.conf")
        with psycopg.connect(again.admin_dsn) as conn:  # the new secret works
            kept = conn.execute("SELECT 1 FROM pg_database WHERE datname = 'heron_marker'")
            assert kept.fetchone() == (1,), "the data directory was rebuilt, not migrated"
        assert "password" in _refused(_with(again.admin_dsn, password="", passfile=NOWHERE))
    finally:
        again.stop()


def test_what_a_reader_does_to_its_role_does_not_outlive_the_run(
    server: Server, state_copy: Any
) -> None:
    """On a private copy: the shared state's scoring role, its password changed here, would
    refuse the other xdist worker's scoring until the reset."""
    tiny_state = state_copy
    role = reader_role(tiny_state.database)
    with psycopg.connect(tiny_state.reader_dsn, autocommit=True) as conn:
        conn.execute("SET default_transaction_read_only = off")
        conn.execute("ALTER ROLE CURRENT_USER SET transform_null_equals = on")
        conn.execute("ALTER ROLE CURRENT_USER SET default_transaction_read_only = off")
        conn.execute(
            sql.SQL("ALTER ROLE CURRENT_USER IN DATABASE {} SET search_path = core").format(
                sql.Identifier(tiny_state.database)
            )
        )
        conn.execute("ALTER ROLE CURRENT_USER PASSWORD 'mine-now'")
    changed = _with(tiny_state.reader_dsn, password="mine-now")
    with psycopg.connect(changed) as conn:  # the attack worked, for now
        assert conn.execute("SHOW transform_null_equals").fetchone() == ("on",)
    assert "password" in _refused(tiny_state.reader_dsn)

    after = ensure_state(server, "tiny", 42, database=tiny_state.database)  # the next run
    assert "password" in _refused(changed)
    with psycopg.connect(after.reader_dsn) as conn:
        got = conn.execute(
            "SELECT current_user, current_setting('transform_null_equals'),"
            " current_setting('transaction_read_only'), current_setting('search_path')"
        ).fetchone()
    assert got == (role, "off", "on", '"$user", public')
    wrong = sandbox.execute(
        after.reader_dsn, "SELECT count(*) FROM core.tenants WHERE name = NULL", timeout_s=10
    )
    assert wrong.rows == [(0,)]  # an honest wrong answer stays wrong


def test_scoring_role_settings(tiny_state: Any) -> None:
    # current_setting, not pg_settings: the scoring role may not read pg_settings (issue 40)
    with psycopg.connect(tiny_state.reader_dsn) as conn:
        got = dict(
            conn.execute(
                "SELECT name, current_setting(name) FROM unnest(%s::text[]) name",
                ([name for name, _ in roles.SCORING_SETTINGS],),
            ).fetchall()
        )
    assert got == {
        "default_transaction_read_only": "on",
        "temp_file_limit": "2GB",
        "statement_timeout": "5min",
        "lock_timeout": "10s",
        "idle_in_transaction_session_timeout": "1min",
        "idle_session_timeout": "10min",
    }


def test_the_adapter_reads_the_first_state_and_nothing_else(server: Server) -> None:
    first = ensure_state(server, "tiny", 42, adapter=True)
    other = ensure_state(server, "tiny", 43)
    assert first.adapter_dsn is not None
    adapter = conninfo_to_dict(first.adapter_dsn)
    role, password = str(adapter["user"]), str(adapter["password"])
    try:
        assert role.startswith(roles.ADAPTER_PREFIX) and role != reader_role(first.database)
        with psycopg.connect(first.adapter_dsn) as conn:
            assert conn.execute("SELECT count(*) > 0 FROM core.tenants").fetchone() == (True,)
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute("SELECT pg_logical_emit_message(false, 'x', repeat('x', 1000))")
        building = "heron_test_roles__building"
        with psycopg.connect(server.admin_dsn, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(building))
            )
            states._create_building(server, conn, building)
        scorer = conninfo_to_dict(first.reader_dsn)
        try:
            for user, secret in ((role, password), (scorer["user"], scorer["password"])):
                for database in (other.database, "postgres", "template1", building):
                    dsn = server.dsn(database, user=str(user), password=str(secret))
                    assert "permission denied" in _refused(dsn), (user, database)
        finally:
            with psycopg.connect(server.admin_dsn, autocommit=True) as conn:
                conn.execute(sql.SQL("DROP DATABASE {}").format(sql.Identifier(building)))
    finally:
        roles.release_adapters([role])
    assert "password" in _refused(first.adapter_dsn)  # the role is gone with its run


def test_an_adapter_role_outlives_its_run_only_until_the_next(
    server: Server, tiny_state: Any
) -> None:
    db = tiny_state.database
    dead, _ = roles.create_adapter_role(server.admin_dsn, tiny_state.admin_dsn, db, ["core"])
    live, _ = roles.create_adapter_role(server.admin_dsn, tiny_state.admin_dsn, db, ["core"])
    try:
        roles._LEASES.pop(dead).conn.close()  # its run was killed: the lease is gone
        dropped = roles.drop_stale_adapters(server.admin_dsn)
        assert dead in dropped and live not in dropped
        with psycopg.connect(server.admin_dsn) as conn:
            left = conn.execute(
                "SELECT rolname FROM pg_roles WHERE rolname = ANY(%s) ORDER BY 1", ([dead, live],)
            ).fetchall()
        assert left == [(live,)]
    finally:
        roles.release_adapters([live])


def test_a_held_build_lock_is_named_not_waited_on_forever(
    server: Server, tiny_state: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(manifest, "LOCK_TIMEOUT", 1.0)
    key = manifest.lock_key(tiny_state.database)
    with psycopg.connect(server.admin_dsn, autocommit=True, application_name="holder") as conn:
        conn.execute("SELECT pg_advisory_lock(4242, %s)", (key,))
        pid = conn.info.backend_pid
        with pytest.raises(BackendError) as caught:
            ensure_state(server, "tiny", 42)
    message = str(caught.value)
    assert "build lock" in message and f"server process {pid}" in message and "'holder'" in message
    assert ensure_state(server, "tiny", 42).database == tiny_state.database  # released: fine


def test_a_reader_cannot_take_the_build_lock(tiny_state: Any) -> None:
    got = sandbox.execute(
        tiny_state.reader_dsn, "SELECT pg_try_advisory_lock(4242, 1)", timeout_s=5, guard=False
    )
    assert got.error_kind == "db_error" and "permission denied" in (got.error or "")
    server_db = make_conninfo(tiny_state.reader_dsn, dbname="postgres")
    assert "permission denied" in _refused(server_db)


def _reviewed() -> list[str]:
    lines = REVIEWED.read_text().splitlines()
    return sorted(line.split("\t")[0] for line in lines if line and not line.startswith("#"))


def test_public_functions_are_reviewed(tiny_state: Any) -> None:
    """Every function the scoring role may execute beyond immutable/stable builtins is in the
    reviewed list, and the list has nothing the role cannot execute: a new dangerous function
    (a new PostgreSQL, an extension) fails here before an attacker finds it."""
    with psycopg.connect(tiny_state.admin_dsn) as conn:
        rows = conn.execute(roles.REVIEW_QUERY, (reader_role(tiny_state.database),)).fetchall()
        executable = sorted(str(r[0]) for r in rows)
        denied = conn.execute(
            "SELECT p.oid::regprocedure::text FROM pg_proc p"
            " WHERE (p.proname = ANY(%s) OR p.oid::regprocedure::text = ANY(%s))"
            " AND has_function_privilege(%s, p.oid, 'EXECUTE') ORDER BY 1",
            (
                list(roles.DANGEROUS_FUNCTIONS),
                list(roles.DANGEROUS_FUNCTIONS),
                reader_role(tiny_state.database),
            ),
        ).fetchall()
    assert denied == []
    assert sorted(set(executable) - set(_reviewed())) == [], "review these, see the file header"
    assert sorted(set(_reviewed()) - set(executable)) == [], "no longer executable: remove"


def test_wal_writes_from_a_prediction_are_refused(tiny_state: Any) -> None:
    got = sandbox.execute(
        tiny_state.reader_dsn,
        "SELECT pg_logical_emit_message(false, 'heron', repeat('x', 100000))",
        timeout_s=5,
    )
    assert got.error_kind == "db_error" and "permission denied" in (got.error or "")


def test_scoring_passwords_are_derived_from_the_admin_secret(server: Server) -> None:
    role = reader_role("heron_tiny_42_x")
    password = roles.role_password(server.admin_dsn, role)
    assert password == roles.role_password(server.admin_dsn, role)  # every process agrees
    assert password != roles.role_password(server.admin_dsn, reader_role("heron_tiny_43_x"))
    assert password != roles.role_password(_with(server.admin_dsn, password="other"), role)
    assert str(conninfo_to_dict(server.admin_dsn)["password"]) not in password
