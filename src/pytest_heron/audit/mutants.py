"""Mutation testing of gold: sqlglot rewrites of gold that must change the result on some state
(a question whose mutants survive does not discriminate)."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

import yaml
from sqlglot import exp

from pytest_heron.audit.gold import run_gold, run_gold_ordered
from pytest_heron.database import ForeignKey, by_column, foreign_keys
from pytest_heron.dataset import GoldQuestion
from pytest_heron.sandbox import parse_sql

_DATE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})(.*)$")


# -- mutants ------------------------------------------------------------------------------------


def _conjuncts(node: Any) -> list[exp.Expression]:
    if isinstance(node, exp.And):
        return _conjuncts(node.left) + _conjuncts(node.right)
    if isinstance(node, exp.Paren) and isinstance(node.this, exp.And):
        return _conjuncts(node.this)
    return [node]


def _shift_date(text: str) -> str | None:
    m = _DATE.match(text)
    if not m:
        return None
    import datetime as dt

    try:
        day = dt.date(int(m[1]), int(m[2]), int(m[3])) + dt.timedelta(days=1)
    except ValueError:
        return None
    return day.isoformat() + m[4]


def mutants(sql: str) -> list[tuple[str, str]]:
    """``(description, mutant SQL)`` for every rewrite of gold: drop one WHERE/HAVING conjunct
    (which covers the tenant and soft-delete filters), INNER<->LEFT join, drop DISTINCT, swap an
    aggregate, shift a date boundary by a day. Duplicates and no-op rewrites are skipped."""
    base = parse_sql(sql)
    base_sql = base.sql(dialect="postgres")
    out: dict[str, str] = {}

    def emit(desc: str, tree: exp.Expression) -> None:
        text = tree.sql(dialect="postgres")
        if text != base_sql and text not in out.values():
            out[desc] = text

    def each(kind: type[exp.Expression]) -> Iterator[tuple[int, exp.Expression, exp.Expression]]:
        for i, _ in enumerate(list(base.find_all(kind))):
            tree = base.copy()
            node = list(tree.find_all(kind))[i]
            yield i, tree, node

    for clause in (exp.Where, exp.Having):
        for _, tree, node in each(clause):
            parts = _conjuncts(node.this)
            for j, part in enumerate(parts):
                t2 = tree.copy()
                n2 = list(t2.find_all(clause))[list(tree.find_all(clause)).index(node)]
                rest = [p.copy() for k, p in enumerate(_conjuncts(n2.this)) if k != j]
                if rest:
                    n2.set("this", exp.and_(*rest))
                else:
                    n2.pop()
                emit(f"drop {clause.key.upper()} conjunct: {part.sql(dialect='postgres')}", t2)
    for i, tree, join in each(exp.Join):
        side = join.args.get("side")
        if join.args.get("kind") in ("CROSS",) or side in ("RIGHT", "FULL"):
            continue
        if side == "LEFT":
            join.set("side", None)
            desc = "LEFT JOIN -> INNER JOIN"
        else:
            join.set("side", "LEFT")
            desc = "INNER JOIN -> LEFT JOIN"
        emit(f"{desc} #{i + 1} ({join.this.sql(dialect='postgres')})", tree)
    for i, tree, node in each(exp.Distinct):
        node.pop()
        emit(f"drop DISTINCT #{i + 1}", tree)
    swaps: dict[type[exp.Expression], type[exp.Expression]] = {
        exp.Sum: exp.Avg,
        exp.Avg: exp.Sum,
        exp.Min: exp.Max,
        exp.Max: exp.Min,
    }
    for kind, other in swaps.items():
        for i, tree, node in each(kind):
            node.replace(other(this=node.this.copy()))
            emit(f"{kind.__name__.upper()} -> {other.__name__.upper()} #{i + 1}", tree)
    for i, tree, node in each(exp.Count):
        arg = node.this
        if isinstance(arg, (exp.Star, exp.Distinct)):
            continue
        node.set("this", exp.Distinct(expressions=[arg.copy()]))
        emit(f"COUNT -> COUNT(DISTINCT) #{i + 1}", tree)
    for _, tree, node in each(exp.Literal):
        if not node.is_string:
            continue
        shifted = _shift_date(node.this)
        if shifted is None:
            continue
        node.replace(exp.Literal.string(shifted))
        emit(f"date {node.this} -> {shifted}", tree)
    return list(out.items())


@dataclass(frozen=True)
class MutantResult:
    description: str
    killed_first: bool  # differs on the first state
    killed_any: bool  # differs on at least one state
    equivalent: str | None = None  # recorded reason when it is genuinely equivalent


def equivalents() -> dict[str, dict[str, str]]:
    """Recorded equivalent mutants: ``{question id: {mutant description: reason}}``."""
    text = resources.files("heron_data").joinpath("audit_equivalents.yaml").read_text()
    doc = yaml.safe_load(text) or {}
    return {str(k): {str(d): str(r) for d, r in (v or {}).items()} for k, v in doc.items()}


def join_equivalence(sql: str, index: int, fks: Mapping[tuple[str, str], ForeignKey]) -> str | None:
    """Why switching join number ``index`` (0-based) between INNER and LEFT cannot change the
    result, or None. It cannot when the join follows a NOT NULL foreign key from a table already
    in the query (not itself NULL-extended by a LEFT JOIN) to the joined table's key: every row
    then has exactly one partner. ``fks``: :func:`~pytest_heron.database.introspect.by_column`
    of the database's keys."""
    tree = parse_sql(sql)
    joins = list(tree.find_all(exp.Join))
    if index >= len(joins):
        return None
    join = joins[index]
    aliases = {t.alias_or_name: f"{t.db}.{t.name}" for t in tree.find_all(exp.Table) if t.db}
    joined = join.this
    if not isinstance(joined, exp.Table) or not joined.db:
        return None
    target = joined.alias_or_name
    nullable_sides = {
        j.this.alias_or_name for j in joins if j.args.get("side") == "LEFT" and j is not join
    }
    on = join.args.get("on")
    for cond in _conjuncts(on) if on is not None else []:
        if not isinstance(cond, exp.EQ):
            continue
        left, right = cond.left, cond.right
        if not (isinstance(left, exp.Column) and isinstance(right, exp.Column)):
            continue
        for mine, other in ((left, right), (right, left)):
            if mine.table != target or other.table in (target, "") or other.table in nullable_sides:
                continue
            child = aliases.get(other.table)
            fk = fks.get((child, other.name)) if child else None
            parent_key = (aliases[target], mine.name)
            if fk and (fk.ref_table, fk.ref_column) == parent_key and fk.not_null:
                return (
                    f"{child}.{other.name} is NOT NULL and references {fk.ref_table}."
                    f"{fk.ref_column}: "
                    "every row has exactly one partner"
                )
            # The joined table holds children generated per row of the other table, at least
            # one each (a property of every state, not of one seed).
            parent = aliases.get(other.table)
            rows = _spec_rows(aliases[target])
            if (
                parent
                and other.name == "id"
                and rows is not None
                and rows.get("per") == parent
                and int(rows.get("min", 1)) >= 1
                and _spec_kind(aliases[target], mine.name) == "parent"
            ):
                return (
                    f"every {parent} row has at least {rows.get('min', 1)} {aliases[target]} "
                    f"rows by construction (generation spec: per {parent})"
                )
    return None


