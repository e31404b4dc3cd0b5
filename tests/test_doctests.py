"""The examples in docstrings are true: every module of the package that has one is run here
(found by scanning the source, so a new example cannot be left out of the suite)."""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
MODULES = sorted(
    ".".join(path.relative_to(SRC).with_suffix("").parts)
    for path in (SRC / "pytest_heron").rglob("*.py")
    if ">>> " in path.read_text(encoding="utf-8")
)


def test_the_scan_finds_the_modules_with_examples() -> None:
    assert len(MODULES) >= 30 and "pytest_heron.scoring.score" in MODULES


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name))
    assert result.attempted > 0 and result.failed == 0
