"""The results site without a browser: its pure parts, the build, and what it refuses.

The browser checks (every page kind in Chromium) are in test_site_browser.py.
"""

from __future__ import annotations

import csv
import dataclasses
import html
import io
import itertools
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_heron.cli import main
from pytest_heron.core.errors import ResultsFileError
from pytest_heron.dataset import load_questions
from pytest_heron.generate import load_bundle
from pytest_heron.results.document import write_results
from pytest_heron.site import charts, sqltext
from pytest_heron.site.build import build_site
from pytest_heron.site.inputs import read_board
from pytest_heron.site.pairing import pair
from pytest_heron.site.report import CSV_COLUMNS, questions_csv, write_report
from pytest_heron.site.schema import diagram, schema_modules
from site_runs import flawed_run, gold_run

ROOT = Path(__file__).resolve().parents[1]
BOARD = ROOT / "board"
TAG = re.compile(r"<[^>]+>")


def _runs(tmp_path: Path) -> list[Path]:
    paths = [tmp_path / "runs" / "gold.json", tmp_path / "runs" / "flawed.json"]
    write_results(paths[0], gold_run())
    write_results(paths[1], flawed_run())
    return paths


@given(st.text(max_size=300))
def test_highlighted_sql_is_the_sql_escaped(sql: str) -> None:
    shown = str(sqltext.highlight(sql))
    assert html.unescape(TAG.sub("", shown)) == sql
    assert "<" not in TAG.sub("", shown)  # every '<' left is one of our spans


def test_sql_layout_keeps_written_lines_and_lays_out_one_long_line() -> None:
    written = "SELECT a\nFROM t"
    assert sqltext.layout(written) == written
    long = "SELECT " + ", ".join(f"column_{i}" for i in range(20)) + " FROM t WHERE x = 1"
    assert "\n" in sqltext.layout(long) and sqltext.layout("SELECT (") == "SELECT ("
    marks = [m for m, _ in sqltext.diff("SELECT a FROM t", "SELECT a\nFROM   t")]
    assert set(marks) == {" "}  # layout alone is no difference


@given(st.floats(min_value=1e-6, max_value=1e9, allow_nan=False))
def test_ticks_cover_the_range_in_equal_steps(high: float) -> None:
    ticks = charts.nice_ticks(high)
    assert ticks[0] == 0 and ticks[-1] >= high * (1 - 1e-9) and 2 <= len(ticks) <= 7
    steps = {round(b - a, 9) for a, b in itertools.pairwise(ticks)}
    assert len(steps) == 1


def test_a_full_bar_leaves_room_for_its_value() -> None:
    svg = str(charts.bars("t", [("a long bucket name", 100.0, "(n=27)"), ("b", None, "")]))
    width = float(re.findall(r'viewBox="0 0 ([\d.]+)', svg)[0])
    value_x = float(re.findall(r'x="([\d.]+)" y="[\d.]+" class="value"', svg)[0])
    bar_end = max(
        float(x) + float(w)
        for x, w in re.findall(
            r'x="([\d.]+)" y="[\d.]+" width="([\d.]+)" height="16" class="bar"', svg
        )
    )
    assert bar_end < value_x and value_x + charts.text_width("100.0% (n=27)") <= width
    assert "n/a" in svg


def test_schema_modules_and_foreign_keys_come_from_the_ddl() -> None:
    mods = schema_modules()
    assert len(mods) == 14 and sum(len(m.tables) for m in mods) == 211
    ddl = "\n".join(m.ddl_constraints for m in load_bundle().modules)
    assert sum(len(m.foreign_keys) for m in mods) == ddl.count("FOREIGN KEY")
    crm = next(m for m in mods if m.name == "crm")
    svg = str(diagram(crm, highlight=frozenset({"crm.accounts"})))
    for t in crm.tables:
        assert f'data-table="{t.name}"' in svg
    assert svg.count('class="table hl"') == 1


def test_the_pairing_of_two_runs_counts_every_common_question_once() -> None:
    a, b = gold_run(), flawed_run()
    p, q = pair(a, b), pair(b, a)
    wrong = [o.id for o in b.outcomes if not o.correct]
    assert p.a_only == tuple(wrong) and p.b_only == () and p.both_wrong == 0
    assert p.both_right + len(p.a_only) + len(p.b_only) + p.both_wrong == len(p.common) == 100
    assert (q.a_only, q.b_only, q.p) == (p.b_only, p.a_only, p.p) and p.p < 0.001


