"""The examples in public docstrings are true."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "pytest_heron.metrics",
    "pytest_heron.generate.streams",
    "pytest_heron.generate.citus",
    "pytest_heron.llm",
    "pytest_heron.llm_cache",
    "pytest_heron.pricing",
    "pytest_heron.extract",
    "pytest_heron.backends",
    "pytest_heron.catalogue",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name))
    assert result.attempted > 0 and result.failed == 0
