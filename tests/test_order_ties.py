"""Gold's top-level ORDER BY is honoured by the data, never refused (issue 40).

Gold that sorts a ``SELECT *``, or sorts on a key outside its select list, used to be refused in
every question set (issue 30), while every peer evaluator accepts it (defog sql-eval's
``compare_df``/``subset_df`` cases sort ``SELECT *`` on ``b`` with two rows tied on ``b``).  Now
a ``SELECT *`` key is found among gold's output column names, and a key outside the output is
run as a hidden column that cuts gold into tie groups and is dropped before the comparison: rows
tied on the keys may come in any order, rows out of order on them are wrong.  The pure parts get
property tests; the rest runs on the test session's real server.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_heron import compare
from pytest_heron.audit.gold import limit_ties
from pytest_heron.database import StateRef
from pytest_heron.database.server import Server
from pytest_heron.dataset import load_questions
from pytest_heron.sandbox import execute, execute_gold
from pytest_heron.scoring.score import score_sql

ROWS = "(VALUES (1, 'b', 10), (1, 'a', 20), (2, 'c', 30)) AS t(k, name, n)"
# defog's case: SELECT * sorted on b, rows 1 and 2 tied on b
PEER = "(VALUES (1, 5, 'x'), (2, 5, 'y'), (3, 7, 'z')) AS t(a, b, c)"
FILE = """\
id: p001
question: The rows, by key.
gold_sql: {sql}
gold_tables: []
shape: single
retrieval: named
"""


def _run(server: Server, sql: str) -> list[tuple[object, ...]]:
    got = execute(server.admin_dsn, sql, timeout_s=10, guard=False)
    assert got.ok, got.error
    return got.rows


@pytest.mark.parametrize(
    "sql",
    [
        f"SELECT * FROM {ROWS} ORDER BY k",
        f"SELECT name, n FROM {ROWS} ORDER BY k",
        f"SELECT t.* FROM {ROWS} ORDER BY t.k DESC",
    ],
)
def test_no_gold_is_refused_for_its_order_by(tmp_path: Path, sql: str) -> None:
    (tmp_path / "q.yaml").write_text(FILE.format(sql=sql))
    (q,) = load_questions(tmp_path)
    assert q.gold_sql == sql


def test_the_peers_select_star_tie_case_is_accepted(server: Server) -> None:
    gold = execute_gold(
        server.admin_dsn, f"SELECT * FROM {PEER} ORDER BY b", timeout_s=10, max_rows=100
    )
    # the key is found among the cursor description's names: no second run, no tie groups
    assert gold.ok and gold.order == (1,) and gold.ties is None
    swapped = _run(server, f"SELECT * FROM {PEER} ORDER BY b, a DESC")
    assert [r[0] for r in gold.rows[:2]] != [r[0] for r in swapped[:2]]  # the tie, swapped
    assert gold.compare(swapped).equal
    permuted = _run(server, f"SELECT c, b, a FROM {PEER} ORDER BY b, a DESC")  # columns moved
    assert gold.compare(permuted).equal
    wrong = gold.compare(_run(server, f"SELECT * FROM {PEER} ORDER BY b DESC"))
    assert not wrong.equal and wrong.reason.startswith("order differs at row 1"), wrong.reason
    # subset_df's case: a prediction with an extra column passes in superset mode only
    wider = _run(server, f"SELECT a, b, c, a * 2 AS d FROM {PEER} ORDER BY b, a DESC")
    assert not gold.compare(wider).equal and gold.compare(wider, superset=True).equal


@pytest.mark.parametrize(
    ("gold_sql", "tied", "broken"),
    [
        # k is not an output column: the rows with k = 1 tie
        (
            f"SELECT name, n FROM {ROWS} ORDER BY k",
            f"SELECT name, n FROM {ROWS} ORDER BY k, name",
            f"SELECT name, n FROM {ROWS} ORDER BY n DESC",
        ),
        # a qualified key of a SELECT t.*: not a name to look up, so a hidden column
        (
            f"SELECT t.* FROM {ROWS} ORDER BY t.k DESC",
            f"SELECT t.* FROM {ROWS} ORDER BY t.k DESC, t.name",
            f"SELECT t.* FROM {ROWS} ORDER BY t.k",
        ),
        # an expression over the input, one key visible and one hidden
        (
            f"SELECT n FROM {ROWS} ORDER BY k % 2, length(name)",
            f"SELECT n FROM {ROWS} ORDER BY k % 2, length(name), n DESC",
            f"SELECT n FROM {ROWS} ORDER BY n",
        ),
        # DISTINCT ON sorts on its key, which the select list leaves out
        (
            f"SELECT DISTINCT ON (k) name FROM {ROWS} ORDER BY k DESC, name",
            f"SELECT DISTINCT ON (k) name FROM {ROWS} ORDER BY k DESC, name",
            f"SELECT DISTINCT ON (k) name FROM {ROWS} ORDER BY k, name",
        ),
    ],
)
def test_keys_outside_the_output_cut_tie_groups(
    server: Server, gold_sql: str, tied: str, broken: str
) -> None:
    gold = execute_gold(server.admin_dsn, gold_sql, timeout_s=10, max_rows=100)
    assert gold.ok and gold.ties is not None, gold.note
    assert "outside the output" in gold.note
    # the hidden columns are gone: gold's rows are what the query shows
    assert gold.rows and len(gold.rows[0]) == len(_run(server, gold_sql)[0])
    assert gold.compare(_run(server, tied)).equal
    assert gold.compare(list(gold.rows)).equal
    wrong = gold.compare(_run(server, broken))
    assert not wrong.equal and "order differs" in wrong.reason, wrong.reason


def test_a_shuffled_tie_inside_a_sorted_answer_passes(server: Server) -> None:
    gold = execute_gold(
        server.admin_dsn, f"SELECT name, n FROM {ROWS} ORDER BY k", timeout_s=10, max_rows=100
    )
    assert gold.ties == [0, 0, 1]
    first, second, last = gold.rows
    assert gold.compare([second, first, last]).equal
    assert gold.compare([first, second, last]).equal
    moved = gold.compare([first, last, second])  # a k = 2 row inside the k = 1 group
    assert not moved.equal
    assert "rows tied on sort keys outside the output" in moved.reason, moved.reason


def test_an_output_name_the_sql_cannot_map_is_found_in_the_description(server: Server) -> None:
    sql = f"SELECT k, count(*) FROM {ROWS} GROUP BY k ORDER BY count DESC, k"
    assert compare.order_keys(sql) == ()  # sqlglot alone does not see that "count" is column 2
    gold = execute_gold(server.admin_dsn, sql, timeout_s=10, max_rows=100)
    assert gold.ok and gold.order == (1, 0) and gold.ties is None


def test_a_limit_that_cuts_a_tie_on_a_hidden_key_is_found(server: Server) -> None:
    assert limit_ties(server.admin_dsn, f"SELECT name FROM {ROWS} ORDER BY k LIMIT 1") is not None
    assert limit_ties(server.admin_dsn, f"SELECT name FROM {ROWS} ORDER BY k LIMIT 2") is None


def test_scoring_accepts_the_tie_and_refuses_the_disorder(tmp_path: Path, server: Server) -> None:
    (tmp_path / "q.yaml").write_text(FILE.format(sql=f"SELECT name, n FROM {ROWS} ORDER BY k"))
    (q,) = load_questions(tmp_path)
    state = StateRef(42, "postgres", server.admin_dsn, server.admin_dsn)
    for sql in (
        f"SELECT name, n FROM {ROWS} ORDER BY k, name",
        f"SELECT name, n FROM {ROWS} ORDER BY k, name DESC",
        f"SELECT n, name FROM {ROWS} ORDER BY k, n DESC",
    ):
        out = score_sql(q, sql, [state], statement_timeout=10, time_runs=1)
        assert out.correct and out.error_kind is None, out.reason
    out = score_sql(q, f"SELECT name, n FROM {ROWS} ORDER BY n DESC", [state], statement_timeout=10)
    assert not out.correct and out.reason is not None and "order differs" in out.reason


# -- pure parts -----------------------------------------------------------------------------


def test_hidden_order_sql_appends_only_the_keys_asked_for() -> None:
    sql = "SELECT a FROM t ORDER BY b DESC, a, c + 1"
    wide = compare.hidden_order_sql(sql, [0, 2])
    assert (
        wide == "SELECT a, b AS heron_tie_1, c + 1 AS heron_tie_2 FROM t ORDER BY b DESC, a, c + 1"
    )
    # a set operation's keys are output columns: nothing to append to
    assert compare.hidden_order_sql("SELECT a FROM t UNION SELECT a FROM u ORDER BY a", [0]) is None
    assert compare.hidden_order_sql("SELECT a FROM t ORDER BY 1", [0]) is None
    assert compare.hidden_order_sql("not sql at all (", [0]) is None


def test_order_plan_marks_what_the_sql_maps() -> None:
    plan = compare.order_plan("SELECT * FROM t ORDER BY b, 2, t.c")
    assert [(it.index, it.name) for it in plan.items or ()] == [
        (None, "b"),
        (1, None),
        (None, None),
    ]
    assert plan.resolve(["a", "b", "c"]) == (1, 1, None)
    assert plan.resolve(["b", "b"]) == (None, 1, None)  # an ambiguous name is not guessed
    assert compare.order_plan("SELECT a FROM t").items is None
    assert compare.order_plan("SELECT a FROM t ORDER BY a").keys == (0,)


groups = st.lists(st.integers(min_value=1, max_value=4), min_size=1, max_size=8)


@settings(max_examples=150, deadline=None)
@given(sizes=groups, rnd=st.randoms(use_true_random=False))
def test_rows_shuffled_within_their_groups_stay_equal(sizes: list[int], rnd: random.Random) -> None:
    gold: list[tuple[object, ...]] = []
    ties: list[int] = []
    for g, size in enumerate(sizes):
        for k in range(size):
            gold.append((g * 10 + k, f"r{g}.{k}"))
            ties.append(g)
    assert compare.tie_groups([(t,) for t in ties], [0]) == ties
    shuffled: list[tuple[object, ...]] = []
    for g in range(len(sizes)):
        part = [r for r, t in zip(gold, ties, strict=True) if t == g]
        rnd.shuffle(part)
        shuffled.extend(part)
    assert compare.compare(gold, shuffled, order=(), ties=ties).equal
    assert compare.compare(gold, [(b, a) for a, b in shuffled], order=(), ties=ties).equal


@settings(max_examples=150, deadline=None)
@given(sizes=groups, data=st.data())
def test_a_row_moved_into_another_group_is_wrong(sizes: list[int], data: st.DataObject) -> None:
    gold = [(g * 10 + k,) for g, size in enumerate(sizes) for k in range(size)]
    ties = [g for g, size in enumerate(sizes) for _ in range(size)]
    i = data.draw(st.integers(0, len(gold) - 1))
    j = data.draw(
        st.integers(0, len(gold) - 1).filter(lambda j: ties[j] != ties[i])
        if len(sizes) > 1
        else st.just(i)
    )
    swapped = list(gold)
    swapped[i], swapped[j] = swapped[j], swapped[i]
    expected = ties[i] == ties[j]
    assert compare.compare(gold, swapped, order=(), ties=ties).equal is expected


def test_tie_numbers_that_do_not_fit_enforce_the_sequence() -> None:
    gold = [(1,), (2,)]
    assert compare.compare(gold, [(2,), (1,)], order=(), ties=[0, 0]).equal
    for bad in ([0], [1, 1], [0, 2], [0, "0"]):
        assert not compare.compare(gold, [(2,), (1,)], order=(), ties=bad).equal  # type: ignore[arg-type]
