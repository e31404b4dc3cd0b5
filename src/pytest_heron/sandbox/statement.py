"""What a predicted statement is and reads: the guard that accepts exactly one read-only query."""

from __future__ import annotations

from typing import cast

import sqlglot
from sqlglot import exp

_WRITES = (
    exp.Insert,
    exp.Update,
    exp.Delete,
    exp.Merge,
    exp.Create,
    exp.Drop,
    exp.Alter,
    exp.Command,
    exp.Into,
    exp.Lock,
    exp.Set,
)


_QUERIES = (exp.Select, exp.SetOperation, exp.Values, exp.Subquery)


def check_statement(sql_text: str) -> str | None:
    """None if ``sql_text`` is exactly one read-only query; else why it is rejected."""
    if "\x00" in sql_text:
        return "the SQL contains a NUL byte"
    try:
        statements = [s for s in sqlglot.parse(sql_text, read="postgres") if s is not None]
    except sqlglot.errors.ParseError as exc:
        first = str(exc).splitlines()[0] if str(exc) else "parse error"
        return f"the SQL does not parse as PostgreSQL: {first[:300]}"
    if len(statements) != 1:
        return f"expected exactly one statement, got {len(statements)}"
    tree = statements[0]
    if not isinstance(tree, _QUERIES):
        return f"only a SELECT, WITH, VALUES or set operation is accepted, not {tree.key.upper()}"
    for node in tree.walk():
        if isinstance(node, _WRITES):
            return f"the query contains a {node.key.upper()} clause, which could change data"
    return None


def parse_sql(sql: str) -> exp.Expression:
    return cast(exp.Expression, sqlglot.parse_one(sql, read="postgres"))


def tables_read(sql: str) -> set[str]:
    """Schema-qualified tables a query reads (CTE names excluded)."""
    tree = parse_sql(sql)
    ctes = {c.alias_or_name for c in tree.find_all(exp.CTE)}
    out = set()
    for t in tree.find_all(exp.Table):
        if not t.name or (not t.db and t.name in ctes):
            continue
        out.add(f"{t.db}.{t.name}" if t.db else t.name)
    return out
