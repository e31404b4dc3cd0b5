"""The gold share on the parse tree (issue 41, item 1): a prediction that is, wraps or contains
the public gold query holds it; one whose tree differs does not. Pure: pglast only, no server.
The board's side (such a row is not ranked) is
``test_board_verdicts.py::test_wrapped_public_gold_counts_as_gold_and_is_not_ranked``.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_heron.board.gold_prints import UNWALKABLE, gold_print, holds_gold, prints
from pytest_heron.board.standing import gold_equal, gold_share
from pytest_heron.dataset import load_questions, params
from pytest_heron.dataset.questions import builtin_dir
from rewrites import own_rewrite

QUESTIONS = load_questions(builtin_dir())
WRAPPERS = (
    "WITH g AS ({gold}) SELECT * FROM g",
    "WITH g AS ({gold}) TABLE g",
    "WITH g AS ({gold}) SELECT g.* FROM g",
    "SELECT * FROM ({gold}) t",
    "SELECT t.* FROM ({gold}) AS t",
    "SELECT * FROM (SELECT * FROM ({gold}) a) b",
    "WITH x AS (SELECT 1 AS one), g AS ({gold}) SELECT * FROM g",
    "SELECT * FROM ({gold}) t WHERE true ORDER BY 1",
    "({gold}) UNION ALL (SELECT * FROM ({gold}) z WHERE false)",
    '/* mine */ select * from (\n{gold}\n) as "Mine"',
)


def _bare(sql: str) -> str:
    return sql.strip().rstrip(";")


def test_every_wrapper_of_every_builtin_gold_holds_it() -> None:
    for q in QUESTIONS:
        gold = _bare(q.gold_sql)
        assert holds_gold(gold, gold), q.id
        for wrapper in WRAPPERS:
            assert holds_gold(wrapper.format(gold=gold), gold), (q.id, wrapper)
        assert not holds_gold(own_rewrite(gold), gold), q.id  # a changed tree is not the gold


def test_a_cte_moved_out_of_the_gold_still_holds_it() -> None:
    gold = "WITH a AS (SELECT id FROM t WHERE x = 1) SELECT count(*) FROM a"
    moved = "WITH a AS (SELECT id FROM t WHERE x = 1), g AS (SELECT count(*) FROM a) TABLE g"
    assert holds_gold(moved, gold)
    assert not holds_gold("WITH a AS (SELECT id FROM t WHERE y = 1) SELECT count(*) FROM a", gold)


def test_gold_share_counts_wrapped_gold_and_not_other_queries() -> None:
    gold = {q.id: q.gold_sql for q in QUESTIONS[:4]}
    preds: dict[str, str | None] = {
        QUESTIONS[0].id: f"WITH g AS ({_bare(QUESTIONS[0].gold_sql)}) SELECT * FROM g",
        QUESTIONS[1].id: f"SELECT * FROM ({_bare(QUESTIONS[1].gold_sql)}) t",
        QUESTIONS[2].id: own_rewrite(QUESTIONS[2].gold_sql),
        QUESTIONS[3].id: None,
    }
    equal = gold_equal(preds, gold)
    assert equal == [QUESTIONS[0].id, QUESTIONS[1].id]
    assert gold_share(equal, len(preds)) == 0.5


def test_a_variants_gold_has_its_parents_fingerprint() -> None:
    """Variants change only values, which the fingerprint ignores: the same rule covers them."""
    checked = 0
    for q in QUESTIONS:
        listed = [p for p in q.parameters if p.values and p.derived is None]
        if not listed or any(p.derived for p in q.parameters):
            continue
        values = params.defaults(q.parameters)
        for p in listed:
            values[p.name] = next((v for v in p.values if v != p.default), p.default)
        variant = params.render(q.template_sql, values, sql=True)
        assert variant != q.gold_sql or len(listed[0].values) < 2, q.id
        assert gold_print(variant) == gold_print(q.gold_sql), q.id
        assert holds_gold(f"WITH g AS ({_bare(variant)}) TABLE g", q.gold_sql), q.id
        checked += 1
    assert checked >= 20


def test_a_tree_too_deep_to_walk_counts_and_text_that_does_not_parse_does_not() -> None:
    deep = " UNION ALL ".join(["SELECT 1"] * 3000)
    got = prints(deep)
    assert got == (UNWALKABLE,) or len(got) >= 1  # pglast reads it or the walk gives up
    assert prints("SELECT (((") == () and not holds_gold("SELECT (((", "SELECT 1")
    assert prints("SELECT 1; SELECT 2") == ()


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(QUESTIONS),
    st.lists(st.sampled_from(WRAPPERS), min_size=1, max_size=3),
)
def test_wrappers_nest_and_still_hold_the_gold(q: object, wrappers: list[str]) -> None:
    gold = _bare(q.gold_sql)  # type: ignore[attr-defined]
    sql = gold
    for wrapper in wrappers:
        sql = wrapper.format(gold=sql)
    assert holds_gold(sql, gold)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(QUESTIONS), st.sampled_from(QUESTIONS))
def test_another_questions_gold_is_not_this_ones(a: object, b: object) -> None:
    qa, qb = a, b
    ga, gb = _bare(qa.gold_sql), _bare(qb.gold_sql)  # type: ignore[attr-defined]
    assert holds_gold(gb, ga) == (gold_print(ga) == gold_print(gb))
