"""The schema as the tool adapters put it in prompts: one text per table, comments, the tables a
text names, foreign-key lines; and :func:`require`, the optional-extra import.

- :func:`require` imports a tool's package or fails with the exact pip command to run.
- :func:`table_chunks`, :func:`table_comments`, :func:`schema_model`: the benchmark's DDL
  (``BenchmarkContext.schema_ddl``, statements with ``COMMENT ON`` lines, read by
  :mod:`pytest_heron.dataset.catalogue`) cut into one text per table, the way a
  retrieval-augmented tool is meant to be trained on it, and as tables with their columns and
  comments.
- :func:`tables_mentioned`: which known tables a text names (schema-qualified), in order;
  :func:`chunks_in`: which tables' chunks a prompt carries verbatim.
- :func:`fk_lines`, :func:`fks_among`: foreign-key column pairs (read with
  :func:`pytest_heron.database.introspect.foreign_keys`) as prompt lines.

Ranking text against a question is :class:`pytest_heron.systems.retrieval.lexical.LexicalIndex`.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterable, Mapping
from types import ModuleType

from pytest_heron import AdapterError
from pytest_heron.retrieval import TableInfo, parse_ddl, split_statements, statement_table

__all__ = [
    "FALLBACK_TABLES",
    "chunks_in",
    "fk_lines",
    "fks_among",
    "require",
    "schema_model",
    "table_chunks",
    "table_comments",
    "tables_mentioned",
]

FALLBACK_TABLES = 5  # tables kept when a schema-linking reply names none


def require(module: str, *, adapter: str, extra: str) -> ModuleType:
    """Import ``module`` or raise AdapterError naming the extra that provides it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise AdapterError(
            f"the {adapter} adapter needs the optional dependency {module!r} ({exc}); "
            f"install it with: pip install 'pytest-heron[{extra}]'"
        ) from None


def table_chunks(ddl: str) -> dict[str, str]:
    """One DDL text per table: its ``CREATE TABLE`` and its ``COMMENT ON`` statements, each
    ending in ``;``, keyed by the schema-qualified name, in the order the tables are created.

    >>> table_chunks("CREATE SCHEMA s; CREATE TABLE s.t (x int); COMMENT ON COLUMN s.t.x IS 'n';")
    {'s.t': "CREATE TABLE s.t (x int);\\nCOMMENT ON COLUMN s.t.x IS 'n';"}
    """
    parts: dict[str, list[str]] = {}
    for statement in split_statements(ddl):
        owner = statement_table(statement)
        if owner is not None:
            parts.setdefault(owner, []).append(statement + ";")
    return {name: "\n".join(stmts) for name, stmts in parts.items()}


def table_comments(ddl: str) -> dict[str, str]:
    """The ``COMMENT ON TABLE`` text of each table (quotes unescaped)."""
    return parse_ddl(ddl).table_comments


def tables_mentioned(text: str, known: Iterable[str]) -> list[str]:
    """The known schema-qualified tables named in ``text`` (as whole words), sorted.

    >>> tables_mentioned("SELECT * FROM sales.orders JOIN sales.order_items", ["sales.orders",
    ...     "sales.order_items", "sales.order", "core.tenants"])
    ['sales.order_items', 'sales.orders']
    """
    lowered = text.lower()
    found = []
    for name in sorted(set(known)):
        if re.search(rf"(?<![\w.]){re.escape(name.lower())}(?![\w])", lowered):
            found.append(name)
    return found


def chunks_in(text: str, chunks: Mapping[str, str]) -> list[str]:
    """The tables whose chunk (:func:`table_chunks`) appears verbatim in ``text``, sorted: what a
    tool that pastes retrieved DDL into its prompt (Vanna) showed its model.

    >>> chunks = table_chunks("CREATE TABLE s.a (x int); CREATE TABLE s.b (y int);")
    >>> chunks_in("===Tables\\nCREATE TABLE s.b (y int);\\n\\n", chunks)
    ['s.b']
    """
    return sorted(name for name, chunk in chunks.items() if chunk in text)


def schema_model(ddl: str) -> dict[str, TableInfo]:
    """Every table of ``ddl`` with its comment and its columns (definition and comment), in
    creation order. Pure.

    >>> m = schema_model("CREATE TABLE s.t (id bigint PRIMARY KEY, k text CHECK (k IN ('a', 'b')),"
    ...     " UNIQUE (k)); COMMENT ON TABLE s.t IS 'T.'; COMMENT ON COLUMN s.t.k IS 'Kind.';")
    >>> m["s.t"].comment, [(c.name, c.definition, c.comment) for c in m["s.t"].columns]
    ('T.', [('id', 'bigint PRIMARY KEY', ''), ('k', "text CHECK (k IN ('a', 'b'))", 'Kind.')])
    """
    return parse_ddl(ddl).tables


def fk_lines(pairs: list[tuple[str, str]]) -> str:
    """Foreign keys as ``child.col = parent.col`` lines for a prompt."""
    return "\n".join(f"{a} = {b}" for a, b in pairs) or "(none)"


def fks_among(pairs: list[tuple[str, str]], tables: Iterable[str]) -> list[tuple[str, str]]:
    """The foreign keys whose two ends are both in ``tables``."""
    keep = set(tables)
    return [p for p in pairs if all(col.rsplit(".", 1)[0] in keep for col in p)]
