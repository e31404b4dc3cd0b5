"""A rewrite of a gold query that returns its rows but is not its tree (for the gold-share tests).

The board counts a prediction that is, wraps or contains the public gold toward its gold share
(:mod:`pytest_heron.board.gold_prints`); a test that needs a right answer which is *not* the
gold adds ``1 = 1`` to the ``WHERE`` of the gold's outermost ``SELECT`` (the leftmost branch of a
set operation), which changes the fingerprint and never the rows.
"""

from __future__ import annotations

from pglast import ast, parse_sql
from pglast.stream import RawStream


def own_rewrite(gold_sql: str) -> str:
    """``gold_sql`` with ``1 = 1`` joined to its outermost ``WHERE``.

    >>> own_rewrite("SELECT a FROM t")
    'SELECT a FROM t WHERE 1 = 1'
    >>> own_rewrite("SELECT a FROM t WHERE b > 2 ORDER BY a")
    'SELECT a FROM t WHERE b > 2 AND 1 = 1 ORDER BY a'
    """
    (raw,) = parse_sql(gold_sql)
    root = raw.stmt
    assert isinstance(root, ast.SelectStmt)
    select = root
    while select.larg is not None:  # a set operation: its leftmost branch
        select = select.larg
    (probe,) = parse_sql("SELECT 1 WHERE x AND 1 = 1")
    assert isinstance(probe.stmt, ast.SelectStmt)
    both = probe.stmt.whereClause
    assert isinstance(both, ast.BoolExpr)
    noop = both.args[1]
    if select.whereClause is None:
        select.whereClause = noop
    else:
        both.args = (select.whereClause, noop)
        select.whereClause = both
    return str(RawStream()(root))
