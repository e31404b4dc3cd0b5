"""The deterministic data generator: specs in ``heron_data`` in, COPY text out.

``(scale, seed)`` fixes every byte: values are pure functions of ``(seed, table, column, row)``
(see :mod:`.streams`), so the result does not depend on chunking, process count or machine.
"""

from __future__ import annotations

from pytest_heron.generate.columns import Col, Generator
from pytest_heron.generate.spec import Bundle, load_bundle

__all__ = ["Bundle", "Col", "Generator", "load_bundle"]
