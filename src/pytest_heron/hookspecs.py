"""Hook specifications pytest-heron adds to pytest."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.hookspec(firstresult=True)
def pytest_heron_make_adapter(config: pytest.Config, name: str) -> Any:
    """Return an adapter (an instance, a class or a factory) for ``--heron-adapter=name``, or
    None to let the next lookup step try. Implement it in a conftest.py to provide an adapter
    without packaging an entry point."""
