"""The README's Quick start is two commands, and CI runs the second one verbatim."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _quick_start() -> list[str]:
    text = (ROOT / "README.md").read_text()
    block = re.search(r"^## Quick start\n.*?^```\n(.*?)^```", text, re.S | re.M)
    assert block, "README.md has no '## Quick start' section with a fenced block"
    return [line for line in block.group(1).splitlines() if line.strip()]


def test_quick_start_has_exactly_two_commands() -> None:
    commands = _quick_start()
    assert len(commands) == 2
    assert "--heron-adapter=gold" in commands[0]


def test_ci_runs_the_readme_test_command() -> None:
    assert _quick_start()[1] in (ROOT / ".ci" / "run").read_text()
