"""What a submission can be on the board, decided by what ran, never by what it calls itself.

A row's standing comes from ``conditions.adapter``, the adapter the harness recorded, not from
the ``tool`` the submitter wrote in ``submission.yaml``:

- ``gold`` is the harness answering with the question set's own SQL: the reference row, never
  ranked, and only under the tool name ``gold``;
- ``file`` (a file of predictions) and a run that names no adapter ran no system the board
  could name: refused for ranking, with the reason published;
- any other adapter is a system: ranked when its figures reproduce.

The public gold SQL ships with the package, so the verifier also measures how many predictions
*are*, wrap or contain that SQL (:func:`gold_share`, compared on the parse tree by
:mod:`.gold_prints`). Pure functions, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

REFERENCE_ADAPTER = "gold"
REFERENCE_TOOL = "gold"
NO_SYSTEM_ADAPTERS = ("file",)  # the harness scores SQL it was handed; nothing ran

EX_FAMILY_KEYS = ("ex1", "ex_multistate", "ex_superset")  # and EX@k, per k

REFERENCE = "reference"
RANKED = "ranked"
REFUSED = "refused"

_COMMENT = re.compile(r"--[^\n\r]*|/\*.*?\*/", re.DOTALL)


@dataclass(frozen=True)
class Standing:
    """``kind`` is :data:`REFERENCE`, :data:`RANKED` or :data:`REFUSED`; ``reason`` says why a
    submission cannot be ranked (None for a ranked one, and for the reference under ``gold``)."""

    kind: str
    reason: str | None = None


def standing(adapter: str | None, tool: str | None) -> Standing:
    """The standing of a run of ``adapter`` submitted as ``tool``.

    >>> standing("gold", "gold")
    Standing(kind='reference', reason=None)
    >>> standing("gold", "my-tool").kind, standing("file", "x").kind, standing("raw-llm", "x")
    ('reference', 'refused', Standing(kind='ranked', reason=None))
    """
    name = (adapter or "").strip()
    if name == REFERENCE_ADAPTER:
        if tool == REFERENCE_TOOL:
            return Standing(REFERENCE)
        return Standing(
            REFERENCE,
            f"conditions.adapter is {REFERENCE_ADAPTER!r}: the harness answered with the question "
            f"set's own gold SQL, so this is the reference row, not a system called {tool!r}; "
            f"submit it under tool {REFERENCE_TOOL!r} (never ranked) or run your system",
        )
    if not name or name in NO_SYSTEM_ADAPTERS:
        return Standing(
            REFUSED,
            f"conditions.adapter is {name or 'empty'!r}: the run scored SQL it was handed, no "
            "system ran, so the board cannot rank it (run the system through its adapter)",
        )
    return Standing(RANKED)


def normalise_sql(sql: str | None) -> str:
    """SQL text in one canonical form, for telling whether two queries are the same text: parsed
    and written back by sqlglot (PostgreSQL), comments dropped, whitespace collapsed, lower
    case, no trailing semicolon. Text sqlglot cannot parse is compared with only its comments,
    whitespace, case and trailing semicolons normalised. Never raises.

    >>> normalise_sql("SELECT  a FROM t -- why\\n;") == normalise_sql("select a\\nfrom T")
    True
    >>> normalise_sql("SELECT (((") == normalise_sql("select  (((;")
    True
    """
    if not sql:
        return ""
    try:
        import sqlglot

        trees = [t for t in sqlglot.parse(sql, read="postgres") if t is not None]
        if len(trees) != 1:
            raise ValueError("not one statement")
        text = trees[0].sql(dialect="postgres", comments=False, normalize=True)
    except Exception:
        text = _COMMENT.sub(" ", sql)
    return " ".join(text.split()).rstrip(";").strip().lower()


def gold_equal(predictions: Mapping[str, str | None], gold: Mapping[str, str]) -> list[str]:
    """The question ids (sorted) whose predicted SQL holds the gold SQL: has its fingerprint,
    wraps it or contains it (:func:`pytest_heron.board.gold_prints.holds_gold`), or, for a gold
    pglast cannot read, is its text once normalised.

    >>> gold_equal(
    ...     {"q1": "select a from t", "q2": "WITH g AS (SELECT b FROM u) SELECT * FROM g"},
    ...     {"q1": "SELECT a FROM t", "q2": "SELECT b FROM u"},
    ... )
    ['q1', 'q2']
    >>> gold_equal({"q1": "SELECT a FROM t"}, {"q1": "SELECT b FROM t"})
    []
    """
    from pytest_heron.board.gold_prints import gold_print, holds_gold

    def holds(sql: str, reference: str) -> bool:
        if gold_print(reference) is None:
            return normalise_sql(sql) == normalise_sql(reference)
        return holds_gold(sql, reference)

    return sorted(
        qid for qid, sql in predictions.items() if sql and qid in gold and holds(sql, gold[qid])
    )


def gold_share(equal: Iterable[str], total: int) -> float | None:
    """The share (0..1, four decimals) of ``total`` predictions that are the public gold.

    >>> gold_share(["q1"], 4), gold_share([], 0)
    (0.25, None)
    """
    if total <= 0:
        return None
    return round(len(list(equal)) / total, 4)
