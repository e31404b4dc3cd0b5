"""Hook specifications pytest-heron adds to pytest."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.hookspec(firstresult=True)
def pytest_heron_make_adapter(config: pytest.Config, name: str) -> Any:
    """Return an adapter (an instance, a class or a factory) for ``--heron-adapter=name``, or
    None to let the next lookup step try. Implement it in a conftest.py to provide an adapter
    without packaging an entry point."""


@pytest.hookspec
def pytest_heron_results_fields(config: pytest.Config, results: Any) -> Any:
    """Return a mapping of field name to a JSON scalar (string, number, true/false, null) to add
    to the run's results file under ``"extra"``, or None. Called once on the controller, after
    the last question, with the run's :class:`pytest_heron.results.Results`; every
    implementation's fields are merged, and a name given twice is a usage error naming it. The
    fields are the plugin's: heron records them and reads them back, and never scores them."""
