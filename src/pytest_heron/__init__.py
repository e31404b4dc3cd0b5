"""pytest-heron: a text-to-SQL benchmark on a production-shaped PostgreSQL 16 schema.

The public API for adapter authors is re-exported here; everything else is internal.
"""

from __future__ import annotations

from pytest_heron.core.errors import AdapterError, HeronError, OutOfTime
from pytest_heron.core.types import (
    DEFAULT_STATEMENT_TIMEOUT_S,
    DEFAULT_TIMEOUT_S,
    Adapter,
    BenchmarkContext,
    Prediction,
    Question,
)

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_STATEMENT_TIMEOUT_S",
    "DEFAULT_TIMEOUT_S",
    "Adapter",
    "AdapterError",
    "BenchmarkContext",
    "HeronError",
    "OutOfTime",
    "Prediction",
    "Question",
    "__version__",
]