def _spec_rows(fq: str) -> dict[str, Any] | None:
    from pytest_heron.generate import load_bundle

    spec = load_bundle().tables.get(fq)
    return spec.rows if spec is not None else None


def _spec_kind(fq: str, column: str) -> str | None:
    from pytest_heron.generate import load_bundle

    spec = load_bundle().tables.get(fq)
    if spec is None or spec.data is not None:
        return None
    return next((c.kind for c in spec.columns if c.name == column), None)


def mutant_results(
    q: GoldQuestion, dsns: Sequence[str], fks: Sequence[ForeignKey] | None = None
) -> list[MutantResult]:
    """Every mutant of ``q``'s gold run on every state of ``dsns``. ``fks``: the foreign keys of
    the states (:func:`~pytest_heron.database.introspect.foreign_keys`); read from the first
    state when not given (a caller auditing many questions reads them once and passes them)."""
    gold = [run_gold_ordered(d, q.gold_sql) for d in dsns]
    known = dict(equivalents().get(q.id, {}))
    columns = by_column(foreign_keys(dsns[0]) if fks is None else fks)
    for desc, _ in mutants(q.gold_sql):
        m = re.match(r"^(?:INNER JOIN -> LEFT JOIN|LEFT JOIN -> INNER JOIN) #(\d+) ", desc)
        if m and desc not in known:
            reason = join_equivalence(q.gold_sql, int(m.group(1)) - 1, columns)
            if reason:
                known[desc] = reason
    results = []
    for desc, sql in mutants(q.gold_sql):
        differs = []
        for d, g in zip(dsns, gold, strict=True):
            got = run_gold(d, sql)
            differs.append(not got.ok or not g.compare(got.rows).equal)
        results.append(MutantResult(desc, differs[0], any(differs), known.get(desc)))
    return results


# -- summaries ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class KillRate:
    mutants: int
    equivalent: int
    killed_single: int
    killed_multi: int

    @property
    def counted(self) -> int:
        return self.mutants - self.equivalent

    def single(self) -> float:
        return 100.0 * self.killed_single / self.counted if self.counted else 100.0

    def multi(self) -> float:
        return 100.0 * self.killed_multi / self.counted if self.counted else 100.0


def kill_rate(
    results: dict[str, list[MutantResult]], questions: Sequence[GoldQuestion]
) -> KillRate:
    """Kill rates over every non-equivalent mutant of every question that is not an empty probe
    (an empty probe's mutants mostly stay empty by design)."""
    probes = {q.id for q in questions if q.empty_probe}
    rows = [r for qid, res in results.items() if qid not in probes for r in res]
    equivalent = [r for r in rows if r.equivalent and not r.killed_any]
    counted = [r for r in rows if r not in equivalent]
    return KillRate(
        mutants=len(rows),
        equivalent=len(equivalent),
        killed_single=sum(r.killed_first for r in counted),
        killed_multi=sum(r.killed_any for r in counted),
    )


# -- command line for question authors ----------------------------------------------------------
