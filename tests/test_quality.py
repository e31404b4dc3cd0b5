"""Lint, format and type checks, so the one test command covers them too."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import TEST_CACHE

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("src", "adapters", "tests", "bench", "scripts", "examples", "conftest.py")
TARGETS = [d for d in FOLDERS if (ROOT / d).exists()]
CHECKS = {
    "ruff-lint": ["ruff", "check", *TARGETS],
    "ruff-format": ["ruff", "format", "--check", *TARGETS],
    "mypy": ["mypy"],  # configured in pyproject.toml: strict, on src/pytest_heron
}


# The tools' caches live in the test cache folder, not in the checkout (a test writes only in
# its own folders); kept between runs there, so mypy stays incremental.
CACHES = {"RUFF_CACHE_DIR": TEST_CACHE / "ruff-cache", "MYPY_CACHE_DIR": TEST_CACHE / "mypy-cache"}


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_code_quality(name: str) -> None:
    env = dict(os.environ, **{key: str(path) for key, path in CACHES.items()})
    done = subprocess.run(
        [sys.executable, "-m", *CHECKS[name]],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )
    assert done.returncode == 0, f"{name} failed:\n{done.stdout}\n{done.stderr}"
