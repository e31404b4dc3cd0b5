"""The NULL-order rule of the gold audit: a question whose ordered answer can hold a NULL row says
where that row goes (``heron_data/CONVENTIONS.md``, section 16).

Which sort keys can be NULL is read from gold and the schema's DDL, without a database:
:func:`nullable_columns` reads every column's definition from the shipped ``CREATE TABLE``
statements (a column is nullable unless it is ``NOT NULL`` or ``PRIMARY KEY``), and
:func:`nullable_order_keys` follows each top-level ``ORDER BY`` key to the expression it sorts
and from there to the columns it is built from: a column can be NULL when the DDL allows it or
when its table is on the optional side of an outer join, unless a filter of the same query
rejects NULL for it (``WHERE x = ...``, ``x IS NOT NULL``, an inner join's ``ON a = b``).
:func:`null_order_problem` then checks the English: it must name the NULL row's place (last or
first, after or before the others) in the direction gold sorts it, and, when an earlier key
sorts first, say that this key places the NULL row like any other row. Everything but
:func:`schema_nullability` is pure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache

import sqlglot
from sqlglot import exp
from sqlglot.optimizer.qualify import qualify
from sqlglot.optimizer.scope import Scope, build_scope

# (schema, table) -> column -> whether it can hold NULL
Nullability = Mapping[str, Mapping[str, Mapping[str, bool]]]

_NOT_NULL = re.compile(r"\bNOT\s+NULL\b|\bPRIMARY\s+KEY\b", re.I)
# the English of a NULL row's place (CONVENTIONS.md, section 16), in one clause with "NULL"
_PLACE = re.compile(
    r"\bNULL\b[^.;]*?\b(?:(last|after the others)|(first|before the others))\b", re.I
)
# ... and, when an earlier key sorts first, that the earlier key places it like any other row
_LIKE_ANY_OTHER = re.compile(r"\btakes its place by\b[^.;]*?\blike any other\b", re.I)
# aggregates and window functions that never return NULL
_NEVER_NULL = (exp.Count, exp.RowNumber)
_NEVER_NULL_NAMES = {"rank", "dense_rank", "ntile", "percent_rank", "cume_dist", "row_number"}
# comparisons that are never true for a NULL operand (a conjunct of WHERE or ON rejects NULL)
_REJECTS_NULL = (
    exp.EQ,
    exp.NEQ,
    exp.GT,
    exp.GTE,
    exp.LT,
    exp.LTE,
    exp.In,
    exp.Between,
    exp.Like,
    exp.ILike,
)


@dataclass(frozen=True)
class NullableKey:
    """A top-level ORDER BY key that can be NULL: its place among the keys (0-based), the
    output column it sorts and whether gold puts NULL first."""

    position: int
    column: str
    nulls_first: bool


def nullable_columns(ddl: str) -> dict[str, dict[str, dict[str, bool]]]:
    """``schema -> table -> column -> nullable`` for every ``CREATE TABLE`` of ``ddl``.

    >>> nullable_columns("CREATE TABLE s.t (id bigint PRIMARY KEY, a text NOT NULL, b text);")
    {'s': {'t': {'id': False, 'a': False, 'b': True}}}
    """
    from pytest_heron.dataset import parse_ddl

    out: dict[str, dict[str, dict[str, bool]]] = {}
    for name, table in parse_ddl(ddl).tables.items():
        schema, _, bare = name.partition(".")
        out.setdefault(schema, {})[bare] = {
            c.name: not _NOT_NULL.search(c.definition) for c in table.columns
        }
    return out


@cache
def schema_nullability() -> Nullability:
    """:func:`nullable_columns` of every module's DDL in the shipped bundle (read once)."""
    from pytest_heron.generate import load_bundle

    out: dict[str, dict[str, dict[str, bool]]] = {}
    for module in load_bundle().modules:
        for schema, tables in nullable_columns(module.ddl_tables).items():
            out.setdefault(schema, {}).update(tables)
    return out


