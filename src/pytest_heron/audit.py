"""The gold audit: checks that every question's gold SQL is right, stable and discriminating.

Static checks need no database (tables read, volatile functions, ordering); dynamic checks run
gold on every state (executes, returns rows unless an empty probe, same columns and types in
every state, no ties at a LIMIT boundary); mutants of gold made with sqlglot rewrites must give a
different result on at least one state. ``pytest -m audit`` runs all of it (tests/test_audit.py);
``python -m pytest_heron.audit`` runs it on a question folder for authors.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, cast

import psycopg
import sqlglot
import yaml
from sqlglot import exp

from pytest_heron import compare
from pytest_heron.sandbox import pin_session
from pytest_heron.types import Question

VOLATILE = {
    "random",
    "setseed",
    "now",
    "clock_timestamp",
    "statement_timestamp",
    "transaction_timestamp",
    "timeofday",
    "gen_random_uuid",
    "uuid_generate_v4",
}
VOLATILE_NODES = (exp.CurrentDate, exp.CurrentTimestamp, exp.CurrentTime, exp.Rand)
_DATE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})(.*)$")


def _parse(sql: str) -> exp.Expression:
    return cast(exp.Expression, sqlglot.parse_one(sql, read="postgres"))


def tables_read(sql: str) -> set[str]:
    """Schema-qualified tables a query reads (CTE names excluded)."""
    tree = _parse(sql)
    ctes = {c.alias_or_name for c in tree.find_all(exp.CTE)}
    out = set()
    for t in tree.find_all(exp.Table):
        if not t.name or (not t.db and t.name in ctes):
            continue
        out.add(f"{t.db}.{t.name}" if t.db else t.name)
    return out


def static_problems(q: Question) -> dict[str, str]:
    """Problems found without a database, keyed by check name."""
    problems: dict[str, str] = {}
    try:
        tree = _parse(q.gold_sql)
    except sqlglot.errors.ParseError as exc:
        return {"parses": f"gold does not parse: {str(exc).splitlines()[0]}"}
    read = tables_read(q.gold_sql)
    if read != set(q.gold_tables):
        problems["gold_tables"] = (
            f"gold reads {sorted(read)} but gold_tables says {sorted(q.gold_tables)}"
        )
    volatile = sorted(
        {f.name.lower() for f in tree.find_all(exp.Anonymous) if f.name.lower() in VOLATILE}
        | {type(n).__name__ for n in tree.find_all(*VOLATILE_NODES)}
    )
    if volatile:
        problems["deterministic"] = f"gold uses volatile functions: {', '.join(volatile)}"
    top = tree.args.get("limit") or tree.args.get("offset")
    has_order = tree.args.get("order") is not None
    if top is not None and not has_order:
        problems["ordered_limit"] = "LIMIT/OFFSET without a top-level ORDER BY"
    if has_order and compare.order_keys(q.gold_sql) == ():
        problems["order_keys"] = "every top-level ORDER BY key must be an output column"
    return problems


# -- execution ----------------------------------------------------------------------------------


@dataclass
class Run:
    ok: bool
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    types: tuple[int, ...] = ()
    error: str = ""


def run(dsn: str, sql: str, timeout_s: float = 60.0) -> Run:
    """Execute read-only with pinned settings; never raises for SQL errors."""
    try:
        with psycopg.connect(dsn, autocommit=False, connect_timeout=10) as conn:
            pin_session(conn, timeout_s)
            cur = conn.execute(sql)
            rows = cur.fetchall()
            types = tuple(d.type_code for d in cur.description or [])
            conn.rollback()
            return Run(True, rows, types)
    except psycopg.Error as exc:
        return Run(False, error=(exc.diag.message_primary or str(exc)).strip())


def limit_ties(dsn: str, sql: str) -> str | None:
    """If gold has LIMIT, whether the rows just inside and just outside the limit tie on the
    ORDER BY keys (then the result depends on the plan, not the data)."""
    tree = _parse(sql)
    limit = tree.args.get("limit")
    if limit is None or tree.args.get("order") is None:
        return None
    keys = compare.order_keys(sql)
    try:
        n = int(limit.expression.name)
    except (AttributeError, ValueError):
        return None
    unlimited = tree.copy()
    unlimited.set("limit", None)
    unlimited.set("offset", None)
    got = run(dsn, unlimited.sql(dialect="postgres"))
    if not got.ok or len(got.rows) <= n or not keys:
        return None
    inside, outside = got.rows[n - 1], got.rows[n]
    if all(compare.compare([(inside[k],)], [(outside[k],)]).equal for k in keys):
        return f"rows {n} and {n + 1} tie on the ORDER BY keys: the LIMIT cuts a tie"
    return None


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
    base = _parse(sql)
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


_FK_CACHE: dict[str, dict[tuple[str, str], tuple[str, str, bool]]] = {}


def foreign_keys(dsn: str) -> dict[tuple[str, str], tuple[str, str, bool]]:
    """``(child table, column) -> (parent table, column, child column NOT NULL)`` for every
    single-column foreign key of the database (cached per DSN)."""
    if dsn not in _FK_CACHE:
        with psycopg.connect(dsn) as conn:
            rows = conn.execute(
                """SELECT cn.nspname || '.' || cl.relname, ca.attname,
                          pn.nspname || '.' || pl.relname, pa.attname, ca.attnotnull
                   FROM pg_constraint c
                   JOIN pg_class cl ON cl.oid = c.conrelid
                   JOIN pg_namespace cn ON cn.oid = cl.relnamespace
                   JOIN pg_class pl ON pl.oid = c.confrelid
                   JOIN pg_namespace pn ON pn.oid = pl.relnamespace
                   JOIN pg_attribute ca ON ca.attrelid = c.conrelid AND ca.attnum = c.conkey[1]
                   JOIN pg_attribute pa ON pa.attrelid = c.confrelid AND pa.attnum = c.confkey[1]
                   WHERE c.contype = 'f' AND cardinality(c.conkey) = 1"""
            ).fetchall()
        _FK_CACHE[dsn] = {(r[0], r[1]): (r[2], r[3], bool(r[4])) for r in rows}
    return _FK_CACHE[dsn]


def join_equivalence(sql: str, index: int, fks: dict[tuple[str, str], Any]) -> str | None:
    """Why switching join number ``index`` (0-based) between INNER and LEFT cannot change the
    result, or None. It cannot when the join follows a NOT NULL foreign key from a table already
    in the query (not itself NULL-extended by a LEFT JOIN) to the joined table's key: every row
    then has exactly one partner."""
    tree = _parse(sql)
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
            if fk and fk[0] == aliases[target] and fk[1] == mine.name and fk[2]:
                return (
                    f"{child}.{other.name} is NOT NULL and references {fk[0]}.{fk[1]}: "
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


def mutant_results(q: Question, dsns: Sequence[str]) -> list[MutantResult]:
    gold = [run(d, q.gold_sql) for d in dsns]
    keys = compare.order_keys(q.gold_sql)
    known = dict(equivalents().get(q.id, {}))
    fks = foreign_keys(dsns[0])
    for desc, _ in mutants(q.gold_sql):
        m = re.match(r"^(?:INNER JOIN -> LEFT JOIN|LEFT JOIN -> INNER JOIN) #(\d+) ", desc)
        if m and desc not in known:
            reason = join_equivalence(q.gold_sql, int(m.group(1)) - 1, fks)
            if reason:
                known[desc] = reason
    results = []
    for desc, sql in mutants(q.gold_sql):
        differs = []
        for d, g in zip(dsns, gold, strict=True):
            got = run(d, sql)
            differs.append(not got.ok or not compare.compare(g.rows, got.rows, order=keys).equal)
        results.append(MutantResult(desc, differs[0], any(differs), known.get(desc)))
    return results


def duplicate_problems(questions: Sequence[Question]) -> dict[str, str]:
    """Questions whose normalised text or normalised gold repeats another's."""
    seen_text: dict[str, str] = {}
    seen_sql: dict[str, str] = {}
    problems = {}
    for q in questions:
        text = " ".join(re.sub(r"[^a-z0-9 ]", " ", q.question.lower()).split())
        try:
            gold = _parse(q.gold_sql).sql(dialect="postgres", normalize=True)
        except sqlglot.errors.ParseError:
            gold = q.gold_sql
        if text in seen_text:
            problems[q.id] = f"same question as {seen_text[text]}"
        elif gold in seen_sql:
            problems[q.id] = f"same gold SQL as {seen_sql[gold]}"
        seen_text.setdefault(text, q.id)
        seen_sql.setdefault(gold, q.id)
    return problems


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


