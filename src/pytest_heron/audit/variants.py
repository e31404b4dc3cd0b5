"""Question variants: never-published instances of parameterised questions, drawn from a seed.

For each parameterised question, variant ``k`` (``0 <= k < count``) at seed ``S`` has an id
that does not name its parent (:func:`variant_id`: ``v`` and ten hex digits of BLAKE2b over
the seed, the parent and ``k``), and variants are listed in id order, so neither the id nor the
place in the run says which question a variant comes from. Draws ``0, 1, 2, ...`` of the
parameters (:mod:`.params`) are tried in turn; a draw becomes the next variant only when it
passes every check below, so a variant is never published broken and the same seed, count,
question set and states give the same variants on every machine:

- the static audit (gold parses, reads exactly ``gold_tables``, no volatile function, ordered
  LIMIT, order keys in the output);
- the state audit on every state (gold executes, returns rows unless an empty probe, the same
  columns everywhere, no tie at a LIMIT boundary);
- its gold result differs from the parent's (public) gold result on every state, so the public
  SQL pasted as an answer is wrong on every state;
- its English, its gold SQL and its result (on all states together) differ from every earlier
  variant's (and the English and SQL from the parent's).

A variant of an empty probe is an empty probe too (unless the file says
``variants_empty_probe: false``): it must return no rows on every state, like its parent, so it
cannot differ from the parent or from another variant in result; for it those two result checks
are left out and the English and SQL checks stand (the public SQL pasted for it stays right,
which the built-in set accepts for q010 alone: docs/variants.md).

A question with no draw left after :data:`MAX_DRAWS_PER_VARIANT` tries per variant has fewer
variants (reported, never filled with a broken one).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import hashlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_heron import compare
from pytest_heron.core.errors import ConfigError
from pytest_heron.dataset import GoldQuestion, Value, defaults, draw_values, render, text

MAX_DRAWS_PER_VARIANT = 25
SPEC = re.compile(r"([0-9]+)(?::([0-9]+))?")
MAX_COUNT = 100


@dataclass(frozen=True)
class Variant:
    question: GoldQuestion  # id, parent, rendered English and gold
    seed: int
    index: int
    draw: int
    values: tuple[tuple[str, Value], ...]

    def to_json(self) -> dict[str, Any]:
        q = self.question
        return {
            "id": q.id,
            "parent": q.parent,
            "seed": self.seed,
            "index": self.index,
            "draw": self.draw,
            "parameters": {k: text(v) for k, v in self.values},
            "question": q.question,
            "gold_sql": q.gold_sql,
            "gold_tables": list(q.gold_tables),
            "shape": q.shape,
            "retrieval": q.retrieval,
            "traps": list(q.traps),
            "empty_probe": q.empty_probe,
        }


def parse_spec(raw: str) -> tuple[int, int]:
    """``SEED[:N]`` of ``--heron-variants`` (N defaults to 1)."""
    m = SPEC.fullmatch(str(raw).strip())
    if m is None:
        raise ConfigError(f"--heron-variants: expected SEED or SEED:N (integers), got {raw!r:.60}")
    seed, count = int(m.group(1)), int(m.group(2) or 1)
    if not 1 <= count <= MAX_COUNT:
        raise ConfigError(f"--heron-variants: N must be 1 to {MAX_COUNT}, got {count}")
    return seed, count


def variant_id(parent: str, seed: int, index: int) -> str:
    """Variant ``index`` of ``parent`` at ``seed``: ``v`` and 10 hex digits of BLAKE2b over the
    three, so the id does not name the parent (the same on every machine, for resumed journals
    and predictions files keyed by it). Whoever knows the seed can still recompute it, and the
    English is the parent's template: docs/variants.md says what variants cannot show.

    >>> variant_id("q017", 7, 2) == variant_id("q017", 7, 2) != variant_id("q017", 7, 1)
    True
    >>> vid = variant_id("q017", 7, 2)
    >>> len(vid), vid.startswith("v"), "q017" in vid
    (11, True, False)
    """
    key = f"heron-variant-id\x1f{seed}\x1f{parent}\x1f{index}".encode()
    return "v" + hashlib.blake2b(key, digest_size=5).hexdigest()


def variant_ids(questions: Sequence[GoldQuestion], seed: int, count: int) -> list[str]:
    """The ids a run on variants asks (known before any state exists), sorted."""
    ids = sorted(variant_id(q.id, seed, k) for q in questions if q.parameters for k in range(count))
    if len(set(ids)) != len(ids):  # 40 bits: never seen, but a clash must not merge two
        raise ConfigError(f"--heron-variants={seed}:{count}: two variant ids collide")
    return ids


def instantiate(q: GoldQuestion, values: Mapping[str, Value], vid: str) -> GoldQuestion:
    return dataclasses.replace(
        q,
        id=vid,
        question=render(q.template_question, values, sql=False),
        gold_sql=render(q.template_sql, values, sql=True),
        parent=q.id,
        empty_probe=q.variants_empty_probe,
    )


def _sort_key(v: Value) -> tuple[str, str]:
    return (type(v).__name__, f"{v:020d}" if isinstance(v, int) else text(v))


def queried_domain(rows: Sequence[Sequence[object]]) -> tuple[Value, ...]:
    """A query domain: the sorted distinct non-NULL first column, as ints, dates or text."""
    found: dict[Value, None] = {}
    for row in rows:
        cell = row[0] if row else None
        if cell is None:
            continue
        value: Value
        if isinstance(cell, bool):
            value = str(cell).lower()
        elif isinstance(cell, int):
            value = cell
        elif isinstance(cell, dt.datetime):
            value = cell.isoformat()
        elif isinstance(cell, dt.date):
            value = cell
        elif isinstance(cell, decimal.Decimal) and cell == cell.to_integral_value():
            value = int(cell)
        else:
            value = str(cell)
        found[value] = None
    return tuple(sorted(found, key=_sort_key))


def _text_key(s: str) -> str:
    return " ".join(re.sub(r"[^a-z0-9 ]", " ", s.lower()).split())


def _sql_key(s: str) -> str:
    return " ".join(s.split())


def _same(a: Sequence[Any], b: Sequence[Any]) -> bool:
    return all(compare.compare(x.rows, y.rows).equal for x, y in zip(a, b, strict=True))


def draw_question(
    q: GoldQuestion, seed: int, count: int, dsns: Sequence[str]
) -> tuple[list[Variant], str | None]:
    """The variants of one question, and why fewer than ``count`` (None when all were drawn)."""
    from pytest_heron.audit.gold import run_gold, state_problems
    from pytest_heron.audit.static import static_problems

    if not q.parameters:
        return [], "the question has no parameters"
    domains: dict[str, tuple[Value, ...]] = {}
    for p in q.parameters:
        if p.derived is not None:
            continue
        if p.query is not None:
            # the values the query returns on every state: a drawn value exists on each
            found: tuple[Value, ...] | None = None
            for d in dsns:
                got = run_gold(d, p.query)
                if not got.ok:
                    return [], f"the domain query of {p.name} fails: {got.error}"
                here = dict.fromkeys(queried_domain(got.rows))  # membership only
                found = tuple(here) if found is None else tuple(v for v in found if v in here)
            domains[p.name] = found or ()
        else:
            domains[p.name] = p.values
        if not domains[p.name]:
            return [], f"the domain of {p.name} is empty"
    parent_runs = [run_gold(d, q.gold_sql) for d in dsns]
    default = defaults(q.parameters)
    texts = {_text_key(q.question)}
    sqls = {_sql_key(q.gold_sql)}
    drawn_names = [p.name for p in q.parameters if p.derived is None]
    tried: list[tuple[Value, ...]] = [tuple(default[n] for n in drawn_names)]
    results: list[Sequence[Any]] = []
    out: list[Variant] = []
    draw = 0
    last = ""
    while len(out) < count and draw < MAX_DRAWS_PER_VARIANT * count:
        values = draw_values(q.parameters, seed, q.id, draw, domains)
        draw += 1
        key = tuple(values[n] for n in drawn_names)
        if key in tried:
            continue
        tried.append(key)
        derived_ok = True
        for p in q.parameters:
            if p.derived is not None:
                got = run_gold(dsns[0], render(p.derived, values, sql=True), max_rows=1)
                if not got.ok or not got.rows or got.rows[0][0] is None:
                    derived_ok = False
                    break
                values[p.name] = queried_domain(got.rows)[0]
        if not derived_ok:
            last = "a derived parameter has no value"
            continue
        vq = instantiate(q, values, variant_id(q.id, seed, len(out)))
        if _text_key(vq.question) in texts:
            last = "same English as an earlier one"
            continue
        if _sql_key(vq.gold_sql) in sqls:
            last = "same gold SQL as an earlier one"
            continue
        problems = static_problems(vq)
        if problems:
            last = "; ".join(f"{k}: {v}" for k, v in problems.items())
            continue
        runs = [run_gold(d, vq.gold_sql) for d in dsns]
        problems = state_problems(vq, dsns, runs)
        if problems:
            last = "; ".join(f"{k}: {v}" for k, v in problems.items())
            continue
        # an empty probe's variants are all empty (the state audit held that): they differ in
        # English and SQL only
        if not vq.empty_probe and any(
            compare.compare(r.rows, p.rows).equal for r, p in zip(runs, parent_runs, strict=True)
        ):
            last = "the same result as the public question on a state"
            continue
        if not vq.empty_probe and any(_same(runs, earlier) for earlier in results):
            last = "the same result as an earlier variant"
            continue
        texts.add(_text_key(vq.question))
        sqls.add(_sql_key(vq.gold_sql))
        results.append(runs)
        values_sorted = tuple((p.name, values[p.name]) for p in q.parameters)
        out.append(Variant(vq, seed, len(out), draw - 1, values_sorted))
    if len(out) < count:
        return out, f"{len(out)} of {count} variants after {draw} draws (last refusal: {last})"
    return out, None


def draw_variants(
    questions: Sequence[GoldQuestion],
    seed: int,
    count: int,
    dsns: Sequence[str],
    progress: Callable[[str], None] | None = None,
) -> tuple[list[Variant], dict[str, str]]:
    """Every parameterised question's variants at ``seed`` (in id order: not the questions'),
    and the questions that got fewer than ``count``, with the reason."""
    out: list[Variant] = []
    short: dict[str, str] = {}
    for q in questions:
        if not q.parameters:
            continue
        got, why = draw_question(q, seed, count, dsns)
        out.extend(got)
        if why is not None:
            short[q.id] = why
            if progress is not None:
                progress(f"{q.id}: {why}")
    return sorted(out, key=lambda v: v.question.id), short


def json_lines(variants: Sequence[Variant]) -> str:
    """One JSON object a line, in id order: the same bytes on every machine."""
    return "".join(json.dumps(v.to_json(), ensure_ascii=True) + "\n" for v in variants)


def from_payload(
    questions: Mapping[str, GoldQuestion], payload: Sequence[Mapping[str, Any]]
) -> list[GoldQuestion]:
    """Variants rebuilt from ``(id, parent, values)`` records (an xdist worker's copy)."""
    out = []
    for rec in payload:
        parent = questions[str(rec["parent"])]
        kinds = {p.name: p for p in parent.parameters}
        values: dict[str, Value] = {}
        for name, raw in rec["values"].items():
            default = kinds[name].default
            values[name] = (
                int(raw)
                if isinstance(default, int)
                else dt.date.fromisoformat(raw)
                if isinstance(default, dt.date)
                else str(raw)
            )
        out.append(instantiate(parent, values, str(rec["id"])))
    return out
