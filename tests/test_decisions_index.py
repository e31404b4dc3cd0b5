"""DECISIONS.md's index at its top is the one scripts/decisions_index.py writes from the page's
own headings (a heading added without rerunning the script fails here, naming the command)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SPEC = importlib.util.spec_from_file_location(
    "decisions_index", ROOT / "scripts" / "decisions_index.py"
)
assert SPEC is not None and SPEC.loader is not None
script = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(script)


def test_the_index_lists_every_decision_as_the_script_writes_it() -> None:
    text = (ROOT / "DECISIONS.md").read_text(encoding="utf-8")
    assert script.START in text, "run python scripts/decisions_index.py"
    assert script.rewritten(text) == text, (
        "the index is stale: run python scripts/decisions_index.py"
    )
    rows = script.decisions(text)
    assert len(rows) == text.count("\n## ") and len(rows) > 100
    assert all(status in ("in force", "amended") for _, _, status in rows)


def test_the_index_follows_the_headings() -> None:
    page = (
        "# Decisions\n\nIntro.\n\n## 2026-01-01 — First\n\nText.\n\n"
        "## 2026-01-02 (evening): Second | piped\n\nAmended 2026-01-03: changed.\n"
    )
    once = script.rewritten(page)
    assert script.rewritten(once) == once  # rewriting is stable
    assert "| 2026-01-01 | First | in force |" in once
    assert "| 2026-01-02 (evening) | Second / piped | amended |" in once
    assert once.index(script.START) < once.index("## 2026-01-01")
    added = once + "\n## 2026-01-04 — Third\n\nNew.\n"
    assert script.rewritten(added) != added  # a new heading makes the index stale
