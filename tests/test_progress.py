"""The progress helper: plain lines at every tenth (logs, CI), a bar redrawn in place on a
terminal; and the long steps that use it."""

from __future__ import annotations

import io

from hypothesis import given
from hypothesis import strategies as st

from pytest_heron.core.progress import Steps
from pytest_heron.database.states import seeding_progress


def test_plain_lines_at_every_tenth_with_the_detail() -> None:
    lines: list[str] = []
    steps = Steps("re-executing predictions", 25, emit=lines.append, tty=False)
    for i in range(25):
        steps.advance(detail=f"q{i:03d}")
    assert lines[0] == "re-executing predictions: 0/25 (0%)"
    assert lines[1] == "re-executing predictions: 3/25 (12%, q002)"
    assert lines[-1] == "re-executing predictions: 25/25 (100%, q024)"
    assert len(lines) == 11
    assert [int(line.split("(")[1].split("%")[0]) // 10 for line in lines] == list(range(11))


@given(total=st.integers(0, 500), chunks=st.lists(st.integers(1, 60), max_size=40))
def test_plain_lines_are_few_ordered_and_end_at_100(total: int, chunks: list[int]) -> None:
    lines: list[str] = []
    with Steps("x", total, emit=lines.append, tty=False) as steps:
        for n in chunks:
            steps.advance(n)
    assert 1 <= len(lines) <= 11
    counts = [int(line.split(": ")[1].split("/")[0].replace(",", "")) for line in lines]
    assert counts == sorted(counts)
    if sum(chunks) >= total:
        assert lines[-1].endswith("(100%)")


def test_default_plain_lines_go_to_the_stream_with_the_prefix() -> None:
    out = io.StringIO()  # not a terminal
    with Steps("embedding", 2, stream=out) as steps:
        steps.advance(2)
    assert out.getvalue().splitlines() == [
        "heron: embedding: 0/2 (0%)",
        "heron: embedding: 2/2 (100%)",
    ]


def test_a_terminal_gets_one_line_redrawn() -> None:
    out = io.StringIO()
    with Steps("rows loaded", 1000, stream=out, tty=True) as steps:
        for _ in range(10):
            steps.advance(100, "1,000 rows/s")
    text = out.getvalue()
    assert text.startswith("\rheron: rows loaded [")
    assert text.count("\n") == 1 and text.endswith("\n")  # one line, ended once
    assert "] 100% 1,000/1,000 1,000 rows/s" in text
    assert "#" * 24 in text


def test_finished_lines_print_above_the_bar_never_on_it() -> None:
    bar, out = io.StringIO(), io.StringIO()
    with Steps("audit", 2, stream=bar, tty=True) as steps:
        steps.above("q001: ok", out)
        steps.advance(detail="q001")
        steps.above("q002: ok", out)
        steps.advance(detail="q002")
    assert out.getvalue() == "q001: ok\nq002: ok\n"  # the results alone, whole lines
    text = bar.getvalue()
    assert text.count("\r\x1b[K") == 2  # the bar wiped before each finished line
    assert text.endswith("] 100% 2/2 q002\x1b[K\n")
    plain_bar, plain = io.StringIO(), io.StringIO()
    with Steps("audit", 1, stream=plain_bar, tty=False) as steps:
        steps.above("q001: ok", plain)
        steps.advance()
    assert plain.getvalue() == "q001: ok\n" and "\r" not in plain_bar.getvalue()


def test_seeding_lines_become_steps_and_the_rest_passes() -> None:
    said: list[str] = []
    show = seeding_progress(said.append, "heron_tiny_42_x")
    show("schema: 211 tables in 14 schemas; loading 1,000 rows")
    for done in (100, 450, 1000):
        show(f"loaded {done:,}/1,000 rows (5,000 rows/s, ETA 1s), done: core.tenants")
    show("constraints, indexes and statistics")
    assert said[0] == "heron_tiny_42_x: schema: 211 tables in 14 schemas; loading 1,000 rows"
    assert "heron_tiny_42_x: rows loaded: 0/1,000 (0%)" in said
    assert "heron_tiny_42_x: rows loaded: 450/1,000 (45%, 5,000 rows/s, ETA 1s)" in said
    assert "heron_tiny_42_x: rows loaded: 1,000/1,000 (100%, 5,000 rows/s, ETA 1s)" in said
    assert said[-1] == "heron_tiny_42_x: constraints, indexes and statistics"


def test_the_embedding_ranker_reports_each_batch() -> None:
    from pytest_heron.dataset import load_questions
    from pytest_heron.scoring.recall import rank_questions
    from pytest_heron.systems.retrieval.rankers import build_ranker, table_docs

    docs = table_docs()[:5]
    questions = load_questions(None)[:3]
    done: list[int] = []
    built = build_ranker("embedding", docs, done.append)
    rankings = rank_questions(built, questions, done.append)
    assert sum(done) == 2 * len(docs) + len(questions)
    assert sorted(rankings) == sorted(q.id for q in questions)
