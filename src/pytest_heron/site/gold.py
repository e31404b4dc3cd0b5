"""Gold's result on the first state, for the question pages (optional: it needs a database).

:func:`gold_rows` runs every question's gold SQL through the one executor
(:func:`~pytest_heron.sandbox.execute.execute`, as the audit does) on a ready state and keeps
the first :data:`FIRST_ROWS` rows, as text, and the row count. :func:`gold_rows_on_state` gets
that state: on ``--dsn`` or the embedded server, built when it is missing
(:func:`~pytest_heron.database.states.ensure_state`).
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_heron.core.safe_text import printable
from pytest_heron.dataset import GoldQuestion

FIRST_ROWS = 5
TIMEOUT_S = 120.0


@dataclass(frozen=True)
class GoldRows:
    where: str  # "tiny state, seed 42"
    columns: tuple[str, ...] = ()
    rows: tuple[tuple[str, ...], ...] = ()
    total: int = 0
    error: str | None = None


def cell_text(value: Any) -> str:
    """A result cell as the page shows it.

    >>> from decimal import Decimal
    >>> cell_text(None), cell_text(Decimal("1.50")), cell_text(True)
    ('NULL', '1.50', 'true')
    """
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return (
            value.isoformat(sep=" ") if isinstance(value, datetime.datetime) else value.isoformat()
        )
    return printable(str(value))


def gold_rows(dsn: str, questions: Sequence[GoldQuestion], where: str) -> dict[str, GoldRows]:
    """Gold's first rows per question id on the state at ``dsn``."""
    from pytest_heron.sandbox import execute

    out = {}
    for q in questions:
        res = execute(dsn, q.gold_sql, timeout_s=TIMEOUT_S, guard=False)
        if not res.ok:
            out[q.id] = GoldRows(where, error=f"{res.error_kind}: {printable(res.error or '')}")
            continue
        out[q.id] = GoldRows(
            where=where,
            columns=tuple(printable(c) for c in res.columns),
            rows=tuple(tuple(cell_text(v) for v in row) for row in res.rows[:FIRST_ROWS]),
            total=len(res.rows),
        )
    return out


def gold_rows_on_state(
    questions: Sequence[GoldQuestion],
    scale: str,
    seed: int,
    dsn: str | None,
    progress: Callable[[str], None],
) -> dict[str, GoldRows]:
    """:func:`gold_rows` on the ``(scale, seed)`` state of the server at ``dsn`` (default: the
    embedded server), which is built first when it is missing."""
    from pytest_heron.database import embedded, ensure_state, from_dsn

    server = from_dsn(dsn) if dsn else embedded()
    try:
        state = ensure_state(server, scale, seed, progress=progress)
        progress(f"running gold of {len(questions)} questions on {state.database}")
        return gold_rows(state.reader_dsn, questions, f"{scale} state, seed {seed}")
    finally:
        server.stop()
