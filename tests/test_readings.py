"""The questions whose second reading a blind author named (issue 30: nine; issue 42: twenty more,
with q040 and q072 reworded for the NULL-order rule) are reworded so the English rules it out;
each file records the reading it rules out, and still passes the audit."""

from __future__ import annotations

import pytest

from pytest_heron.audit.gold import state_problems
from pytest_heron.audit.static import duplicate_problems, static_problems
from pytest_heron.database.server import Server
from pytest_heron.dataset import load_questions

ISSUE_30 = ("q016", "q024", "q049", "q053", "q062", "q068", "q075", "q089", "q097")
# issue 42 (q040 was reworded for the NULL-order rule only and records no second reading)
ISSUE_42 = (
    "q003", "q007", "q012", "q015", "q021", "q033", "q037", "q047", "q055", "q056", "q060",
    "q065", "q067", "q070", "q072", "q076", "q096", "q100",
)  # fmt: skip
PINNED = tuple(sorted(ISSUE_30 + ISSUE_42))
# the count-first questions whose NULL row only breaks ties (CONVENTIONS.md, section 16)
TIE_ONLY = ("q007", "q016", "q024", "q068", "q070", "q072", "q075", "q076")
# what each rewording must now say, in the English a system is given
SAYS = {
    "q003": "cancelled ones included",
    "q007": "the NULL row takes its place by its number like any other",
    "q012": "records of variants that have since been deleted",
    "q015": "not the units returned",
    "q021": "a role nobody holds gets no row",
    "q033": "variants deleted from the catalog since included",
    "q037": "have been paid (or otherwise settled) since do not count",
    "q047": "whether or not the subscription moved to another plan",
    "q055": "the mean of the two middle values",
    "q056": "including users whose account has since been deleted",
    "q060": "not a percentage",
    "q065": "not draft, scheduled, paused, finished or cancelled",
    "q067": "List only priorities with at least one such ticket",
    "q070": "the NULL row takes its place by its number like any other",
    "q072": "the NULL row takes its place by its number like any other",
    "q076": "including replies on tickets that have since been deleted",
    "q096": "not only the role named Administrator",
    "q100": "also for logins from before the user joined that team",
    "q016": "has since been deleted still counts",
    "q024": "rejected ones included",
    "q049": "not only those whose role is buyer",
    "q053": "customers that have since been deleted still count",
    "q062": "not flagged as transactional",
    "q068": "among equal numbers by user id with the NULL row after the others",
    "q075": "among equal numbers by brand id with the NULL row after the others",
    "q089": "own error message field is empty",
    "q097": "earliest due date",
}
# a second phrase, where one rewording pins two readings (issue 42 added one to an issue 30 file)
ALSO_SAYS = {"q097": "an invoice due on 31 December itself was not yet past due"}


def test_each_pinned_question_records_the_reading_it_rules_out() -> None:
    questions = {q.id: q for q in load_questions()}
    for qid in PINNED:
        q = questions[qid]
        assert len(q.rules_out) > 20, qid
        assert SAYS[qid] in " ".join(q.question.split()), qid
        assert ALSO_SAYS.get(qid, "") in " ".join(q.question.split()), qid
    for qid in TIE_ONLY:  # the literal "NULL row last" was read as the NULL row at the bottom
        assert "with the NULL row last" not in questions[qid].question, qid
        assert "among equal numbers" in questions[qid].question, qid
    assert sorted(q.id for q in questions.values() if q.rules_out) == sorted(PINNED)
    assert duplicate_problems(list(questions.values())) == {}


@pytest.fixture(scope="module")
def dsns(server: Server) -> list[str]:
    from pytest_heron.database.states import ensure_state

    return [ensure_state(server, "tiny", s).admin_dsn for s in (42, 43, 44)]


@pytest.mark.parametrize("qid", PINNED)
def test_a_pinned_question_still_passes_the_audit(qid: str, dsns: list[str]) -> None:
    (q,) = [q for q in load_questions() if q.id == qid]
    assert static_problems(q) == {}
    assert state_problems(q, dsns) == {}
