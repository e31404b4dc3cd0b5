"""The ``citus`` key layout: tenant tables distributed by ``tenant_id``, the others replicated.

Citus (the PostgreSQL extension that shards tables across nodes) accepts a primary key or
unique constraint on a distributed table only when it contains the distribution column, and a
foreign key between distributed tables only when both sides contain it. Our keys are
single-column (``PRIMARY KEY (id)``, ``FOREIGN KEY (order_id) REFERENCES orders.orders(id)``),
so this layout rewrites them:

- a table with a ``tenant_id`` column is *distributed* by it, all such tables co-located; every
  other table (the lookups, ``core.tenants`` itself, the platform-wide tables) is a *reference*
  table, copied to every node;
- a key of a distributed table without ``tenant_id`` gets it prepended: ``PRIMARY KEY (id)``
  becomes ``PRIMARY KEY (tenant_id, id)`` and ``UNIQUE (invoice_number)`` becomes
  ``UNIQUE (tenant_id, invoice_number)`` (unique per tenant, no longer globally);
- a foreign key between two distributed tables gets ``tenant_id`` on both sides, at the front;
  foreign keys to reference tables stay as they are (Citus allows distributed -> reference);
- a foreign key from a reference table to a distributed one is an error (Citus forbids it).

The generated data is the same in both layouts; only keys change. Everything here is pure:
statements in, statements out (see ``load.seed_database(layout=...)`` and ``ddl.ddl_script``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from pytest_heron.core.errors import SpecError
from pytest_heron.generate.spec import Bundle

LAYOUTS = ("standard", "citus")  # key layouts of `heron seed`; the plugin uses standard only

__all__ = [
    "DISTRIBUTION_COLUMN",
    "LAYOUTS",
    "Placement",
    "classify",
    "declared_keys",
    "distribution_statements",
    "key_statements",
    "placement",
    "rewrite_fk",
    "rewrite_index",
    "rewrite_key",
    "shard_count",
]
DISTRIBUTION_COLUMN = "tenant_id"


@dataclass(frozen=True)
class Placement:
    """Which tables are distributed by ``tenant_id`` and which are reference tables (sorted)."""

    distributed: tuple[str, ...]
    reference: tuple[str, ...]


def classify(columns: Mapping[str, Iterable[str]]) -> Placement:
    """Split tables (``schema.table`` -> column names) into distributed and reference tables.

    >>> classify({"orders.orders": ["id", "tenant_id"], "core.tenants": ["id", "slug"]})
    Placement(distributed=('orders.orders',), reference=('core.tenants',))
    """
    distributed = sorted(t for t, cols in columns.items() if DISTRIBUTION_COLUMN in cols)
    reference = sorted(t for t in columns if t not in set(distributed))
    return Placement(tuple(distributed), tuple(reference))


def placement(bundle: Bundle) -> Placement:
    """The placement of every table of the bundle, from the specs' column lists."""
    return classify({fq: spec.column_names for fq, spec in bundle.tables.items()})


def _plain(name: str) -> str:
    """``"core"."users"`` and ``core.users`` name the same table (our names need no quotes)."""
    return name.replace('"', "")


def _columns(text: str) -> list[str]:
    return [_plain(c.strip()) for c in text.split(",") if c.strip()]


def _with_tenant(cols: list[str]) -> list[str]:
    return cols if DISTRIBUTION_COLUMN in cols else [DISTRIBUTION_COLUMN, *cols]


_KEY = re.compile(
    r"^(?P<head>ALTER TABLE (?P<table>\S+) ADD CONSTRAINT \S+ (?:PRIMARY KEY|UNIQUE) )"
    r"\((?P<cols>[^()]*)\)(?P<tail>.*)$",
    re.S,
)


def rewrite_key(stmt: str, distributed: Iterable[str]) -> str:
    """Put ``tenant_id`` first in a primary key or unique constraint of a distributed table.

    >>> rewrite_key("ALTER TABLE orders.orders ADD CONSTRAINT orders_pkey PRIMARY KEY (id)",
    ...             ["orders.orders"])
    'ALTER TABLE orders.orders ADD CONSTRAINT orders_pkey PRIMARY KEY (tenant_id, id)'
    """
    m = _KEY.match(stmt)
    if m is None:
        raise SpecError(f"citus layout: not a primary key or unique constraint: {stmt}")
    if _plain(m["table"]) not in set(distributed):
        return stmt
    cols = _with_tenant(_columns(m["cols"]))
    return f"{m['head']}({', '.join(cols)}){m['tail']}"


