"""The one foreign-key reader (database/introspect.py) on the real PostgreSQL: what it reads, its
order, and that it keeps no cache (a database changed under the same DSN is read afresh)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import psycopg
import pytest

from pytest_heron.database.introspect import ForeignKey, by_column, column_pairs, foreign_keys
from pytest_heron.database.server import Server


def test_reads_every_foreign_key_column_of_a_state(tiny_state) -> None:  # type: ignore[no-untyped-def]
    fks = foreign_keys(tiny_state.reader_dsn)  # the read-only role can read the catalogue
    with psycopg.connect(tiny_state.admin_dsn) as conn:
        row = conn.execute(
            "SELECT sum(cardinality(conkey)) FROM pg_constraint WHERE contype = 'f'"
        ).fetchone()
    assert row is not None and len(fks) == row[0] > 100
    assert list(fks) == sorted(fks)
    assert fks == foreign_keys(tiny_state.admin_dsn)  # the same catalogue through either role
    customer = by_column(fks)[("orders.orders", "customer_id")]
    assert (customer.ref_table, customer.ref_column, customer.not_null) == (
        "orders.customers",
        "id",
        True,
    )
    pairs = column_pairs(fks, ["orders.orders", "orders.customers"])
    assert ("orders.orders.customer_id", "orders.customers.id") in pairs
    assert all(a.startswith("orders.") and b.startswith("orders.") for a, b in pairs)


@pytest.fixture
def scratch(server: Server) -> Iterator[str]:
    """A fresh database on the test server, dropped afterwards."""
    name = f"heron_introspect_{os.getpid()}"
    with psycopg.connect(server.admin_dsn, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name}")
        conn.execute(f"CREATE DATABASE {name}")
    try:
        yield server.dsn(name)
    finally:
        with psycopg.connect(server.admin_dsn, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def test_keys_changed_under_the_same_dsn_are_read_afresh(scratch: str) -> None:
    with psycopg.connect(scratch, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA s")
        conn.execute("CREATE TABLE s.p (a int, b int, PRIMARY KEY (a, b), UNIQUE (a))")
        conn.execute("CREATE TABLE s.c (id int, pa int NOT NULL REFERENCES s.p (a), pb int)")
    assert foreign_keys(scratch) == (ForeignKey("s.c", "pa", "s.p", "a", True, 1),)
    with psycopg.connect(scratch, autocommit=True) as conn:
        conn.execute("ALTER TABLE s.c ADD FOREIGN KEY (pa, pb) REFERENCES s.p (a, b)")
    again = foreign_keys(scratch)
    assert again == (
        ForeignKey("s.c", "pa", "s.p", "a", True, 1),
        ForeignKey("s.c", "pa", "s.p", "a", True, 2),
        ForeignKey("s.c", "pb", "s.p", "b", False, 2),
    )
    assert by_column(again) == {("s.c", "pa"): again[0]}  # two-column keys are not single ones
