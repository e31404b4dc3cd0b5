"""The deterministic data generator: specs in ``heron_data`` in, COPY text out.

``(scale, seed)`` fixes every byte: values are pure functions of ``(seed, table, column, row)``
(see :mod:`.streams`), so the result does not depend on chunking, process count or machine.

Importing this package is cheap: :func:`load_bundle` needs only the spec reader, and the
generator itself (numpy) is imported on first use of :class:`Generator` or :class:`Col`, so a
run whose states are already seeded never loads it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_heron.generate.spec import Bundle, load_bundle

if TYPE_CHECKING:
    from pytest_heron.generate.columns import Col, Generator

__all__ = ["Bundle", "Col", "Generator", "load_bundle"]

from typing import TYPE_CHECKING

from pytest_heron.core.door import opener

# The door: what other stages may import from this one, each name loaded on first use
# (tests/test_layers.py holds every other stage to these names).
if TYPE_CHECKING:
    from pytest_heron.generate.citus import LAYOUTS as LAYOUTS
    from pytest_heron.generate.columns import Col as Col
    from pytest_heron.generate.columns import Generator as Generator
    from pytest_heron.generate.copytext import encode as encode
    from pytest_heron.generate.ddl import ddl_script as ddl_script
    from pytest_heron.generate.load import CHUNK_ROWS as CHUNK_ROWS
    from pytest_heron.generate.load import SeedResult as SeedResult
    from pytest_heron.generate.load import seed_database as seed_database
    from pytest_heron.generate.streams import integers as integers
    from pytest_heron.generate.streams import stream_key as stream_key

_DOOR = {
    "CHUNK_ROWS": "load",
    "Col": "columns",
    "Generator": "columns",
    "LAYOUTS": "citus",
    "SeedResult": "load",
    "ddl_script": "ddl",
    "encode": "copytext",
    "integers": "streams",
    "seed_database": "load",
    "stream_key": "streams",
}
__getattr__ = opener(globals(), _DOOR)
