"""Question parameters: their declaration, their domains, seeded draws and rendering.

A question file may declare ``parameters:``, a mapping from a name to its spec::

    parameters:
      tenant: {kind: tenant, default: 1, range: [1, 25]}
      status: {kind: status, default: shipped, values: [pending, shipped, delivered]}
      since: {kind: date, default: 2024-01-01, range: [2023-01-01, 2025-06-01], step: month}
      name: {kind: name, default: Reid and Sons, query: "SELECT name FROM core.tenants"}

Its ``question`` and ``gold_sql`` name them as placeholders: ``{tenant}``. In the English a
placeholder renders as plain text (``2024-01-01``, ``Reid and Sons``); in the gold SQL as a SQL
literal (``1``, ``'Reid and Sons'`` with quotes doubled, ``DATE '2024-01-01'``). Two modifiers:
``{year+1}`` adds to an integer (or to a date, in days), ``{year:raw}`` renders the value as
plain text in the SQL too (allowed for integers, dates and text that is a lowercase word
``[a-z][a-z0-9_]*``, such as a unit in a column alias or a function name, so a value can never
leave a string literal it is written into nor add SQL of its own). The public question is the
template rendered with every ``default``; a variant renders other values drawn from the domains.

A ``derived`` parameter is not drawn: it is the first cell of its query over the drawn values
(the drawn tenant's name, the seconds in a drawn unit). Every drawn parameter must appear in the
English and reach the gold SQL (named there, or by a derived parameter gold names); a derived one
must appear in at least one of the two.

Draws are pure functions of (seed, question id, draw index, parameter name) through BLAKE2b:
the same on every machine and every Python (never ``hash()``). A ``query`` domain is the sorted,
de-duplicated first column of a query, keeping the values it returns on every state the variants
are audited on (the caller runs it).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Value = int | str | dt.date
KINDS = (
    "tenant",
    "date",
    "year",
    "month",
    "threshold",
    "count",
    "name",
    "currency",
    "status",
    "category",
    "country",
    "code",
)
NAME_PATTERN = re.compile(r"[a-z_][a-z0-9_]*")
PLACEHOLDER = re.compile(r"\{([a-z_][a-z0-9_]*)([+-][0-9]+)?(?::(raw))?\}")
RAW_WORD = re.compile(r"[a-z][a-z0-9_]*")  # the only text ``:raw`` writes into SQL
MAX_DOMAIN = 10_000


class ParameterError(ValueError):
    """A parameter declaration or template that cannot work (the loader names file and id)."""


@dataclass(frozen=True)
class Parameter:
    name: str
    kind: str
    default: Value
    values: tuple[Value, ...] = ()  # a listed domain, or a range expanded
    query: str | None = None  # a domain read from the states: sorted distinct first column
    derived: str | None = None  # not drawn: the first cell of this query over the others

    def domain(self, queried: Sequence[Value] | None = None) -> tuple[Value, ...]:
        if self.query is not None:
            return tuple(queried or ())
        return self.values


def _value(raw: Any, what: str) -> Value:
    if isinstance(raw, bool) or not isinstance(raw, int | str | dt.date):
        raise ParameterError(f"{what} must be an integer, a string or a date, got {raw!r:.40}")
    if isinstance(raw, dt.datetime):
        raise ParameterError(f"{what} must be a date without a time, got {raw!r:.40}")
    return raw


def _expand(lo: Value, hi: Value, step: str, name: str) -> tuple[Value, ...]:
    if isinstance(lo, int) and isinstance(hi, int) and not isinstance(lo, bool):
        if hi < lo or hi - lo >= MAX_DOMAIN:
            raise ParameterError(f"parameter {name}: range must be [low, high], at most 10,000")
        return tuple(range(lo, hi + 1))
    if isinstance(lo, dt.date) and isinstance(hi, dt.date):
        out: list[Value] = []
        day = lo
        while day <= hi and len(out) < MAX_DOMAIN:
            out.append(day)
            if step == "month":
                day = (day.replace(day=1) + dt.timedelta(days=32)).replace(day=lo.day)
            elif step == "year":
                day = day.replace(year=day.year + 1)
            else:
                day = day + dt.timedelta(days=1)
        if not out:
            raise ParameterError(f"parameter {name}: an empty date range")
        return tuple(out)
    raise ParameterError(f"parameter {name}: range needs two integers or two dates")


def parse_parameters(raw: Any) -> tuple[Parameter, ...]:
    """The declared parameters, sorted by name."""
    if not isinstance(raw, dict) or not raw:
        raise ParameterError("must be a mapping from a parameter name to its spec")
    out = []
    for name in sorted(raw, key=str):
        spec = raw[name]
        if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
            raise ParameterError(f"parameter name {name!r:.40} must match [a-z_][a-z0-9_]*")
        if not isinstance(spec, dict):
            raise ParameterError(f"parameter {name}: spec must be a mapping")
        keys = {"kind", "default", "values", "range", "step", "query", "derived"}
        unknown = sorted(set(spec) - keys)
        if unknown:
            raise ParameterError(f"parameter {name}: unknown key {unknown[0]!r}")
        kind = spec.get("kind")
        if kind not in KINDS:
            raise ParameterError(f"parameter {name}: kind must be one of {', '.join(KINDS)}")
        if "default" not in spec:
            raise ParameterError(f"parameter {name}: default is required")
        default = _value(spec["default"], f"parameter {name}: default")
        given = [k for k in ("values", "range", "query", "derived") if k in spec]
        if len(given) != 1:
            raise ParameterError(
                f"parameter {name}: give exactly one of values, range, query, derived"
            )
        values: tuple[Value, ...] = ()
        query = None
        derived = None
        if "values" in spec:
            listed = spec["values"]
            if not isinstance(listed, list) or not listed:
                raise ParameterError(f"parameter {name}: values must be a non-empty list")
            values = tuple(_value(v, f"parameter {name}: a value") for v in listed)
            if len(set(values)) != len(values):
                raise ParameterError(f"parameter {name}: values repeat")
        elif "range" in spec:
            bounds = spec["range"]
            if not isinstance(bounds, list) or len(bounds) != 2:
                raise ParameterError(f"parameter {name}: range must be [low, high]")
            step = spec.get("step", "day")
            if step not in ("day", "month", "year"):
                raise ParameterError(f"parameter {name}: step must be day, month or year")
            values = _expand(bounds[0], bounds[1], step, name)
        elif "query" in spec:
            query = spec["query"]
            if not isinstance(query, str) or not query.strip():
                raise ParameterError(f"parameter {name}: query must be SQL text")
        else:
            derived = spec["derived"]
            if not isinstance(derived, str) or not derived.strip():
                raise ParameterError(f"parameter {name}: derived must be SQL text")
        if values and type(default) is not type(values[0]):
            raise ParameterError(f"parameter {name}: default and domain differ in type")
        out.append(Parameter(name, kind, default, values, query, derived))
    names = {p.name for p in out}
    for p in out:
        if p.derived is not None and not set(placeholders(p.derived)) <= names - {p.name}:
            raise ParameterError(f"parameter {p.name}: derived names an undeclared parameter")
    return tuple(out)


def sql_literal(value: Value) -> str:
    """``value`` as a PostgreSQL literal: integers bare, dates typed, text quoted."""
    if isinstance(value, bool):
        raise ParameterError("a boolean parameter value")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, dt.date):
        return f"DATE '{value.isoformat()}'"
    if "\x00" in value:
        raise ParameterError("a NUL character in a parameter value")
    return "'" + value.replace("'", "''") + "'"


def text(value: Value) -> str:
    return value.isoformat() if isinstance(value, dt.date) else str(value)


def render(template: str, values: Mapping[str, Value], *, sql: bool) -> str:
    """``template`` with every ``{name}`` replaced; an unknown name or a bad modifier raises."""

    def one(m: re.Match[str]) -> str:
        name, offset, raw = m.group(1), m.group(2), m.group(3)
        if name not in values:
            raise ParameterError(f"placeholder {{{name}}} names no declared parameter")
        value = values[name]
        if offset is not None:
            if isinstance(value, int):
                value = value + int(offset)
            elif isinstance(value, dt.date):
                value = value + dt.timedelta(days=int(offset))
            else:
                raise ParameterError(f"placeholder {m.group(0)}: offsets need an integer or date")
        if not sql:
            return text(value)
        if raw:
            if isinstance(value, str) and not RAW_WORD.fullmatch(value):
                raise ParameterError(
                    f"placeholder {m.group(0)}: :raw is for integers, dates and lowercase words"
                    f" [a-z][a-z0-9_]*, got {value!r:.40}"
                )
            return text(value)
        return sql_literal(value)

    return PLACEHOLDER.sub(one, template)


def placeholders(template: str) -> list[str]:
    return [m.group(1) for m in PLACEHOLDER.finditer(template)]


def defaults(params: Sequence[Parameter]) -> dict[str, Value]:
    return {p.name: p.default for p in params}


def pick(seed: int, qid: str, draw: int, name: str, size: int) -> int:
    """An index in ``range(size)`` drawn from BLAKE2b over the inputs (the same everywhere)."""
    key = f"heron-variant\x1f{seed}\x1f{qid}\x1f{draw}\x1f{name}".encode()
    number = int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "big")
    return number % size


def draw_values(
    params: Sequence[Parameter],
    seed: int,
    qid: str,
    draw: int,
    domains: Mapping[str, Sequence[Value]],
) -> dict[str, Value]:
    """Draw number ``draw`` of a question's parameters at ``seed``."""
    out: dict[str, Value] = {}
    for p in params:
        if p.derived is not None:
            continue
        domain = domains[p.name]
        out[p.name] = domain[pick(seed, qid, draw, p.name, len(domain))]
    return out
