"""The deterministic data generator: specs in ``heron_data`` in, COPY text out.

``(scale, seed)`` fixes every byte: values are pure functions of ``(seed, table, column, row)``
(see :mod:`.streams`), so the result does not depend on chunking, process count or machine.

Importing this package is cheap: :func:`load_bundle` needs only the spec reader, and the
generator itself (numpy) is imported on first use of :class:`Generator` or :class:`Col`, so a
run whose states are already seeded never loads it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pytest_heron.generate.spec import Bundle, load_bundle

if TYPE_CHECKING:
    from pytest_heron.generate.columns import Col, Generator

__all__ = ["Bundle", "Col", "Generator", "load_bundle"]


def __getattr__(name: str) -> Any:
    if name in ("Col", "Generator"):
        from pytest_heron.generate import columns

        return getattr(columns, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
