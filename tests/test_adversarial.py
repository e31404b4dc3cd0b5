"""Hostile predictions: each gets its outcome, and the state database stays byte-identical.

Every case runs through the whole sandbox (guard, reader role, read-only transaction, timeouts,
caps) on the tiny state; the per-table checksums of the database are compared before and after.
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_heron import sandbox
from pytest_heron.database.checksum import table_checksums
from pytest_heron.database.states import ensure_state, reader_role
from pytest_heron.generate import load_bundle

TIMEOUT = 1.0
# (name, SQL, allowed error kinds; None means the query must succeed)
CASES: list[tuple[str, str, set[str | None]]] = [
    ("two_statements", "SELECT 1; SELECT 2", {"rejected"}),
    ("commit_escape", "COMMIT; DELETE FROM orders.orders", {"rejected"}),
    ("rollback_escape", "ROLLBACK; DROP TABLE core.tenants", {"rejected"}),
    (
        "writable_cte",
        "WITH d AS (DELETE FROM orders.orders RETURNING id) SELECT count(*) FROM d",
        {"rejected"},
    ),
    ("select_into", "SELECT * INTO public.stolen FROM core.tenants", {"rejected"}),
    ("explain_analyze_write", "EXPLAIN ANALYZE DELETE FROM orders.orders", {"rejected"}),
    ("copy_to_program", "COPY (SELECT 1) TO PROGRAM 'touch /tmp/heron-pwned'", {"rejected"}),
    ("copy_from_file", "COPY core.tenants FROM '/etc/passwd'", {"rejected"}),
    ("delete", "DELETE FROM orders.order_items", {"rejected"}),
    ("update", "UPDATE core.tenants SET name = 'x'", {"rejected"}),
    ("insert", "INSERT INTO core.currencies (code) VALUES ('XXX')", {"rejected"}),
    ("truncate", "TRUNCATE orders.orders", {"rejected"}),
    ("drop", "DROP SCHEMA orders CASCADE", {"rejected"}),
    ("create", "CREATE TABLE public.x (a int)", {"rejected"}),
    ("do_block", "DO $$ BEGIN DELETE FROM orders.orders; END $$", {"rejected"}),
    ("lock_table", "LOCK TABLE core.tenants IN ACCESS EXCLUSIVE MODE", {"rejected"}),
    ("set_role", "SET ROLE postgres", {"rejected"}),
    ("reset_session", "RESET ALL", {"rejected"}),
    ("vacuum", "VACUUM FULL", {"rejected"}),
    ("prepare", "PREPARE p AS DELETE FROM orders.orders", {"rejected"}),
    ("nul_byte", "SELECT 'a\x00b'", {"rejected"}),
    ("empty", "   ", {"rejected"}),
    ("read_file", "SELECT pg_read_file('/etc/passwd')", {"db_error"}),
    ("list_dir", "SELECT pg_ls_dir('.')", {"db_error"}),
    ("lo_import", "SELECT lo_import('/etc/passwd')", {"db_error"}),
    ("sleep", "SELECT pg_sleep(30)", {"db_error", "timeout"}),
    ("set_config_role", "SELECT set_config('role', 'postgres', false)", {"db_error"}),
    ("set_config_timeout", "SELECT set_config('statement_timeout', '0', false)", {"db_error"}),
    ("terminate", "SELECT pg_terminate_backend(pid) FROM pg_stat_activity", {"db_error"}),
    ("advisory_lock", "SELECT pg_advisory_lock(42)", {"db_error"}),
    ("notify", "SELECT pg_notify('heron', 'x')", {"db_error"}),
    ("table_to_xml", "SELECT table_to_xml('core.tenants', true, false, '')", {"db_error"}),
    ("dblink", "SELECT * FROM dblink('host=localhost', 'select 1') AS t(a int)", {"db_error"}),
    ("for_update", "SELECT * FROM core.tenants FOR UPDATE", {"db_error", "rejected"}),
    ("nextval", "SELECT nextval('orders.orders_id_seq')", {"db_error"}),
    ("series_bomb", "SELECT count(*) FROM generate_series(1, 1000000000000)", {"timeout"}),
    (
        "recursive_bomb",
        "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT count(*) FROM r",
        {"timeout"},
    ),
    (
        "cross_join_bomb",
        "SELECT count(*) FROM orders.order_items a, orders.order_items b, orders.order_items c",
        {"timeout"},
    ),
    ("huge_result", "SELECT g FROM generate_series(1, 5000000) g", {"result_too_large", "timeout"}),
    ("huge_string", "SELECT repeat('x', 100000000)", {"result_too_large", "db_error", "timeout"}),
    ("ten_mb_string", "SELECT repeat('y', 10 * 1024 * 1024) AS s", {None}),
    # what a truncated or garbled reply looks like: rejected, never an exception
    ("unterminated_string", "SELECT 'abc", {"rejected"}),
    ("unterminated_dollar_quote", "SELECT $$abc", {"rejected"}),
    ("unterminated_comment", "SELECT 1 /* and then", {"rejected"}),
    ("deep_parentheses", "SELECT " + "(" * 45 + "1" + ")" * 45, {None, "rejected"}),
    ("deeper_parentheses", "SELECT " + "(" * 400 + "1" + ")" * 400, {"rejected"}),
    ("backtracking_arrays", "SELECT " + "ARRAY[" * 20 + "1" + "]" * 20, {"rejected"}),
    ("lone_surrogate", "SELECT '\ud800'", {"rejected"}),
    ("sixty_mb_prediction", "SELECT 1 --" + "x" * 60_000_000, {"rejected"}),
    ("comment_then_write", "SELECT 1; /* x */; DELETE FROM orders.orders", {"rejected"}),
    (
        "huge_array",
        "SELECT array_agg(g) FROM generate_series(1, 20000000) g",
        {"result_too_large", "timeout"},
    ),
    (
        "jsonb_blowup",
        "SELECT jsonb_agg(g) FROM generate_series(1, 20000000) g",
        {"result_too_large", "timeout"},
    ),
    # legitimate controls
    ("trailing_semicolon", "SELECT count(*) FROM core.tenants;", {None}),
    ("cte", "WITH t AS (SELECT id FROM core.tenants) SELECT count(*) FROM t", {None}),
    ("comment", "SELECT 1 AS one -- a comment", {None}),
    ("comment_after_semicolon", "SELECT 1 AS one; -- done", {None}),
    ("block_comment_after_semicolon", "SELECT 1 AS one; /* done */", {None}),
    ("values", "VALUES (1, 'a'), (2, 'b')", {None}),
]


@pytest.fixture(scope="module")
def schemas() -> list[str]:
    return [m.name for m in load_bundle().modules]


def _fingerprint(state: Any, schemas: list[str]) -> list[tuple[str, int, str]]:
    return list(table_checksums(state.admin_dsn, schemas))


@pytest.fixture(scope="module")
def before(module_state_copy: Any, schemas: list[str]) -> list[tuple[str, int, str]]:
    return _fingerprint(module_state_copy, schemas)


@pytest.mark.parametrize(("name", "sql", "allowed"), CASES, ids=[c[0] for c in CASES])
def test_hostile_prediction(
    name: str,
    sql: str,
    allowed: set[str | None],
    module_state_copy: Any,
    schemas: list[str],
    before: list[tuple[str, int, str]],
) -> None:
    """Against a copy of tiny/42 of the module's own: an attack that got through would change
    that copy, not the state every other test (and the next run) reads."""
    tiny_state = module_state_copy
    got = sandbox.execute(tiny_state.reader_dsn, sql, timeout_s=TIMEOUT)
    assert got.error_kind in allowed, f"{name}: {got.error_kind}: {got.error}"
    if got.error_kind is not None:
        assert got.error, "every failure carries a message"
    assert _fingerprint(tiny_state, schemas) == before, f"{name} changed the database"


def test_ten_megabyte_string_arrives_whole(tiny_state: Any) -> None:
    got = sandbox.execute(tiny_state.reader_dsn, "SELECT repeat('y', 10485760)", timeout_s=10)
    assert got.ok and len(got.rows[0][0]) == 10 * 1024 * 1024


def test_reader_settings_cannot_be_escaped(tiny_state: Any) -> None:
    got = sandbox.execute(
        tiny_state.reader_dsn,
        "SELECT current_user, current_setting('transaction_read_only'),"
        " current_setting('TimeZone'), current_setting('search_path')",
        timeout_s=5,
    )
    assert got.rows == [(reader_role(tiny_state.database), "on", "UTC", "public")]


def test_a_reader_cannot_connect_to_another_state(tiny_state: Any, server: Any) -> None:
    other = ensure_state(server, "tiny", 43)
    from psycopg.conninfo import conninfo_to_dict

    own = conninfo_to_dict(tiny_state.reader_dsn)  # its own role and password, elsewhere
    foreign = server.dsn(other.database, user=str(own["user"]), password=str(own["password"]))
    got = sandbox.execute(foreign, "SELECT 1", timeout_s=5)
    assert got.error_kind == "db_error" and "permission denied" in (got.error or "")