_INDEX = re.compile(
    r"^(?P<head>CREATE UNIQUE INDEX \S+ ON (?P<table>\S+) )\((?P<cols>[^()]*)\)(?P<tail>.*)$",
    re.S,
)


def rewrite_index(stmt: str, distributed: Iterable[str]) -> str:
    """Plain indexes stay; a unique index of a distributed table gets ``tenant_id`` first.

    >>> rewrite_index("CREATE UNIQUE INDEX ux_a ON crm.leads (email);", ["crm.leads"])
    'CREATE UNIQUE INDEX ux_a ON crm.leads (tenant_id, email);'
    """
    if not stmt.upper().startswith("CREATE UNIQUE INDEX"):
        return stmt
    m = _INDEX.match(stmt)
    if m is None:
        raise SpecError(f"citus layout: cannot rewrite this unique index (columns only): {stmt}")
    if _plain(m["table"]) not in set(distributed):
        return stmt
    return f"{m['head']}({', '.join(_with_tenant(_columns(m['cols'])))}){m['tail']}"


_FK = re.compile(
    r"^(?P<head>ALTER TABLE (?P<table>\S+) ADD CONSTRAINT (?P<name>\S+) FOREIGN KEY )"
    r"\((?P<cols>[^()]*)\) REFERENCES (?P<target>[^\s(]+) ?\((?P<refcols>[^()]*)\)(?P<tail>.*)$",
    re.S,
)
_SET_ACTION = re.compile(r"\bON (?P<event>DELETE|UPDATE) SET (?P<what>NULL|DEFAULT)\b(?! ?\()")


def rewrite_fk(stmt: str, distributed: Iterable[str]) -> str:
    """Make a foreign key between two distributed tables include ``tenant_id`` on both sides.

    Keys to reference tables are returned unchanged. ``ON DELETE SET NULL`` / ``SET DEFAULT``
    get the original columns as their column list (PostgreSQL 15+), so a deleted parent clears
    the link, never ``tenant_id``; ``ON UPDATE SET ...`` cannot take a list and is refused.

    >>> rewrite_fk("ALTER TABLE orders.order_items ADD CONSTRAINT fk_order_items_order_id "
    ...            "FOREIGN KEY (order_id) REFERENCES orders.orders(id);",
    ...            ["orders.order_items", "orders.orders"])  # doctest: +NORMALIZE_WHITESPACE
    'ALTER TABLE orders.order_items ADD CONSTRAINT fk_order_items_order_id
     FOREIGN KEY (tenant_id, order_id) REFERENCES orders.orders(tenant_id, id);'
    """
    m = _FK.match(stmt)
    if m is None:
        raise SpecError(f"citus layout: cannot read this foreign key: {stmt}")
    dist = set(distributed)
    source, target = _plain(m["table"]), _plain(m["target"])
    if target not in dist:
        return stmt  # to a reference table: Citus accepts it as it is
    if source not in dist:
        raise SpecError(
            f"citus layout: reference table {source} has a foreign key to distributed table "
            f"{target} ({m['name']}); Citus forbids it. Give {source} a tenant_id column or "
            f"drop the key in heron_data/modules/{source.split('.')[0]}.sql"
        )
    cols, refcols = _columns(m["cols"]), _columns(m["refcols"])
    if len(cols) != len(refcols):
        raise SpecError(f"citus layout: column counts differ in {m['name']}: {stmt}")
    pairs = list(zip(cols, refcols, strict=True))
    if (DISTRIBUTION_COLUMN, DISTRIBUTION_COLUMN) not in pairs:
        if DISTRIBUTION_COLUMN in cols or DISTRIBUTION_COLUMN in refcols:
            raise SpecError(
                f"citus layout: {m['name']} pairs tenant_id with another column; "
                f"both sides must hold tenant_id at the same position: {stmt}"
            )
        pairs.insert(0, (DISTRIBUTION_COLUMN, DISTRIBUTION_COLUMN))
    tail = m["tail"]
    for action in _SET_ACTION.finditer(tail):
        if action["event"] == "UPDATE":
            raise SpecError(
                f"citus layout: {m['name']} has ON UPDATE SET {action['what']}, which would "
                f"also clear tenant_id (PostgreSQL takes a column list only for ON DELETE)"
            )
    own = ", ".join(c for c in cols if c != DISTRIBUTION_COLUMN)
    tail = _SET_ACTION.sub(lambda a: f"ON DELETE SET {a['what']} ({own})", tail)
    left = ", ".join(c for c, _ in pairs)
    right = ", ".join(r for _, r in pairs)
    return f"{m['head']}({left}) REFERENCES {m['target']}({right}){tail}"


