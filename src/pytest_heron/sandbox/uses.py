"""What a statement calls and reads, on PostgreSQL's own parse tree (pure: no I/O).

The volatility check (:mod:`pytest_heron.scoring.volatility`) and the lock-down of what varies
per connection (:mod:`.per_session`) both ask the same question of a query, a view's
definition or an SQL function's body: which functions does it call, which relations does it
read, which clock keywords and string literals does it hold, does it sample a table? The
answer comes from libpg_query's tree (through ``pglast``), so names are the names PostgreSQL
resolves: ``U&"\\0072andom"()`` is ``random()``, ``"now"()`` is ``now()``, an unquoted name is
folded to lower case, a quoted one is kept as written, ``pg_catalog.random()`` keeps its schema;
and nothing inside a comment, a string or a dollar quote is mistaken for a call (an alias
``a$$`` is a name, not the start of a dollar quote, because the scanner says so).

The tree is read as a stream of JSON events (``ijson``), never loaded: a chain of 2,000 UNION
ALLs nests deeper than ``json.loads`` (or any recursive walk) may go.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import ijson
from pglast.parser import ParseError as PgParseError
from pglast.parser import parse_sql_json

# the special date/time input strings whose value is read from the clock when the literal is
# converted (at parse time): 'now' is the transaction's start, the others a midnight near it.
# 'epoch', 'infinity', '-infinity' and 'allballs' are constants and are not listed.
CLOCK_WORDS = ("now", "today", "tomorrow", "yesterday")
# SQLValueFunction operators that read the clock (CURRENT_DATE, LOCALTIMESTAMP, ...)
CLOCK_OPS = {
    "SVFOP_CURRENT_DATE": "current_date",
    "SVFOP_CURRENT_TIME": "current_time",
    "SVFOP_CURRENT_TIME_N": "current_time",
    "SVFOP_CURRENT_TIMESTAMP": "current_timestamp",
    "SVFOP_CURRENT_TIMESTAMP_N": "current_timestamp",
    "SVFOP_LOCALTIME": "localtime",
    "SVFOP_LOCALTIME_N": "localtime",
    "SVFOP_LOCALTIMESTAMP": "localtimestamp",
    "SVFOP_LOCALTIMESTAMP_N": "localtimestamp",
}
_WORD = re.compile(r"[a-z]+")
_DATE_TIME_TEXT = re.compile(r"[a-z0-9\s:.,+\-/]*")

Name = tuple[str, ...]  # a possibly qualified name, as its parts: ("pg_catalog", "random")


@dataclass(frozen=True)
class Uses:
    """What one SQL text calls and reads, each in order of first appearance, without repeats."""

    calls: tuple[Name, ...] = ()  # functions called, as written (qualified or not)
    relations: tuple[Name, ...] = ()  # tables and views read (``FROM``, ``JOIN``)
    clock: tuple[str, ...] = ()  # clock keywords: current_date, localtimestamp, ...
    clock_literals: tuple[str, ...] = ()  # string literals holding 'now', 'today', ...
    samples: tuple[str, ...] = ()  # TABLESAMPLE methods


_CALL_NAME = ("FuncCall", "funcname", "[]", "String", "sval")
_SAMPLE_NAME = ("RangeTableSample", "method", "[]", "String", "sval")
_STRING = ("A_Const", "sval", "sval")
_CLOCK_OP = ("SQLValueFunction", "op")


def _add(seen: list[object], item: object) -> None:
    if item not in seen:
        seen.append(item)


def clock_literal(text: str) -> bool:
    """Whether a string literal may be date/time input read from the clock: one of
    :data:`CLOCK_WORDS` as a word of its own, in text made only of what date/time input is made
    of (letters, digits, spaces, ``:.,+-/``). So 'now', ' Today', 'tomorrow 10:00' and
    'now UTC' are, while 'nowhere' and the text 'now()' are not (PostgreSQL refuses to read
    'now()' as a date). Whether the literal is converted to a date/time type is not asked: an
    untyped literal compared with a timestamp column is converted without a cast.

    >>> clock_literal("now"), clock_literal(" Tomorrow 10:00"), clock_literal("nowhere")
    (True, True, False)
    >>> clock_literal("now()"), clock_literal("what is new today?")
    (False, False)
    """
    lowered = text.lower()
    if _DATE_TIME_TEXT.fullmatch(lowered) is None:
        return False
    return any(w in CLOCK_WORDS for w in _WORD.findall(lowered))


def tree_uses(tree_json: str) -> Uses:
    """What the statements of libpg_query's JSON parse tree ``tree_json`` use (see
    :class:`Uses`). The JSON is read event by event with an explicit stack: any depth."""
    calls: list[object] = []
    relations: list[object] = []
    clock: list[object] = []
    literals: list[object] = []
    samples: list[object] = []
    path: list[str | None] = []  # the keys (``[]`` for an array item) down to the current value
    parts: list[str] = []  # the name being read (a FuncCall's or a TABLESAMPLE method's)
    relation: dict[str, str] = {}
    relation_depth = -1  # len(path) inside the RangeVar being read, or -1
    for event, value in ijson.basic_parse(tree_json.encode("utf-8"), use_float=True):
        if event == "map_key":
            path[-1] = str(value)
        elif event == "start_map":
            if path and path[-1] == "RangeVar":
                relation, relation_depth = {}, len(path) + 1
            path.append(None)
        elif event == "end_map":
            if len(path) == relation_depth:
                name = tuple(relation[k] for k in ("schemaname", "relname") if k in relation)
                _add(relations, name)
                relation_depth = -1
            path.pop()
        elif event == "start_array":
            if tuple(path[-2:]) in (_CALL_NAME[:2], _SAMPLE_NAME[:2]):
                parts = []
            path.append("[]")
        elif event == "end_array":
            path.pop()
            if tuple(path[-2:]) == _CALL_NAME[:2]:
                _add(calls, tuple(parts))
            elif tuple(path[-2:]) == _SAMPLE_NAME[:2]:
                _add(samples, ".".join(parts))
        elif event == "string":
            text = str(value)
            tail = tuple(path[-5:])
            if tail in (_CALL_NAME, _SAMPLE_NAME):
                parts.append(text)
            elif tail[-3:] == _STRING:
                if clock_literal(text):
                    _add(literals, text)
            elif tail[-2:] == _CLOCK_OP:
                if text in CLOCK_OPS:
                    _add(clock, CLOCK_OPS[text])
            elif len(path) == relation_depth and path[-1] in ("schemaname", "relname"):
                relation[str(path[-1])] = text
    return Uses(
        calls=tuple(c for c in calls if isinstance(c, tuple)),
        relations=tuple(r for r in relations if isinstance(r, tuple)),
        clock=tuple(str(c) for c in clock),
        clock_literals=tuple(str(s) for s in literals),
        samples=tuple(str(s) for s in samples),
    )


def sql_uses(sql_text: str) -> Uses | None:
    """What ``sql_text`` (one or more statements) calls and reads, or None when PostgreSQL's
    parser does not accept it (such SQL is refused by the guard before it runs).

    >>> u = sql_uses('SELECT 1 AS a$$, U&"\\\\0072andom"() AS r, 1 AS b$$ FROM s.t')
    >>> u.calls, u.relations
    ((('random',),), (('s', 't'),))
    >>> sql_uses("SELECT 'now'::timestamptz, current_date, pg_catalog.now() -- random()")
    Uses(calls=(('pg_catalog', 'now'),), relations=(), clock=('current_date',), \
clock_literals=('now',), samples=())
    >>> sql_uses("SELECT") is None or sql_uses("SELEC 1") is None
    True
    """
    try:
        tree = parse_sql_json(sql_text)
    except (PgParseError, UnicodeDecodeError):
        return None
    return tree_uses(tree)
