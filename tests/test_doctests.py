"""The examples in public docstrings are true."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "pytest_heron.scoring.metrics",
    "pytest_heron.compare.modes",
    "pytest_heron.core.door",
    "pytest_heron.generate.streams",
    "pytest_heron.generate.citus",
    "pytest_heron.systems.llm.client",
    "pytest_heron.systems.llm.cache",
    "pytest_heron.scoring.pricing",
    "pytest_heron.systems.llm.extract",
    "pytest_heron.database.server",
    "pytest_heron.dataset.catalogue",
    "pytest_heron.database.introspect",
    "pytest_heron.systems.retrieval.lexical",
    "pytest_heron.site.sqltext",
    "pytest_heron.site.charts",
    "pytest_heron.site.schema",
    "pytest_heron.site.inputs",
    "pytest_heron.site.pairing",
    "pytest_heron.site.gold",
    "pytest_heron.core.progress",
    "pytest_heron.results.comparison",
    "pytest_heron.board.replay",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name))
    assert result.attempted > 0 and result.failed == 0
