"""Volatile answers: SQL whose rows may change from one run to the next on the same data.

An answer like ``CASE WHEN random() < 0.5 THEN <gold> ELSE 0 END`` is right on some runs and
wrong on others, so one run per state makes the verdict a coin flip that a submitter can retry
until it lands. Two defences, both leading to a wrong answer with the reason "volatile result":

- :func:`volatile_calls` (pure) names what in the SQL text makes it volatile: a call of a
  function the server marks volatile (``pg_proc.provolatile = 'v'``: ``random``,
  ``clock_timestamp``, ``timeofday``, the ``TABLESAMPLE`` methods ...), or a reading of the
  clock (``now()``, ``current_timestamp`` and their kin are stable within a statement, not
  between runs). Comments and string literals are ignored. This catches those answers on every
  run, so the verdict does not depend on luck.
- the scorer runs every answer that matched gold on a state a second time there and compares the
  two results (:func:`pytest_heron.scoring.score._run_on_states`); the timing runs serve as the
  repeats on the first state. This catches volatility the text does not show.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

VOLATILE = "volatile result"
# stable within one statement, different on the next run: the clock
CLOCK_FUNCTIONS = ("now", "statement_timestamp", "transaction_timestamp", "timeofday")
CLOCK_KEYWORDS = (
    "current_timestamp",
    "current_time",
    "current_date",
    "localtime",
    "localtimestamp",
)
# used when the server's own list cannot be read
FALLBACK_VOLATILE = (
    "random",
    "random_normal",
    "setseed",
    "clock_timestamp",
    "timeofday",
    "gen_random_uuid",
    "array_sample",
    "array_shuffle",
    "nextval",
    "currval",
    "lastval",
    "bernoulli",
    "system",
)

_HIDDEN = re.compile(
    r"--[^\n\r]*"  # a line comment (PostgreSQL ends it at \n or \r)
    r"|/\*.*?\*/"  # a block comment (nesting is rare; an unclosed one hides the rest)
    r"|\$(?P<tag>[A-Za-z_][A-Za-z_0-9]*)?\$.*?\$(?P=tag)?\$"  # a dollar-quoted string
    r"|[eE]?'(?:[^']|'')*'",  # a string literal
    re.DOTALL,
)


def _visible(sql: str) -> str:
    """``sql`` with comments and string literals blanked out."""
    return _HIDDEN.sub(" ", sql)


@functools.lru_cache(maxsize=64)
def _pattern(names: tuple[str, ...]) -> re.Pattern[str]:
    calls = "|".join(re.escape(n) for n in sorted(set(names), key=lambda n: (-len(n), n)))
    words = "|".join(CLOCK_KEYWORDS)
    return re.compile(
        rf'(?<![\w$])"?(?P<call>{calls})"?\s*\(|(?<![\w$"])(?P<word>{words})(?![\w$"])',
        re.IGNORECASE,
    )


def volatile_calls(sql: str, names: Iterable[str] = FALLBACK_VOLATILE) -> list[str]:
    """What makes ``sql`` volatile, in order of first appearance (empty: nothing in the text).
    ``names`` are the server's volatile functions (:func:`server_volatile_names`).

    >>> volatile_calls("SELECT CASE WHEN random() < 0.5 THEN 1 END")
    ['random()']
    >>> volatile_calls("SELECT extract(microseconds FROM clock_timestamp())::int % 2")
    ['clock_timestamp()']
    >>> volatile_calls("SELECT now(), current_date -- random()\\n FROM t WHERE x = 'random()'")
    ['now()', 'current_date']
    >>> volatile_calls("SELECT random_id, system_name FROM t TABLESAMPLE SYSTEM (5)")
    ['system()']
    """
    pattern = _pattern((*names, *CLOCK_FUNCTIONS))
    found: list[str] = []
    for m in pattern.finditer(_visible(sql)):
        what = f"{m.group('call').lower()}()" if m.group("call") else m.group("word").lower()
        if what not in found:
            found.append(what)
    return found


def volatile_reason(sql: str, names: Iterable[str] = FALLBACK_VOLATILE) -> str | None:
    """The reason a prediction is wrong for its text alone, or None.

    >>> volatile_reason("SELECT 1") is None, volatile_reason("SELECT random()")
    (True, 'volatile result: the SQL calls random(), so its rows can change between runs')
    """
    calls = volatile_calls(sql, names)
    if not calls:
        return None
    return f"{VOLATILE}: the SQL calls {', '.join(calls)}, so its rows can change between runs"


@functools.lru_cache(maxsize=16)
def server_volatile_names(dsn: str) -> tuple[str, ...]:
    """The names of the functions the server at ``dsn`` marks volatile (its own catalogue, so
    the list follows the server's version), or :data:`FALLBACK_VOLATILE` when it cannot be
    read. Never raises."""
    try:
        import psycopg

        with psycopg.connect(dsn, connect_timeout=10) as conn:
            rows = conn.execute(
                "SELECT DISTINCT lower(proname) FROM pg_catalog.pg_proc "
                "WHERE provolatile = 'v' ORDER BY 1"
            ).fetchall()
        names = tuple(str(r[0]) for r in rows)
        return names or FALLBACK_VOLATILE
    except Exception:
        return FALLBACK_VOLATILE