def kill_rate(results: dict[str, list[MutantResult]], questions: Sequence[Question]) -> KillRate:
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


def main(argv: Sequence[str] | None = None) -> int:
    from pytest_heron.backends import embedded
    from pytest_heron.questions import load_questions
    from pytest_heron.states import ensure_state

    parser = argparse.ArgumentParser(prog="python -m pytest_heron.audit")
    parser.add_argument("--questions", type=Path, help="question folder (default: built-in)")
    parser.add_argument("--ids", help="comma-separated question ids (default: all)")
    parser.add_argument(
        "--scales",
        default="small,tiny",
        help="first scale's first seed is the single state of the single-state kill rate",
    )
    parser.add_argument("--seeds", default="42,43,44")
    parser.add_argument("--no-mutants", action="store_true")
    args = parser.parse_args(argv)
    every = load_questions(args.questions)
    questions = every
    if args.ids:
        wanted = set(args.ids.split(","))
        questions = [q for q in questions if q.id in wanted]
    server = embedded()
    failures = 0
    results: dict[str, list[MutantResult]] = {}
    try:
        dups = duplicate_problems(every)
        by_scale = {
            scale: [ensure_state(server, scale, int(s)).admin_dsn for s in args.seeds.split(",")]
            for scale in args.scales.split(",")
        }
        everywhere = [d for dsns in by_scale.values() for d in dsns]
        for q in questions:
            problems = dict(static_problems(q))
            if q.id in dups:
                problems["duplicate"] = dups[q.id]
            for scale, dsns in by_scale.items():
                problems.update({f"{k}@{scale}": v for k, v in state_problems(q, dsns).items()})
            line = f"{q.id}: " + (
                "ok" if not problems else "; ".join(f"{k}: {v}" for k, v in problems.items())
            )
            if not args.no_mutants and not problems:
                res = results[q.id] = mutant_results(q, everywhere)
                alive = [r for r in res if not r.killed_any and not r.equivalent]
                equal = sum(1 for r in res if not r.killed_any and r.equivalent)
                line += (
                    f"; mutants: {len(res) - len(alive) - equal} killed, {equal} equivalent,"
                    f" {len(alive)} survived"
                )
                line += "".join(f"\n    survivor: {r.description}" for r in alive)
            failures += bool(problems)
            print(line, flush=True)
    finally:
        server.stop()
    if results:
        rate = kill_rate(results, questions)
        print(
            f"kill rate: single-state {rate.single():.1f}% multi-state {rate.multi():.1f}% "
            f"({rate.counted} mutants, {rate.equivalent} equivalent not counted)"
        )
    return 1 if failures else 0


def state_problems(q: Question, dsns: Sequence[str]) -> dict[str, str]:
    """Problems found by running gold on every state."""
    problems: dict[str, str] = {}
    runs = [run(d, q.gold_sql) for d in dsns]
    for i, r in enumerate(runs):
        if not r.ok:
            problems["executes"] = f"state {i + 1}: {r.error}"
            return problems
    if q.empty_probe:
        if any(r.rows for r in runs):
            problems["empty"] = "an empty probe returned rows"
    elif not all(r.rows for r in runs):
        problems["rows"] = "gold returned no rows on " + ", ".join(
            f"state {i + 1}" for i, r in enumerate(runs) if not r.rows
        )
    if len({r.types for r in runs}) > 1:
        problems["stable"] = "column types differ between states"
    for d in dsns:
        tie: str | None = limit_ties(d, q.gold_sql)
        if tie:
            problems["limit_ties"] = tie
            break
    return problems


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
