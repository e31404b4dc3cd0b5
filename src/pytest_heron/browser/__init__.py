"""The benchmark in the browser: a runner page on PGlite (PostgreSQL 16 in WebAssembly).

``heron runner --out DIR`` writes the page folder (:func:`build_runner`, in :mod:`.build`): the
page and its modules (``assets/``), PGlite and libpg-query vendored from npm (:mod:`.vendor`) and
the tiny state of seed 42 as compressed COPY files from the generator (:mod:`.data`).
``assets/compare.js`` is the comparator ported to JavaScript; ``assets/guard.js`` is the
statement guard on PostgreSQL 16's own parser (libpg-query's WebAssembly build, the parser pglast
gives the Python guard). The shared case files in tests/data/ and property tests keep each in
agreement with the Python one.
"""

from __future__ import annotations

from pytest_heron.browser.build import build_runner

__all__ = ["build_runner"]