def test_the_site_is_the_same_bytes_every_time(tmp_path: Path) -> None:
    runs = _runs(tmp_path)
    one = build_site(tmp_path / "one", board=BOARD, runs=runs)
    two = build_site(tmp_path / "two", board=BOARD, runs=runs)
    rel = sorted(str(p.relative_to(tmp_path / "one")) for p in one)
    assert rel == sorted(str(p.relative_to(tmp_path / "two")) for p in two)
    for r in rel:
        assert (tmp_path / "one" / r).read_bytes() == (tmp_path / "two" / r).read_bytes(), r
    for page in (
        "index.html",
        "runs/index.html",
        "runs/gold.html",
        "runs/flawed.html",
        "questions/index.html",
        "questions/q001.html",
        "compare/index.html",
        "compare/gold--flawed.html",
        "schema/index.html",
        "schema/crm.html",
    ):
        assert page in rel
    assert len([r for r in rel if r.startswith("questions/q")]) == 100
    text = "".join((tmp_path / "one" / r).read_text() for r in rel)
    assert "http://" not in text and "https://" not in text and "src=" not in text


def test_heron_site_runner_adds_the_runner_page_and_its_navigation(tmp_path: Path) -> None:
    """issue 17 item 1: ``heron site --runner`` builds the runner beside the pages, and every
    page of the site links to it; without --runner no page does."""
    runs = _runs(tmp_path)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest_heron.cli",
            "site",
            "--runs",
            *map(str, runs),
            "--runner",
            "--out",
            str(tmp_path / "with"),
        ],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "with" / "runner" / "runner.html").is_file()
    index = (tmp_path / "with" / "runs" / "index.html").read_text()
    assert 'href="../runner/runner.html"' in index and "Run in the browser" in index
    build_site(tmp_path / "without", runs=runs)
    assert "runner/runner.html" not in (tmp_path / "without" / "runs" / "index.html").read_text()
    assert not (tmp_path / "without" / "runner").exists()


def test_text_from_a_results_file_is_escaped(tmp_path: Path) -> None:
    doc = flawed_run()
    evil = "<script>alert(1)</script>\x1b[2J"
    bad = dataclasses.replace(doc.outcomes[6], error=evil, pred_sql=evil, reason=evil)  # q007
    doc = dataclasses.replace(doc, outcomes=(*doc.outcomes[:6], bad, *doc.outcomes[7:]))
    path = tmp_path / "evil.json"
    write_results(path, doc)
    build_site(tmp_path / "site", runs=[path])
    for page in ("runs/evil.html", f"questions/{bad.id}.html"):
        text = (tmp_path / "site" / page).read_text()
        assert "<script>alert" not in text and "\x1b" not in text
        assert "&lt;script&gt;alert(1)&lt;/script&gt;\\x1b[2J" in text


def _mutate(path: Path, change: Any) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def test_a_bad_results_file_is_refused_by_name_and_nothing_is_written(tmp_path: Path) -> None:
    runs = _runs(tmp_path)
    _mutate(runs[1], lambda d: d["questions"][3].update(correct="no"))
    out = tmp_path / "site"
    with pytest.raises(ResultsFileError, match=r"flawed\.json.*'q004'.*'correct'"):
        build_site(out, board=BOARD, runs=runs)
    assert not out.exists()
    assert main(["site", "--runs", str(tmp_path / "runs"), "--out", str(out)]) == 2
    assert not out.exists()


def test_a_board_row_cannot_point_outside_its_folder(tmp_path: Path) -> None:
    board = tmp_path / "board"
    board.mkdir()
    data = json.loads((BOARD / "leaderboard.json").read_text())
    data["rows"][0]["breakdown"] = "../../../etc/passwd#breakdown"
    (board / "leaderboard.json").write_text(json.dumps(data))
    with pytest.raises(ResultsFileError, match=r"rows\[0\], field 'breakdown'.*points outside"):
        read_board(board)
    data["rows"][0]["ex_multistate"] = "high"
    (board / "leaderboard.json").write_text(json.dumps(data))
    with pytest.raises(ResultsFileError, match=r"rows\[0\], field 'ex_multistate'"):
        read_board(board)


def test_the_committed_board_is_read_with_its_verdicts() -> None:
    board = read_board(BOARD)
    committed = json.loads((BOARD / "leaderboard.json").read_text())
    assert [r.name for r in board.rows] == [r["name"] for r in committed["rows"]]
    gold = board.rows[0]
    assert gold.reference and gold.correct is not None and len(gold.correct) == 100


