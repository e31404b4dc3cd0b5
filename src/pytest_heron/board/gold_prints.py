"""Whether a prediction holds a public gold query, decided on PostgreSQL's parse tree.

The gold share (:func:`pytest_heron.board.standing.gold_share`) counts the predictions that are
the public gold. Comparing normalised text let any wrapper through: ``WITH g AS (<gold>) SELECT
* FROM g`` or ``SELECT * FROM (<gold>) t`` returns the gold's rows and is not the gold's text.
Here both sides are read by libpg_query (through ``pglast``) and compared by its fingerprint
(:func:`pglast.parser.fingerprint`), which ignores layout, comments, case, alias names and the
values of constants (so a variant's gold, the same template with other values, has its parent's
fingerprint). A prediction holds the gold when any ``SELECT`` in it, the whole statement, a set
operation's branch, a subquery anywhere or a CTE body, has the gold's fingerprint once

- every non-recursive CTE is inlined where it is read (``WITH a AS (X) ... FROM a`` is read as
  ``... FROM (X) a``), on both sides, so moving the gold's own CTEs out of it hides nothing;
- trivial wrappers are peeled: ``SELECT * FROM (X) t`` (or ``SELECT t.* ...``), with no
  ``WHERE``, grouping, ordering, limit or ``DISTINCT`` of its own, is ``X``.

A prediction whose tree is too deep to walk (thousands of nested set operations: no system
writes that) counts as holding the gold, since nothing about it can be told; one that does not
parse holds nothing (it does not run either). Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from pglast import ast
from pglast.parser import ParseError as PgParseError
from pglast.parser import fingerprint, parse_sql
from pglast.stream import RawStream

UNWALKABLE = "unwalkable"  # what :func:`prints` holds for a tree too deep to read


def _children(node: ast.Node) -> Iterator[ast.Node]:
    for name in type(node).__slots__:
        value = getattr(node, name, None)
        if isinstance(value, ast.Node):
            yield value
        elif isinstance(value, (tuple, list)):
            for item in value:
                if isinstance(item, ast.Node):
                    yield item


def _inline(node: ast.Node, scope: Mapping[str, ast.Node]) -> ast.Node:
    """``node`` with every CTE in ``scope`` (and every non-recursive one it defines) replaced
    by its body as a derived table where a plain ``FROM name`` reads it; mutates in place."""
    if isinstance(node, ast.RangeVar):
        if node.schemaname is None and node.relname in scope:
            alias = node.alias if node.alias is not None else ast.Alias(aliasname=node.relname)
            return ast.RangeSubselect(lateral=False, subquery=scope[node.relname], alias=alias)
        return node
    if (
        isinstance(node, ast.SelectStmt)
        and node.withClause is not None
        and not node.withClause.recursive
    ):
        inner = dict(scope)
        for cte in node.withClause.ctes or ():
            if isinstance(cte, ast.CommonTableExpr) and isinstance(cte.ctequery, ast.Node):
                inner[cte.ctename] = _inline(cte.ctequery, inner)
        node.withClause = None
        scope = inner
    for name in type(node).__slots__:
        value = getattr(node, name, None)
        if isinstance(value, ast.Node):
            setattr(node, name, _inline(value, scope))
        elif isinstance(value, tuple) and any(isinstance(v, ast.Node) for v in value):
            inlined = tuple(_inline(v, scope) if isinstance(v, ast.Node) else v for v in value)
            setattr(node, name, inlined)
    return node


def _star_only(select: ast.SelectStmt) -> bool:
    """Whether the target list is ``*`` or ``alias.*`` alone."""
    targets: tuple[object, ...] = tuple(select.targetList or ())
    if len(targets) != 1 or not isinstance(targets[0], ast.ResTarget):
        return False
    val = targets[0].val
    fields: tuple[object, ...] = tuple(val.fields or ()) if isinstance(val, ast.ColumnRef) else ()
    return bool(fields) and isinstance(fields[-1], ast.A_Star)


def peel(node: ast.Node) -> ast.Node:
    """``X`` for ``SELECT * FROM (X) t`` with nothing else, repeatedly; otherwise ``node``."""
    while (
        isinstance(node, ast.SelectStmt)
        and _star_only(node)
        and len(node.fromClause or ()) == 1
        and isinstance(node.fromClause[0], ast.RangeSubselect)
        and not node.fromClause[0].lateral
        and node.whereClause is None
        and not node.groupClause
        and node.havingClause is None
        and not node.sortClause
        and node.limitCount is None
        and node.limitOffset is None
        and not node.distinctClause
        and not node.windowClause
        and node.withClause is None
        and isinstance(node.fromClause[0].subquery, ast.SelectStmt)
    ):
        node = node.fromClause[0].subquery
    return node


def _print(node: ast.Node) -> str:
    return str(fingerprint(RawStream()(peel(node))))


def _selects(node: ast.Node) -> Iterator[ast.Node]:
    if isinstance(node, ast.SelectStmt):
        yield node
    for child in _children(node):
        yield from _selects(child)


def prints(sql: str) -> tuple[str, ...]:
    """The fingerprints (sorted, without repeats) of every ``SELECT`` in ``sql``, CTEs inlined
    and wrappers peeled; ``()`` when it does not parse as one statement, ``(UNWALKABLE,)`` when
    its tree is too deep to walk.

    >>> prints("WITH g AS (SELECT a FROM t) TABLE g") == prints("SELECT a FROM t")
    True
    >>> set(prints("SELECT a FROM t")) < set(prints("SELECT 1 UNION SELECT * FROM t"))
    False
    >>> prints("SELECT (((")
    ()
    """
    try:
        stmts = parse_sql(sql)
        if len(stmts) != 1 or not isinstance(stmts[0].stmt, ast.Node):
            return ()
        root = _inline(stmts[0].stmt, {})
        return tuple(sorted({_print(s) for s in _selects(root)}))
    except PgParseError:
        return ()
    except RecursionError:
        return (UNWALKABLE,)


def gold_print(sql: str) -> str | None:
    """The fingerprint of a gold query as a whole (CTEs inlined, wrappers peeled); None when it
    does not parse as one statement.

    >>> gold_print("select a from t where b = 1") == gold_print("SELECT a FROM t x WHERE b = 2")
    True
    """
    try:
        stmts = parse_sql(sql)
        if len(stmts) != 1 or not isinstance(stmts[0].stmt, ast.Node):
            return None
        return _print(_inline(stmts[0].stmt, {}))
    except (PgParseError, RecursionError):
        return None


def holds_gold(pred_sql: str, gold_sql: str) -> bool:
    """Whether the prediction is, wraps or contains the gold query (see the module's rule).

    >>> gold = "SELECT count(*) FROM orders.customers WHERE tenant_id = 2"
    >>> holds_gold(f"WITH g AS ({gold}) SELECT * FROM g", gold)
    True
    >>> holds_gold(f"SELECT n.* FROM ({gold}) AS n", gold), holds_gold("SELECT 1", gold)
    (True, False)
    """
    target = gold_print(gold_sql)
    found = prints(pred_sql)
    if UNWALKABLE in found:
        return True
    return target is not None and target in found