def _conjuncts(node: exp.Expression | None) -> list[exp.Expression]:
    if node is None:
        return []
    if isinstance(node, exp.Paren) and isinstance(node.this, exp.Expression):
        return _conjuncts(node.this)
    if isinstance(node, exp.And):
        sides = (node.left, node.right)
        return [c for side in sides if isinstance(side, exp.Expression) for c in _conjuncts(side)]
    return [node]


def _rejected(conjuncts: list[exp.Expression]) -> set[tuple[str, str]]:
    """``(table alias, column)`` of every column a conjunct is never true for when it is NULL:
    the column is an operand of a comparison (not inside a function that may map NULL to a
    value) or is tested ``IS NOT NULL``."""
    out: set[tuple[str, str]] = set()  # membership only
    for c in conjuncts:
        operands: list[exp.Expression] = []
        # ``x IS NOT NULL``: sqlglot writes it as a negated IS (or as NOT over IS)
        negated = isinstance(c, exp.Is) and bool(c.args.get("negate"))
        test = c.this if isinstance(c, exp.Not) and isinstance(c.this, exp.Is) else c
        if (negated or test is not c) and isinstance(test.expression, exp.Null):
            operands = [test.this]
        elif isinstance(c, _REJECTS_NULL):
            operands = [c.this, c.args.get("expression") or c.this]
        for op in operands:
            while isinstance(op, (exp.Cast, exp.Paren, exp.AtTimeZone)):
                op = op.this
            if isinstance(op, exp.Column):
                out.add((op.table, op.name))
    return out


class _Scope:
    """What one SELECT knows about its columns' NULLs."""

    def __init__(self, scope: Scope, schema: Nullability, depth: int) -> None:
        self.scope = scope
        self.schema = schema
        self.depth = depth
        select = scope.expression
        self.optional: set[str] = set()  # aliases on the optional side of an outer join
        seen: list[str] = []
        from_ = select.args.get("from") or select.args.get("from_")
        if isinstance(from_, exp.From):
            seen.append(from_.this.alias_or_name)
        where = select.args.get("where")
        filters = _conjuncts(where.this if isinstance(where, exp.Where) else None)
        conjuncts = list(filters)
        for join in select.args.get("joins") or []:
            alias = join.this.alias_or_name
            side = (join.args.get("side") or "").upper()
            if side in ("LEFT", "FULL"):
                self.optional.add(alias)
            if side in ("RIGHT", "FULL"):
                self.optional.update(seen)
            if not side:
                conjuncts += _conjuncts(join.args.get("on"))
            seen.append(alias)
        self.rejected = _rejected(conjuncts)
        # a WHERE filter that rejects NULL on an optional table's column drops its NULL rows
        self.optional -= {alias for alias, _ in _rejected(filters)}

    def column(self, col: exp.Column) -> bool:
        alias, name = col.table, col.name
        if (alias, name) in self.rejected:
            return False
        if alias in self.optional:
            return True
        source = self.scope.sources.get(alias)
        if isinstance(source, exp.Table):
            columns = self.schema.get(source.db, {}).get(source.name)
            return True if columns is None else columns.get(name, True)
        if isinstance(source, Scope):
            return _Scope(source, self.schema, self.depth + 1).output(name)
        # an output alias of this SELECT (ORDER BY / GROUP BY by name)
        return self.output(name) if not alias else True

    def output(self, name: str, index: int | None = None) -> bool:
        """Whether the output column ``name`` (or the ``index``-th, in a branch of a set
        operation) can be NULL; True when it cannot be found."""
        if self.depth > 20:
            return True
        select = self.scope.expression
        if isinstance(select, exp.SetOperation):  # a UNION: nullable if any branch is
            names = select.named_selects
            if index is None and name not in names:
                return True
            at = names.index(name) if index is None else index
            return any(
                _Scope(s, self.schema, self.depth + 1).output(name, at)
                for s in self.scope.set_operation_scopes
            )
        projections = select.expressions
        if index is not None:
            found = projections[index : index + 1]
        else:
            found = [p for p in projections if p.alias_or_name == name][:1]
        if not found:
            return True
        inner = found[0].this if isinstance(found[0], exp.Alias) else found[0]
        return self.expression(inner)

    def expression(self, node: exp.Expression) -> bool:
        if isinstance(node, exp.Null):
            return True
        if isinstance(node, (exp.Literal, exp.Boolean, exp.Star)):
            return False
        if isinstance(node, exp.Column):
            return self.column(node)
        if isinstance(node, exp.Window):
            fn = node.this
            if isinstance(fn, _NEVER_NULL) or fn.sql_name().lower() in _NEVER_NULL_NAMES:
                return False
            if isinstance(fn, (exp.Lag, exp.Lead)):
                return True
            return self.expression(fn)
        if isinstance(node, _NEVER_NULL):
            return False
        if isinstance(node, exp.Filter):  # agg(x) FILTER (WHERE ...): the filter may leave none
            return not isinstance(node.this, _NEVER_NULL)
        if isinstance(node, (exp.Subquery, exp.Nullif, exp.Lag, exp.Lead)):
            return True
        if isinstance(node, exp.Coalesce):
            return all(self.expression(a) for a in [node.this, *node.expressions])
        if isinstance(node, exp.Case):
            default = node.args.get("default")
            branches = [i.args["true"] for i in node.args.get("ifs") or []]
            return default is None or any(self.expression(b) for b in [*branches, default])
        # any other operator or function: NULL when one of its operands is
        return any(
            self.expression(child)
            for child in node.iter_expressions()
            if not isinstance(child, (exp.Var, exp.DataType, exp.Identifier))
        )


