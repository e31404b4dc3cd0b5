"""Submitter and results-file text is escaped wherever it goes (issue 29, item 6): every writer
(leaderboard.md/.csv/.svg, the site's pages, the terminal summary, ``heron compare``) is fed
hostile text and its output is checked: no live markup or link, no formula cell, no escape,
bidi or NUL character."""

from __future__ import annotations

import csv
import io
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_heron.board.leaderboard import build_board, write_board
from pytest_heron.board.submission import DIGEST, VERDICT, content_names, folder_digest
from pytest_heron.core.safe_text import csv_cell, html_text, markdown_cell, one_line, printable
from pytest_heron.dataset import load_questions
from pytest_heron.results.comparison import compare_runs
from pytest_heron.results.conditions import Conditions
from pytest_heron.results.document import read_results, results_document, write_results
from pytest_heron.results.terminal import summary_lines
from pytest_heron.scoring.outcome import Outcome
from pytest_heron.site.build import build_site

HOSTILE = (
    '=HYPERLINK("http://evil.example") <svg onload=alert(1)> <script>alert(2)</script> '
    "[click](javascript:alert(3)) \x1b[2J\x1b]0;owned\x07 \u202etxt.exe \x00 | cell\nnew line"
)
# what must never reach an output as it is: markup (in Markdown, HTML, SVG) and control
# characters (anywhere)
MARKUP = ("<svg onload", "<script>alert", "](javascript:")
CONTROL = ("\x1b", "\u202e", "\x00", "\x07")


def _clean(text: str, where: str, raw: tuple[str, ...] = MARKUP + CONTROL) -> None:
    for bad in raw:
        assert bad not in text, f"{where} holds {bad!r}"


# -- the helper -----------------------------------------------------------------------------------


@given(st.text())
def test_printable_leaves_no_control_or_bidi_character(text: str) -> None:
    shown = printable(text)
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]", shown)
    shown.encode("utf-8")  # lone surrogates are shown escaped too
    assert "\n" not in one_line(text) and "\t" not in one_line(text)


@given(st.text())
def test_html_and_markdown_cells_carry_no_markup(text: str) -> None:
    for out in (html_text(text), markdown_cell(text)):
        assert "<" not in out and ">" not in out
    cell = markdown_cell(text)
    assert "\n" not in cell and not re.search(r"(?<!\\)[\[\]|`]", cell.replace("\\\\", ""))


@given(st.text())
def test_a_csv_cell_never_starts_a_formula(text: str) -> None:
    assert not csv_cell(text).startswith(("=", "+", "-", "@", "\t", "\r"))


def test_the_helper_on_hostile_text() -> None:
    assert markdown_cell("[a](javascript:x)") == "\\[a\\](javascript\\:x)"
    assert html_text("<svg onload=x>") == "&lt;svg onload=x&gt;"
    assert printable("a\u202eb\x00") == "a\\u202eb\\x00"
    assert csv_cell("@SUM(A1)") == "'@SUM(A1)" and csv_cell("-2+3") == "'-2+3"


# -- the board: leaderboard.md, .csv, .svg -------------------------------------------------------


def _accepted(submissions: Path, name: str, tool: str) -> None:
    folder = submissions / name
    folder.mkdir(parents=True)
    (folder / "predictions.jsonl").write_text("")
    (folder / DIGEST).write_text(folder_digest(folder, content_names(folder)) + "\n")
    digest = (folder / DIGEST).read_text().strip()
    assert digest == folder_digest(folder, content_names(folder))
    verdict = {
        "format": 1,
        "submission": name,
        "digest": digest,
        "accepted": True,
        "reasons": [],
        "protocol": {"name": "p", "digest": "d", "scale": "tiny"},
        "hidden_seed": 123456,
        "hidden_seed_source": "given",
        "metrics": {},
        "ex_hidden_seed": 50.0,
        "reproduced": {"ex_multistate": 50.0, "ex1": 50.0, "errors": 0},
        "breakdown": {},
        "correct": {"q1": True, "q2": False},
        "correct_hidden": {},
        "meta": {
            "tool": tool,
            "tool_version": "@SUM(1+1)" + HOSTILE,
            "approach": "-2+3 " + HOSTILE,
            "conditions": {"adapter": "raw-llm", "scale": "tiny", "seeds": [42]},
        },
        "replay": None,
        "versions": {},
        "verified_at": "2026-12-02T00:00:00Z",
    }
    (folder / VERDICT).write_text(json.dumps(verdict))


