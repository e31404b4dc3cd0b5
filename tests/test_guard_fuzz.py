"""The guard on arbitrary text: it answers None or a reason, and never raises."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_heron.dataset.questions import load_questions
from pytest_heron.sandbox import check_statement

GOLD = [q.gold_sql for q in load_questions()]
PIECES = ["'", '"', "$$", "$a$", "/*", "*/", "--", ";", "(", ")", "[", "]", "ARRAY[", "\\", "E'"]
PIECES += ["\x00", "\ud800", "\udfff", "\n", "SELECT", "DELETE", "::", "{", "}", "%s", "?"]


def _answer_is_sane(sql: str) -> None:
    reason = check_statement(sql)
    assert reason is None or (isinstance(reason, str) and reason)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(alphabet=st.characters(codec=None, categories=None), max_size=400))
def test_arbitrary_text_never_raises(sql: str) -> None:
    _answer_is_sane(sql)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(GOLD),
    st.lists(
        st.tuples(st.integers(0, 10_000), st.integers(0, 40), st.sampled_from(PIECES)),
        min_size=1,
        max_size=4,
    ),
)
def test_mutated_real_queries_never_raise(gold: str, edits: list[tuple[int, int, str]]) -> None:
    """Cut, splice and truncate real gold queries (what a truncated or garbled reply is)."""
    sql = gold
    for at, cut, piece in edits:
        i = at % (len(sql) + 1)
        sql = sql[:i] + piece + sql[i + cut :]
    _answer_is_sane(sql)


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(GOLD), st.integers(0, 100_000))
def test_every_prefix_of_a_real_query_never_raises(gold: str, cut: int) -> None:
    _answer_is_sane(gold[: cut % (len(gold) + 1)])


def test_every_gold_query_is_accepted() -> None:
    assert [q for q in GOLD if check_statement(q) is not None] == []
