"""Two runs over the built-in questions, built as Results records (no database): ``gold`` (every
answer right on every state) and ``flawed`` (some wrong with a counterexample, some errors, one
right on the first state only, billed tokens on every question). Shared by the site's tests."""

from __future__ import annotations

import dataclasses

from pytest_heron.core.errors import ErrorKind
from pytest_heron.dataset import load_questions
from pytest_heron.dataset.questions import GoldQuestion
from pytest_heron.results.conditions import Conditions
from pytest_heron.results.document import Results, results_document
from pytest_heron.scoring.outcome import Outcome

SEEDS = (42, 43, 44)


def conditions(adapter: str, model: str | None = None) -> Conditions:
    return Conditions(
        adapter=adapter,
        adapter_version="1",
        scale="tiny",
        seeds=SEEDS,
        states=3,
        model=model,
        n_questions=100,
        tables=211,
        schemas=14,
        backend="embedded",
        postgres_version="16.14",
        data_version="testdata",
        questions_digest="testdigest",
    )


def _right(q: GoldQuestion) -> Outcome:
    return Outcome.blank(
        q,
        correct=True,
        correct_by_state={str(s): True for s in SEEDS},
        pred_sql=q.gold_sql,
        tables_in_context=tuple(q.gold_tables),
        latency_s=0.01,
        soft_f1=1.0,
        exact_match=True,
    )


def gold_run() -> Results:
    return results_document(conditions("gold"), [_right(q) for q in load_questions()])


def flawed_outcome(q: GoldQuestion) -> Outcome:
    """q007, q014, ... fail in the database; q009, q018, ... return the wrong rows; q011, q022,
    ... are rejected; q005 is right on the first state only; the rest are right."""
    n = int(q.id[1:])
    o = _right(q)
    usage = {"prompt_tokens": 900 + 3 * len(q.gold_sql), "completion_tokens": len(q.gold_sql) // 3}
    o = dataclasses.replace(o, usage=usage, latency_s=0.5 + n / 100, exact_match=False)
    wrong = {str(s): False for s in SEEDS}
    if n % 9 == 0:
        return dataclasses.replace(
            o,
            correct=False,
            correct_by_state=wrong,
            pred_sql=q.gold_sql + "\nLIMIT 1",
            reason="gold has 12 rows, the prediction 1; a row only gold has: (7, 'open')",
            soft_f1=0.2,
        )
    if n % 7 == 0:
        return o.failed(
            ErrorKind.DB_ERROR,
            'relation "orders.no_such_table" does not exist',
            correct_by_state=wrong,
            pred_sql="SELECT * FROM orders.no_such_table",
            soft_f1=0.0,
        )
    if n % 11 == 0:
        return o.failed(
            ErrorKind.REJECTED,
            "not a read-only query: DELETE",
            correct_by_state=wrong,
            pred_sql="DELETE FROM core.tenants",
            soft_f1=0.0,
        )
    if n == 5:
        return dataclasses.replace(
            o,
            correct=False,
            correct_by_state={"42": True, "43": False, "44": True},
            reason="on seed 43: a row only the prediction has: (3,)",
        )
    return o


def flawed_run() -> Results:
    return results_document(
        conditions("flawed", model="gpt-4o-mini"), [flawed_outcome(q) for q in load_questions()]
    )
