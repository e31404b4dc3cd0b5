"""Gold whose ORDER BY keys cannot be mapped to output columns is refused in every question set.

Such gold would make the comparator enforce the whole row sequence, so a right answer that orders
rows tied on the keys differently would be scored wrong (issue 30). A key in the select list maps,
and then rows tied on it may come in any order.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_heron import compare
from pytest_heron.core.errors import QuestionFileError
from pytest_heron.database.server import Server
from pytest_heron.dataset.questions import load_questions
from pytest_heron.sandbox.execute import execute

ROWS = "(VALUES (1, 'b', 10), (1, 'a', 20), (2, 'c', 30)) AS t(k, name, n)"
FILE = """\
id: p001
question: The rows, by key.
gold_sql: {sql}
gold_tables: []
shape: single
retrieval: named
"""


@pytest.mark.parametrize(
    ("sql", "problem"),
    [
        (f"SELECT * FROM {ROWS} ORDER BY k", "SELECT \\*"),
        (f"SELECT name, n FROM {ROWS} ORDER BY k", "not an output column"),
    ],
)
def test_unmappable_order_keys_are_refused_in_a_private_set(
    tmp_path: Path, sql: str, problem: str
) -> None:
    (tmp_path / "q.yaml").write_text(FILE.format(sql=sql))
    with pytest.raises(QuestionFileError, match=problem) as info:
        load_questions(tmp_path)
    assert info.value.field == "gold_sql" and info.value.qid == "p001"


def test_a_mapped_key_lets_tied_rows_come_in_any_order(tmp_path: Path, server: Server) -> None:
    sql = f"SELECT k, name, n FROM {ROWS} ORDER BY k"
    (tmp_path / "q.yaml").write_text(FILE.format(sql=sql))
    (q,) = load_questions(tmp_path)
    gold = execute(server.admin_dsn, q.gold_sql, timeout_s=10, guard=False)
    swapped = execute(
        server.admin_dsn, f"SELECT k, name, n FROM {ROWS} ORDER BY k, name", timeout_s=10
    )
    assert (
        gold.ok and swapped.ok and [r[1] for r in gold.rows[:2]] != [r[1] for r in swapped.rows[:2]]
    )  # the tie on k = 1 comes out in the other order
    keys = compare.order_keys(q.gold_sql)
    assert keys == (0,)
    assert compare.compare(gold.rows, swapped.rows, order=keys).equal
    wrong = list(reversed(gold.rows))  # k = 2 first: out of order on the key itself
    assert not compare.compare(gold.rows, wrong, order=keys).equal
