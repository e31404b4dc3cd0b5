"""Repository-wide pytest configuration: what every pytest run started in this checkout needs.

It only keeps collection to the folders that hold tests. The test suite's own settings (its
cache folder, fixtures, servers) live in ``tests/conftest.py`` and apply to the test suite alone;
nothing here changes a benchmark run (``pytest --heron-adapter=...`` in the clone behaves as it
does in any other project).
"""

from __future__ import annotations

# Folders of the checkout that hold no tests: scripts, benchmarks, data and published files are
# never imported by collection, even when pytest is pointed at the repository root.
collect_ignore = [
    "adapters",
    "bench",
    "board",
    "docs",
    "heron_data",
    "scripts",
    "src",
    "submissions",
]