def test_heron_site_command_builds_board_runs_and_compare(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = _runs(tmp_path)
    out = tmp_path / "site"
    assert main(["site", "--board", str(BOARD), "--runs", *map(str, runs), "--out", str(out)]) == 0
    said = capsys.readouterr()
    assert said.out.strip() == str(out / "index.html")
    # progress while the pages render: board, 2 runs, comparisons, index, 100 questions, schema
    steps = [line for line in said.err.splitlines() if line.startswith("heron: site pages:")]
    assert steps[0] == "heron: site pages: 0/106 (0%)", steps
    assert steps[-1] == "heron: site pages: 106/106 (100%, schema)", steps
    assert len(steps) == 11
    compare = (out / "compare" / "gold--flawed.html").read_text()
    wrong = sum(not o.correct for o in flawed_run().outcomes)
    assert f'data-metric="a_only"><div class="num">{wrong}</div>' in compare
    page = (out / "questions" / "q001.html").read_text()
    assert "were not computed" in page and page.count('class="run-block"') == 2


def test_questions_csv_has_the_question_gold_and_messages_with_formulas_quoted() -> None:
    doc = flawed_run()
    qs = {q.id: q for q in load_questions()}
    bad = dataclasses.replace(doc.outcomes[6], error='=HYPERLINK("x")', reason="-1 row")
    doc = dataclasses.replace(doc, outcomes=(*doc.outcomes[:6], bad, *doc.outcomes[7:]))
    rows = list(csv.reader(io.StringIO(questions_csv(doc, qs))))
    assert rows[0] == list(CSV_COLUMNS)
    assert {"question", "gold_sql", "reason", "error"} <= set(rows[0])
    rec = {r[0]: dict(zip(rows[0], r, strict=True)) for r in rows[1:]}
    assert rec["q001"]["question"] == qs["q001"].question
    assert rec["q001"]["gold_sql"] == qs["q001"].gold_sql
    assert rec["q007"]["error"] == '\'=HYPERLINK("x")' and rec["q007"]["reason"] == "'-1 row"
    assert rec["q009"]["reason"].startswith("gold has 12 rows")


def test_the_report_folder_has_the_run_page_of_the_site(tmp_path: Path) -> None:
    doc = flawed_run()
    write_report(tmp_path / "flawed", doc)  # the run is named after its report folder
    runs = [tmp_path / "flawed.json"]
    write_results(runs[0], doc)
    build_site(tmp_path / "site", runs=runs)
    report = (tmp_path / "flawed" / "report.html").read_text()
    site = (tmp_path / "site" / "runs" / "flawed.html").read_text()

    def body(page: str) -> str:  # the run page's content, without navigation and source path
        main_ = page.split("<main>", 1)[1].split("</main>", 1)[0]
        return re.sub(r"Source: <code>[^<]*</code>|href=\"[^\"]*\"", "", main_)

    assert body(report) == body(site)
    assert (tmp_path / "flawed" / "questions" / "q001.html").is_file()
    assert json.loads((tmp_path / "flawed" / "results.json").read_text())["version"] == 1


@pytest.mark.embedded
def test_gold_rows_on_the_first_state(tiny_state: Any) -> None:
    from pytest_heron.site.gold import gold_rows

    qs = load_questions()[:3]
    rows = gold_rows(tiny_state.reader_dsn, qs, "tiny state, seed 42")
    assert sorted(rows) == [q.id for q in qs]
    first = rows[qs[0].id]
    assert first.error is None and first.total >= 1 and first.columns
    assert len(first.rows) == min(first.total, 5)


def test_heron_site_on_two_plugin_runs(pytester: pytest.Pytester) -> None:
    """Two runs made by the plugin on the tiny scale (gold, and an adapter that gets every
    question wrong, under ``-n 2``), then ``heron site`` on them with the run's question set."""
    from test_plugin import ADAPTERS, FAST, _private

    private = _private(pytester)
    pytester.makepyfile(myadapters=ADAPTERS)
    for adapter, extra in (("gold", []), ("myadapters:Wrong", ["-n", "2"])):
        name = adapter.rpartition(":")[2].lower()
        pytester.runpytest_subprocess(
            f"--heron-adapter={adapter}",
            f"--heron-output=runs/{name}.json",
            f"--heron-questions={private}",
            *FAST,
            *extra,
        )
    out = pytester.path / "site"
    argv = ["site", "--runs", "runs", "--questions", str(private), "--out", str(out)]
    assert main(argv) == 0
    compare = (out / "compare" / "gold--wrong.html").read_text()
    assert 'data-metric="a_only"><div class="num">3</div>' in compare
    run = (out / "runs" / "wrong.html").read_text()
    assert run.count('data-verdict="error"') == 2 and run.count('data-verdict="wrong"') == 1
    question = (out / "questions" / "v002.html").read_text()
    assert "Pair each letter with its number." in question and "rejected" in question
    assert sorted(p.name for p in (out / "questions").iterdir()) == [
        "index.html",
        "v001.html",
        "v002.html",
        "v003.html",
    ]