# Shards per distributed table, by scale. Every shard of every table is a table (with its
# keys and indexes) on a worker: 187 tables x Citus's default of 32 shards made seeding tiny
# take 260 s on a 3-node loopback cluster against 80 s with 4 (measured, DECISIONS 2026-12-02).
SHARD_COUNTS = {"tiny": 4, "small": 8, "bench": 32, "large": 32}


def shard_count(scale: str) -> int:
    """Shards per distributed table at ``scale`` (Citus's default, 32, for unknown scales).

    >>> shard_count("tiny"), shard_count("large")
    (4, 32)
    """
    return SHARD_COUNTS.get(scale, 32)


def distribution_statements(place: Placement, shards: int | None = None) -> list[str]:
    """``CREATE EXTENSION citus``, then the reference tables, then the distributed tables, all
    co-located with the first one (a colocation group of their own, of ``shards`` shards per
    table; None: the server's ``citus.shard_count``), in name order."""
    if not place.distributed:
        raise SpecError("citus layout: no table has a tenant_id column")
    anchor, *rest = place.distributed
    out = ["CREATE EXTENSION IF NOT EXISTS citus;"]
    out += [f"SELECT create_reference_table('{t}');" for t in place.reference]
    count = "" if shards is None else f", shard_count => {shards}"
    out.append(
        f"SELECT create_distributed_table('{anchor}', '{DISTRIBUTION_COLUMN}',"
        f" colocate_with => 'none'{count});"
    )
    out += [
        f"SELECT create_distributed_table('{t}', '{DISTRIBUTION_COLUMN}',"
        f" colocate_with => '{anchor}');"
        for t in rest
    ]
    return out


_TABLE = re.compile(r"^CREATE TABLE (?P<table>\w+\.\w+) \(\n(?P<body>.*?)^\);", re.M | re.S)
_INLINE_PK = re.compile(r"^\s+(?P<col>\w+) [^,]*\bPRIMARY KEY,?$")
_INLINE_UQ = re.compile(r"^\s+(?P<col>\w+) [^,]*\bCONSTRAINT (?P<name>\w+) UNIQUE,?$")
_TABLE_KEY = re.compile(
    r"^\s+CONSTRAINT (?P<name>\w+) (?P<kind>PRIMARY KEY|UNIQUE) \((?P<cols>[^()]*)\),?$"
)


def declared_keys(ddl: str) -> list[tuple[str, str, str]]:
    """``(table, constraint name, definition)`` of every primary key and unique constraint in
    the CREATE TABLE statements of ``ddl``, spelled as ``pg_get_constraintdef`` spells them
    (so the DDL can be rewritten without a server). Unknown spellings are an error.

    >>> declared_keys("CREATE TABLE a.b (\\n    id bigint PRIMARY KEY,\\n"
    ...               "    CONSTRAINT uq_b_x_y UNIQUE (x, y)\\n);")
    [('a.b', 'b_pkey', 'PRIMARY KEY (id)'), ('a.b', 'uq_b_x_y', 'UNIQUE (x, y)')]
    """
    keys = []
    for table in _TABLE.finditer(ddl):
        fq = table["table"]
        for line in table["body"].splitlines():
            if pk := _INLINE_PK.match(line):
                keys.append((fq, f"{fq.split('.')[1]}_pkey", f"PRIMARY KEY ({pk['col']})"))
            elif uq := _INLINE_UQ.match(line):
                keys.append((fq, uq["name"], f"UNIQUE ({uq['col']})"))
            elif tk := _TABLE_KEY.match(line):
                keys.append((fq, tk["name"], f"{tk['kind']} ({', '.join(_columns(tk['cols']))})"))
            elif re.search(r"\b(PRIMARY KEY|UNIQUE)\b", line):
                raise SpecError(f"citus layout: cannot read the key in {fq}: {line.strip()}")
    return keys


def key_statements(keys: Sequence[tuple[str, str, str]]) -> list[tuple[str, str]]:
    """``(drop, add)`` statement pairs of ``declared_keys`` output."""
    return [
        (
            f"ALTER TABLE {table} DROP CONSTRAINT {name};",
            f"ALTER TABLE {table} ADD CONSTRAINT {name} {definition};",
        )
        for table, name, definition in keys
    ]