def nullable_order_keys(sql: str, schema: Nullability) -> tuple[NullableKey, ...]:
    """The top-level ORDER BY keys of ``sql`` that can be NULL, in key order (``()`` when gold
    does not parse, is not qualified against ``schema`` or has no ORDER BY)."""
    try:
        tree = qualify(
            sqlglot.parse_one(sql, read="postgres"),
            schema={
                s: {t: dict.fromkeys(c, "TEXT") for t, c in ts.items()} for s, ts in schema.items()
            },
            dialect="postgres",
            validate_qualify_columns=False,
        )
        root = build_scope(tree)
    except sqlglot.errors.SqlglotError:
        return ()
    order = tree.args.get("order")
    if root is None or not isinstance(order, exp.Order):
        return ()
    top = _Scope(root, schema, 0)
    out = []
    for i, key in enumerate(order.expressions):
        target = key.this
        named = target.name if isinstance(target, exp.Column) and not target.table else ""
        nullable = top.output(named) if named else top.expression(target)
        if nullable:
            label = target.name if isinstance(target, exp.Column) else target.sql("postgres")
            out.append(NullableKey(i, label, bool(key.args.get("nulls_first"))))
    return tuple(out)


def null_order_problem(question: str, keys: tuple[NullableKey, ...]) -> str | None:
    """Why ``question`` (its English) does not say where gold's NULL rows go, or None.

    >>> k = (NullableKey(1, "id", nulls_first=False),)
    >>> null_order_problem("Order by count, then id with the NULL row last.", k)[:36]
    'sort key id (key 2) can be NULL: the'
    >>> null_order_problem(
    ...     "By count (the NULL row takes its place by its count like any other), then by id "
    ...     "with the NULL row after the others.", k)
    """
    if not keys:
        return None
    text = " ".join(question.split())
    places = {("first" if m.group(2) else "last") for m in _PLACE.finditer(text)}
    for key in keys:
        where = "first" if key.nulls_first else "last"
        head = f"sort key {key.column} (key {key.position + 1}) can be NULL: "
        if where not in places:
            return head + (
                f"the question must say where the NULL row goes (gold puts it {where};"
                " CONVENTIONS.md section 16)"
            )
        if key.position > 0 and not _LIKE_ANY_OTHER.search(text):
            return head + (
                "the question must say the NULL row 'takes its place by' the earlier sort keys"
                " 'like any other' row (CONVENTIONS.md section 16)"
            )
    return None
