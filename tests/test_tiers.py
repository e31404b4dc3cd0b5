"""Every board row says how it was checked, and only rows re-run on unseen questions are ranked
(issue 41, item 4). The verdicts are written here field by field (their SQL is not under test),
so the board, its four files and the site's reading of it are checked without a server."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from pytest_heron.board.leaderboard import build_board, write_board
from pytest_heron.board.submission import DIGEST, VERDICT, content_names, folder_digest
from pytest_heron.board.tiers import REEXECUTED, REPLAYED, RERUN, tier
from pytest_heron.site.inputs import read_board

ROOT = Path(__file__).resolve().parents[1]


def _accepted(submissions: Path, name: str, ex: float, **checks: Any) -> None:
    folder = submissions / name
    folder.mkdir(parents=True)
    (folder / "predictions.jsonl").write_text("")
    digest = folder_digest(folder, content_names(folder))
    (folder / DIGEST).write_text(digest + "\n")
    verdict = {
        "format": 1,
        "submission": name,
        "digest": digest,
        "accepted": True,
        "reasons": [],
        "reproduced": {"ex_multistate": ex, "ex1": ex, "errors": 0},
        "correct": {"q1": ex > 50, "q2": ex > 90},
        "meta": {"tool": name, "tool_version": "1", "conditions": {"adapter": "raw-llm"}},
        "replay": None,
        "variants": {"status": "not run", "detail": "no endpoint"},
        **checks,
    }
    (folder / VERDICT).write_text(json.dumps(verdict))


def _board(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    submissions = tmp_path / "submissions"
    # the strongest figure is only re-executed, the next only replayed: neither is ranked
    _accepted(submissions, "pasted", 99.0)
    _accepted(submissions, "transcript", 95.0, replay={"status": "confirmed", "detail": "ok"})
    _accepted(submissions, "variants", 60.0, variants={"status": "run", "detail": "ran"})
    _accepted(submissions, "sealed", 70.0, sealed={"status": "run", "detail": "ran"})
    return submissions, build_board(submissions)


def test_only_rows_re_run_on_unseen_questions_are_ranked_the_rest_beneath(
    tmp_path: Path,
) -> None:
    _, files = _board(tmp_path)
    rows = json.loads(files["leaderboard.json"])["rows"]
    assert [(r["name"], r["rank"], r["tier"]) for r in rows] == [
        ("sealed", 1, RERUN),
        ("variants", 2, RERUN),
        ("pasted", None, REEXECUTED),
        ("transcript", None, REPLAYED),
    ]
    assert rows[1]["mcnemar_p"] is not None and rows[2]["mcnemar_p"] is None
    md = files["leaderboard.md"]
    assert "| rank | checked by | tool |" in md
    assert f"| 1 | {RERUN} | [sealed]" in md and f"| — | {REEXECUTED} | [pasted]" in md
    assert f"| — | {REPLAYED} | [transcript]" in md
    table = list(csv.DictReader(io.StringIO(files["leaderboard.csv"])))
    assert [(r["rank"], r["tier"], r["name"]) for r in table] == [
        ("1", RERUN, "sealed"),
        ("2", RERUN, "variants"),
        ("", REEXECUTED, "pasted"),
        ("", REPLAYED, "transcript"),
    ]


def test_the_site_reads_and_shows_each_rows_tier(tmp_path: Path) -> None:
    from pytest_heron.site import build_site

    _, files = _board(tmp_path)
    write_board(files, tmp_path / "board")
    board = read_board(tmp_path / "board")
    assert [(r.name, r.rank, r.tier) for r in board.rows] == [
        ("sealed", 1, RERUN),
        ("variants", 2, RERUN),
        ("pasted", None, REEXECUTED),
        ("transcript", None, REPLAYED),
    ]
    build_site(tmp_path / "site", board=tmp_path / "board")
    page = (tmp_path / "site" / "index.html").read_text()
    body = page.split('<table class="data sortable" id="board">', 1)[1].split("</table>", 1)[0]
    cells = [line for line in body.splitlines() if line.startswith('<td class="tier">')]
    assert cells == [f'<td class="tier">{t}</td>' for t in (RERUN, RERUN, REEXECUTED, REPLAYED)]
    assert ">—</td>" in body


def test_the_committed_reference_row_names_its_tier() -> None:
    rows = json.loads((ROOT / "board" / "leaderboard.json").read_text())["rows"]
    assert [(r["name"], r["reference"], r["rank"], r["tier"]) for r in rows] == [
        ("gold", True, None, REEXECUTED)
    ]


def test_a_verdict_without_the_fields_is_re_executed() -> None:
    assert tier({"replay": "confirmed", "variants": ["run"]}) == REEXECUTED
    assert tier({"variants": {"status": "failed"}, "sealed": {"status": "not run"}}) == REEXECUTED
