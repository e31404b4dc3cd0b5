"""What a live database's catalogue says, read once: its foreign keys.

:func:`foreign_keys` is the one reader of ``pg_constraint`` (the audit's join-equivalence rule and
the DIN-SQL / MAC-SQL prompts both use it). It keeps no cache: a caller that asks more than once
keeps the tuple it got (a state rebuilt under the same name would otherwise serve stale keys).
The helpers below it are pure views of that tuple.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["ForeignKey", "by_column", "column_pairs", "foreign_keys"]


@dataclass(frozen=True, order=True)
class ForeignKey:
    """One column pair of a foreign-key constraint (a two-column key gives two records)."""

    table: str  # the referencing table, schema-qualified
    column: str
    ref_table: str  # the referenced table, schema-qualified
    ref_column: str
    not_null: bool  # the referencing column is NOT NULL
    width: int = 1  # columns in the constraint (1: a single-column key)

    @property
    def pair(self) -> tuple[str, str]:
        """``("schema.table.column", "schema.table.column")``, referencing side first."""
        return f"{self.table}.{self.column}", f"{self.ref_table}.{self.ref_column}"


FOREIGN_KEYS_SQL = """
SELECT sn.nspname || '.' || s.relname, sa.attname,
       tn.nspname || '.' || t.relname, ta.attname,
       sa.attnotnull, cardinality(c.conkey)
FROM pg_constraint c
JOIN pg_class s ON s.oid = c.conrelid
JOIN pg_namespace sn ON sn.oid = s.relnamespace
JOIN pg_class t ON t.oid = c.confrelid
JOIN pg_namespace tn ON tn.oid = t.relnamespace
JOIN LATERAL unnest(c.conkey, c.confkey) AS k(src, dst) ON true
JOIN pg_attribute sa ON sa.attrelid = c.conrelid AND sa.attnum = k.src
JOIN pg_attribute ta ON ta.attrelid = c.confrelid AND ta.attnum = k.dst
WHERE c.contype = 'f'
"""


def foreign_keys(dsn: str) -> tuple[ForeignKey, ...]:
    """Every foreign-key column pair of the database at ``dsn`` (any role that can connect can
    read the catalogue), sorted by :class:`ForeignKey` order (in Python, so the order does not
    depend on the server's collation). One query, no cache."""
    import psycopg

    with psycopg.connect(dsn, connect_timeout=10) as conn:
        rows = conn.execute(FOREIGN_KEYS_SQL).fetchall()
    return tuple(
        sorted(
            ForeignKey(str(a), str(b), str(c), str(d), bool(nn), int(w))
            for a, b, c, d, nn, w in rows
        )
    )


def by_column(fks: Iterable[ForeignKey]) -> dict[tuple[str, str], ForeignKey]:
    """The single-column foreign keys keyed by ``(referencing table, column)``. Pure.

    >>> fk = ForeignKey("s.child", "parent_id", "s.parent", "id", True)
    >>> by_column([fk, ForeignKey("s.c", "a", "s.p", "a", False, width=2)])
    {('s.child', 'parent_id'): ForeignKey(table='s.child', column='parent_id', \
ref_table='s.parent', ref_column='id', not_null=True, width=1)}
    """
    return {(f.table, f.column): f for f in fks if f.width == 1}


def column_pairs(fks: Iterable[ForeignKey], tables: Iterable[str]) -> list[tuple[str, str]]:
    """The column pairs (:attr:`ForeignKey.pair`) of the keys whose two tables are both in
    ``tables``, sorted. Pure.

    >>> keys = [ForeignKey("s.b", "a_id", "s.a", "id", True), ForeignKey("s.c", "b_id", "s.b",
    ...     "id", False)]
    >>> column_pairs(keys, ["s.a", "s.b"])
    [('s.b.a_id', 's.a.id')]
    """
    wanted = set(tables)
    return sorted(f.pair for f in fks if f.table in wanted and f.ref_table in wanted)
