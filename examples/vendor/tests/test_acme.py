"""Acme's own tests, written with pytest-heron's fixtures (no full benchmark run needed)."""

from __future__ import annotations

import psycopg
from acme_sql.adapter import KNOWN, AcmeSql


def test_the_question_set_is_there(heron_questions):
    assert "q001" in heron_questions
    assert heron_questions["q001"].question.startswith("How many customers")


def test_our_answer_to_q001_is_right_on_every_state(heron_score):
    outcome = heron_score("q001", KNOWN["q001"][0])
    assert outcome.correct, heron_score.explain(outcome)


def test_a_wrong_answer_says_why(heron_score):
    outcome = heron_score("q001", "SELECT count(*) FROM orders.customers WHERE tenant_id = 2")
    assert not outcome.correct
    assert "first missing row" in (outcome.reason or "")


def test_our_sql_runs_on_a_seeded_state(heron_state, heron_questions):
    sql = AcmeSql().generate(heron_questions["q002"]).sql
    with psycopg.connect(heron_state.dsn) as conn:
        rows = conn.execute(sql).fetchall()
    assert rows and all(len(row) == 2 for row in rows)
