"""The benchmark's schema DDL read back as a catalogue: schemas, tables, columns and comments.

The DDL (``load_bundle().ddl``, the ``schema_ddl`` adapters receive) is a list of ``CREATE
SCHEMA``, ``COMMENT ON SCHEMA``, ``CREATE TABLE s.t (...)`` and ``COMMENT ON TABLE/COLUMN ...
IS '...'`` statements, with ``''`` for a quote inside a comment. This module is the one reader
of it; retrieval, the LLM adapters and the tool adapters build their prompts and documents from
:func:`parse_ddl`. Standard library only, so importing it costs nothing.

- :func:`split_statements` cuts the text at the ``;`` outside quoted strings, dropping ``--``
  comment lines.
- :func:`parse_ddl` gives a :class:`Catalogue`: schema and table comments, and every created
  table with its columns (name, definition, comment), in DDL order. Names are lower-case;
  comments are unescaped.
- :func:`statement_table` says which table a statement belongs to (for cutting the DDL into one
  text per table).
- :func:`first_sentence` is the short form of a comment that prompts use.

>>> cat = parse_ddl('''
... CREATE SCHEMA s;
... COMMENT ON SCHEMA s IS 'Sales.';
... CREATE TABLE s.t (
...     id bigint PRIMARY KEY,
...     kind text CHECK (kind IN ('a', 'b')),
...     CONSTRAINT uq_t UNIQUE (kind)
... );
... COMMENT ON TABLE s.t IS 'The buyer''s things. One row each.';
... COMMENT ON COLUMN s.t.kind IS 'a or b.';
... ''')
>>> cat.schema_comments
{'s': 'Sales.'}
>>> t = cat.tables["s.t"]
>>> t.comment, first_sentence(t.comment)
("The buyer's things. One row each.", "The buyer's things.")
>>> [(c.name, c.definition, c.comment) for c in t.columns]
[('id', 'bigint PRIMARY KEY', ''), ('kind', "text CHECK (kind IN ('a', 'b'))", 'a or b.')]
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "Catalogue",
    "ColumnInfo",
    "TableInfo",
    "first_sentence",
    "parse_ddl",
    "split_statements",
    "statement_table",
]


@dataclass(frozen=True)
class ColumnInfo:
    """A column of a ``CREATE TABLE``."""

    name: str
    definition: str  # the column's text in CREATE TABLE after its name (type, NOT NULL, CHECK)
    comment: str = ""


@dataclass(frozen=True)
class TableInfo:
    """A created table: schema-qualified name, comment (``""`` when none) and columns."""

    name: str
    comment: str
    columns: tuple[ColumnInfo, ...]


@dataclass(frozen=True)
class Catalogue:
    """What the DDL says, each mapping in DDL order (a repeated comment keeps its first place
    and its last text, as in the database)."""

    schema_comments: dict[str, str]  # COMMENT ON SCHEMA: schema -> text
    table_comments: dict[str, str]  # COMMENT ON TABLE: table -> text (created here or not)
    tables: dict[str, TableInfo]  # CREATE TABLE, with the table and column comments


_CREATE_TABLE = re.compile(r"CREATE\s+TABLE\s+([\w.]+)\s*\((.*)\)\s*$", re.I | re.S)
_COMMENT = re.compile(
    r"COMMENT\s+ON\s+(SCHEMA|TABLE|COLUMN)\s+([\w.]+)\s+IS\s+'(.*)'\s*$", re.I | re.S
)
_OWNER = re.compile(r"(?:CREATE\s+TABLE|COMMENT\s+ON\s+(TABLE|COLUMN))\s+([\w.]+)", re.I)
_CONSTRAINT_START = re.compile(
    r"(?:CONSTRAINT|PRIMARY\s+KEY|UNIQUE|CHECK|FOREIGN\s+KEY|EXCLUDE)\b", re.I
)
_SENTENCE_END = re.compile(r"(?<=\.)\s")


def split_statements(ddl: str) -> list[str]:
    """The statements of ``ddl`` (without their ``;``), skipping ``--`` comment lines; a ``;``
    or ``--`` inside a quoted string does not count.

    >>> split_statements("-- hi\\nCREATE TABLE a.b (x int);\\nCOMMENT ON TABLE a.b IS 'p; q';")
    ['CREATE TABLE a.b (x int)', "COMMENT ON TABLE a.b IS 'p; q'"]
    """
    out: list[str] = []
    buf: list[str] = []
    i, n = 0, len(ddl)
    quoted = False
    while i < n:
        ch = ddl[i]
        if quoted:
            buf.append(ch)
            if ch == "'":
                if i + 1 < n and ddl[i + 1] == "'":
                    buf.append("'")
                    i += 1
                else:
                    quoted = False
        elif ch == "'":
            quoted = True
            buf.append(ch)
        elif ch == "-" and ddl.startswith("--", i):
            end = ddl.find("\n", i)
            i = n if end < 0 else end
            continue
        elif ch == ";":
            text = "".join(buf).strip()
            if text:
                out.append(text)
            buf = []
        else:
            buf.append(ch)
        i += 1
    tail = "".join(buf).strip()
    if tail:
        out.append(tail)
    return out


def statement_table(statement: str) -> str | None:
    """The table a ``CREATE TABLE`` or ``COMMENT ON TABLE/COLUMN`` statement is about
    (lower-case), else None.

    >>> statement_table("COMMENT ON COLUMN s.t.x IS 'n'"), statement_table("CREATE SCHEMA s")
    ('s.t', None)
    """
    m = _OWNER.match(statement.lstrip())
    if m is None:
        return None
    name = m.group(2).lower()
    return name.rpartition(".")[0] if (m.group(1) or "").upper() == "COLUMN" else name


def _top_level_items(body: str) -> list[str]:
    """``body`` split at the commas outside parentheses and quotes."""
    items, depth, quoted, start = [], 0, False, 0
    for i, ch in enumerate(body):
        if ch == "'":
            quoted = not quoted
        elif not quoted and ch == "(":
            depth += 1
        elif not quoted and ch == ")":
            depth -= 1
        elif not quoted and ch == "," and depth == 0:
            items.append(body[start:i].strip())
            start = i + 1
    items.append(body[start:].strip())
    return [i for i in items if i]


def _column(item: str) -> tuple[str, str]:
    """A column item of ``CREATE TABLE`` as (name without quotes, definition on one line)."""
    col, _, rest = item.partition(" ")
    return col.strip('"'), " ".join(rest.split())


def parse_ddl(ddl: str) -> Catalogue:
    """The :class:`Catalogue` of ``ddl``. Constraint items of a ``CREATE TABLE`` (``CONSTRAINT``,
    ``PRIMARY KEY``, ``UNIQUE``, ``CHECK``, ``FOREIGN KEY``, ``EXCLUDE``) are not columns; a
    column's definition has its whitespace runs folded to one space. Pure.

    >>> parse_ddl("COMMENT ON TABLE s.t IS 'It''s; fine.'").table_comments
    {'s.t': "It's; fine."}
    """
    schema_comments: dict[str, str] = {}
    table_comments: dict[str, str] = {}
    column_comments: dict[tuple[str, str], str] = {}
    bodies: dict[str, str] = {}
    for statement in split_statements(ddl):
        m = _COMMENT.match(statement)
        if m:
            kind, name, text = m.group(1).upper(), m.group(2).lower(), m.group(3)
            text = text.replace("''", "'")
            if kind == "SCHEMA":
                schema_comments[name] = text
            elif kind == "TABLE":
                table_comments[name] = text
            else:
                table, _, column = m.group(2).rpartition(".")
                column_comments[(table.lower(), column)] = text
            continue
        c = _CREATE_TABLE.match(statement)
        if c:
            bodies[c.group(1).lower()] = c.group(2)
    tables = {}
    for name, body in bodies.items():
        columns = []
        for item in _top_level_items(body):
            if not _CONSTRAINT_START.match(item):
                col, definition = _column(item)
                columns.append(ColumnInfo(col, definition, column_comments.get((name, col), "")))
        tables[name] = TableInfo(name, table_comments.get(name, ""), tuple(columns))
    return Catalogue(schema_comments, table_comments, tables)


def first_sentence(text: str) -> str:
    """The first sentence of a comment: up to the first ``.`` followed by whitespace.

    >>> first_sentence("Orders. One row per checkout.")
    'Orders.'
    """
    return _SENTENCE_END.split(text, maxsplit=1)[0] if text else ""
