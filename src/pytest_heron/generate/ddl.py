"""The schema's DDL as the seeder uses it: section 2 split into indexes, foreign keys and the
rest; the keys read from the DDL text; section 1 split per table; ``heron ddl``'s script."""

from __future__ import annotations

import re
from typing import Any

import psycopg
from psycopg import sql

from pytest_heron.core.errors import ConfigError
from pytest_heron.dataset import split_statements
from pytest_heron.generate import citus
from pytest_heron.generate.lanes import target
from pytest_heron.generate.spec import Bundle, load_bundle

_FK = re.compile(
    r"^ALTER TABLE (?P<table>[\w.]+) ADD CONSTRAINT (?P<name>\w+) FOREIGN KEY .*;$", re.S
)


def _is_index(stmt: str) -> bool:
    return stmt.upper().startswith(("CREATE INDEX", "CREATE UNIQUE INDEX"))


def section2(bundle: Bundle, layout: str = "standard") -> list[str]:
    """Section 2 of every module's DDL (after ``-- @constraints``), one statement each, with
    the indexes and foreign keys rewritten for the ``citus`` layout."""
    distributed = citus.placement(bundle).distributed if layout == "citus" else ()
    out = []
    for module in bundle.modules:
        for raw in split_statements(module.ddl_constraints):
            stmt = " ".join(raw.split()) + ";"
            if distributed and _is_index(stmt):
                stmt = citus.rewrite_index(stmt, distributed)
            elif distributed and _FK.match(stmt):
                stmt = citus.rewrite_fk(stmt, distributed)
            out.append(stmt)
    return out


def constraint_statements(
    bundle: Bundle, layout: str = "standard"
) -> tuple[list[str], list[tuple[str, str]], list[str]]:
    """Section 2 of every module, split into indexes, foreign keys (as NOT VALID additions with
    their VALIDATE statements) and anything else."""
    indexes: list[str] = []
    fks: list[tuple[str, str]] = []
    other: list[str] = []
    for stmt in section2(bundle, layout):
        fk = _FK.match(stmt)
        if _is_index(stmt):
            indexes.append(stmt)
        elif fk:
            fks.append(
                (
                    stmt[:-1] + " NOT VALID;",
                    f"ALTER TABLE {fk['table']} VALIDATE CONSTRAINT {fk['name']};",
                )
            )
        else:
            other.append(stmt)
    return indexes, fks, other


def ddl_script(layout: str = "standard", *, distribute: bool = True) -> str:
    """The schema of ``layout`` as one psql script without data, for review or to build an
    empty copy by hand; ``heron ddl`` prints it.

    For ``citus``: the tables, then the keys Citus would refuse dropped, the distribution calls
    (left out with ``distribute=False``), a marker where ``heron seed`` loads the data, then the
    keys with ``tenant_id``, the indexes and the rewritten foreign keys. The keys are read from
    the DDL text, as ``seed_database`` reads them (for Citus it also checks them against the
    catalog; tests compare both layouts' catalogs with this script's).
    """
    if layout not in citus.LAYOUTS:
        raise ConfigError(f"unknown layout {layout!r}; known: {', '.join(citus.LAYOUTS)}")
    bundle = load_bundle()
    head = f"-- heron schema, layout {layout}, data version {bundle.data_version}\n"
    if layout == "standard":
        return head + bundle.ddl + "\n".join(["", "-- @constraints", *section2(bundle), ""])
    place = citus.placement(bundle)
    keys = [
        (drop, add, citus.rewrite_key(add, place.distributed))
        for drop, add in citus.key_statements(citus.declared_keys(bundle.ddl))
    ]
    lines = [
        head + f"-- {len(place.distributed)} tables distributed by tenant_id (co-located),"
        f" {len(place.reference)} reference tables",
        "",
        "-- 1. Tables, with the keys of the standard layout",
        bundle.ddl,
        "-- 2. Keys without tenant_id on distributed tables (Citus refuses them); re-added in 5",
        *[drop for drop, add, new in keys if new != add],
        "",
        "-- 3. Distribution (needs the citus extension; Citus 12.1+ for PostgreSQL 16)",
        *(citus.distribution_statements(place) if distribute else ["-- (left out)"]),
        "",
        "-- 4. heron seed --layout citus loads the data here (COPY into the empty tables)",
        "",
        "-- 5. Keys with tenant_id, indexes, foreign keys",
        *[new for drop, add, new in keys if new != add],
        *section2(bundle, layout),
        "",
    ]
    return "\n".join(lines)


def drop_keys(conn: psycopg.Connection[Any], schemas: list[str]) -> list[tuple[str, str, str]]:
    """Drop the primary keys and unique constraints of ``schemas``; return what was dropped,
    as ``(schema.table, constraint name, definition)`` sorted."""
    rows = conn.execute(
        """SELECT n.nspname, c.relname, k.conname, pg_get_constraintdef(k.oid), k.contype
           FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid
           JOIN pg_namespace n ON n.oid = c.relnamespace
           WHERE k.contype IN ('p', 'u') AND n.nspname = ANY(%s)
           ORDER BY 1, 2, k.contype, 3""",
        (schemas,),
    ).fetchall()
    dropped = []
    for schema, table, name, definition, _ in rows:
        target = sql.Identifier(schema, table).as_string(conn)
        conn.execute(f"ALTER TABLE {target} DROP CONSTRAINT {sql.Identifier(name).as_string(conn)}")
        dropped.append((f"{schema}.{table}", str(name), str(definition)))
    return sorted(dropped)


def key_statements(
    bundle: Bundle, layout: str
) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """Per table, the statements that drop its primary key and unique constraints and those
    that add them back, read from the DDL text (so the load can be planned before the tables
    exist); for the ``citus`` layout the additions are rewritten with ``tenant_id``.
    :func:`seed_database` checks them against the keys it drops from the catalog when it makes
    the tables up front."""
    distributed = citus.placement(bundle).distributed if layout == "citus" else ()
    drops: dict[str, list[str]] = {}
    adds: dict[str, list[str]] = {}
    for drop, add in citus.key_statements(citus.declared_keys(bundle.ddl)):
        stmt = add.rstrip(";")
        if distributed:
            stmt = citus.rewrite_key(stmt, distributed)
        table = target(stmt)[0]
        drops.setdefault(table, []).append(drop.rstrip(";"))
        adds.setdefault(table, []).append(stmt)
    return drops, adds


_DDL_TABLE = re.compile(r"^(?:CREATE TABLE|COMMENT ON (?:TABLE|COLUMN)) (\w+\.\w+)[\s.(]")
_DDL_SCHEMA = re.compile(r"^(?:CREATE SCHEMA|COMMENT ON SCHEMA) \w+\b")


def table_ddl(bundle: Bundle) -> tuple[list[str], dict[str, list[str]]] | None:
    """Section 1 of every module split into the statements that make the schemas and, per
    table, those that make it (its CREATE TABLE and COMMENTs), in order; None if a statement
    is neither (then the tables are made up front, as one script per module)."""
    schemas: list[str] = []
    tables: dict[str, list[str]] = {}
    for module in bundle.modules:
        for stmt in split_statements(module.ddl_tables):
            if m := _DDL_TABLE.match(stmt):
                if m.group(1) not in tables and not stmt.startswith("CREATE TABLE"):
                    return None  # a comment before its table
                tables.setdefault(m.group(1), []).append(stmt)
            elif _DDL_SCHEMA.match(stmt):
                schemas.append(stmt)
            else:
                return None
    return schemas, tables
