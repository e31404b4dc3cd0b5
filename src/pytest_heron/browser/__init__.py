"""The benchmark in the browser: a runner page on PGlite (PostgreSQL 16 in WebAssembly).

``assets/`` holds the page's JavaScript: ``compare.js`` is the comparator of
:mod:`pytest_heron.compare` ported to the browser (tests/data/compare_cases.json and a property
test keep the two in agreement).
"""

from __future__ import annotations