@pytest.fixture
def board(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    submissions = tmp_path / "submissions"
    _accepted(submissions, "hostile-tool", HOSTILE)
    files = build_board(submissions)
    write_board(files, tmp_path / "board")
    return tmp_path / "board", files


def test_leaderboard_md_shows_hostile_text_as_text(board: tuple[Path, dict[str, str]]) -> None:
    md = board[1]["leaderboard.md"]
    _clean(md, "leaderboard.md")
    rows = [line for line in md.splitlines() if line.startswith("|")]
    cells = {len(re.findall(r"(?<!\\)\|", line)) for line in rows}
    assert len(cells) == 1 and len(rows) == 3  # header, divider, one row: no cell or row break
    assert "\\[click\\](javascript\\:alert(3))" in md and "&lt;svg onload" in md
    assert all(len(re.findall(r"(?<!\\)\]\(", line)) <= 1 for line in rows)  # the board's link


def test_leaderboard_csv_has_no_formula_cell(board: tuple[Path, dict[str, str]]) -> None:
    text = board[1]["leaderboard.csv"]
    _clean(text, "leaderboard.csv", CONTROL)
    for row in csv.reader(io.StringIO(text)):
        for cell in row:
            assert not cell.startswith(("=", "+", "-", "@", "\t", "\r")), cell
    assert "'=HYPERLINK" in text and "'@SUM" in text


def test_leaderboard_svg_is_valid_xml_without_handlers(board: tuple[Path, dict[str, str]]) -> None:
    svg = board[1]["leaderboard.svg"]
    _clean(svg, "leaderboard.svg")
    root = ET.fromstring(svg)
    for element in root.iter():
        assert not element.tag.endswith("script")
        assert not any(a.lower().startswith("on") for a in element.attrib), element.attrib


# -- the site and the terminal -------------------------------------------------------------------


def _hostile_results(tmp_path: Path) -> Path:
    questions = load_questions()[:2]
    conditions = Conditions(
        adapter="evil" + HOSTILE,
        scale="tiny",
        seeds=(42,),
        states=1,
        model=HOSTILE,
        n_questions=2,
        data_version="v1" + HOSTILE,
        adapter_conditions={"note": HOSTILE},
    )
    outcomes = [
        Outcome(
            q.id,
            correct=False,
            correct_by_state={"42": False},
            pred_sql="SELECT 1 -- " + HOSTILE,
            error=HOSTILE,
            error_kind=None,
        )
        for q in questions
    ]
    path = tmp_path / "hostile.json"
    write_results(path, results_document(conditions, outcomes))
    return path


def test_every_site_page_shows_hostile_text_escaped(
    tmp_path: Path, board: tuple[Path, dict[str, str]]
) -> None:
    run = _hostile_results(tmp_path)
    written = build_site(tmp_path / "site", board=board[0], runs=[run])
    pages = [p for p in written if p.suffix == ".html"]
    assert pages
    seen = False
    for page in pages:
        text = page.read_text(encoding="utf-8")
        _clean(text, str(page), MARKUP[:2] + CONTROL)  # Markdown link syntax is text in HTML
        assert 'href="javascript:' not in text.lower()
        seen = seen or "\\x1b[2J" in text
    assert seen  # the hostile text is there, shown escaped


def test_the_terminal_summary_and_compare_show_results_text_escaped(tmp_path: Path) -> None:
    results = read_results(_hostile_results(tmp_path))
    lines = summary_lines(results)
    for line in lines:
        _clean(line, "terminal summary", CONTROL)
        assert "\n" not in line
    assert any("data version v1=HYPERLINK" in line for line in lines)
    for line in compare_runs(results, results, "a", "b").lines():
        _clean(line, "heron compare", CONTROL)
        assert "\n" not in line


def test_questions_csv_of_the_report_has_no_formula_cell(tmp_path: Path) -> None:
    from pytest_heron.site.report import questions_csv

    text = questions_csv(read_results(_hostile_results(tmp_path)))
    _clean(text, "questions.csv", CONTROL)
    for row in csv.reader(io.StringIO(text)):
        assert not any(c.startswith(("=", "+", "-", "@")) for c in row)
