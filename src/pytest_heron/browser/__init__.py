"""The benchmark in the browser: a runner page on PGlite (PostgreSQL 16 in WebAssembly).

``heron runner --out DIR`` writes the page folder (:func:`build_runner`, in :mod:`.build`): the
page and its modules (``assets/``), PGlite vendored from npm (:mod:`.vendor`) and the tiny state
of seed 42 as compressed COPY files from the generator (:mod:`.data`). ``assets/compare.js`` and
``assets/guard.js`` are the comparator and the statement guard ported to JavaScript; the shared
case files in tests/data/ and property tests keep each in agreement with the Python one.
"""

from __future__ import annotations

from pytest_heron.browser.build import build_runner

__all__ = ["build_runner"]
