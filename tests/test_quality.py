"""Lint, format and type checks, so the one test command covers them too."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("src", "adapters", "tests", "bench", "scripts", "examples", "conftest.py")
TARGETS = [d for d in FOLDERS if (ROOT / d).exists()]
CHECKS = {
    "ruff-lint": ["ruff", "check", *TARGETS],
    "ruff-format": ["ruff", "format", "--check", *TARGETS],
    "mypy": ["mypy"],  # configured in pyproject.toml: strict, on src/pytest_heron
}


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_code_quality(name: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", *CHECKS[name]], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, f"{name} failed:\n{done.stdout}\n{done.stderr}"
