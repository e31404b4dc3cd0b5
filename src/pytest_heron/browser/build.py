"""``build_runner``: the runner page folder (runner.html and everything it loads).

Layout of the folder::

    runner.html            the page (plain HTML; no external resources)
    assets/*.js            the page's modules: runner, database worker, comparator, guard, state
    pglite/                PGlite 0.2.17, vendored from npm (see :mod:`.vendor`)
    libpg-query/           the guard's parser: libpg-query 16.7.3 (PostgreSQL 16's parser in
                           WebAssembly), vendored from npm the same way
    state/                 schema.sql, constraints.sql, data/*.copy.gz, state.json (:mod:`.data`)
    benchmark.json         the questions (public fields and gold SQL), the agent's prompts and
                           tool schemas (taken from :mod:`pytest_heron.systems.agent`), limits

The same inputs give the same bytes: files are written in a fixed order, JSON with sorted keys,
gzip without times.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

from pytest_heron import __version__
from pytest_heron.browser import data, vendor
from pytest_heron.compare import order_keys
from pytest_heron.core.paths import cache_dir
from pytest_heron.dataset import load_questions, questions_digest
from pytest_heron.generate import load_bundle
from pytest_heron.systems import (
    AGENT_SYSTEM,
    CELL_CHARS,
    DEFAULT_MAX_TOKENS,
    MAX_AGENT_CALLS,
    NOTHING_RAN,
    NUDGE,
    PREVIEW_ROWS,
    TOOLS,
    AgentAdapter,
    catalogue,
)

ASSETS = ("compare.js", "guard.js", "runner.css", "runner.js", "state.js", "wire.js", "worker.js")
PAGE = "runner.html"
Progress = Callable[[str], None]


def benchmark_document(scale: str, seed: int) -> dict[str, Any]:
    """What the page needs to run the agent loop and score it, from the Python modules."""
    bundle = load_bundle()
    tables = sorted(bundle.tables)
    schemas, table_lines = catalogue(bundle.ddl, tables)
    gold = load_questions()
    questions = []
    for q in gold:
        order = order_keys(q.gold_sql)
        questions.append(
            {
                "id": q.id,
                "question": q.question,
                "gold_sql": q.gold_sql,
                "order": None if order is None else list(order),
                "shape": q.shape,
                "retrieval": q.retrieval,
                "traps": list(q.traps),
                "gold_tables": list(q.gold_tables),
            }
        )
    return {
        "heron_version": __version__,
        "scale": scale,
        "seed": seed,
        "data_version": bundle.data_version,
        "board_eligible": False,
        "postgres_version": f"16.4 (PGlite {vendor.PGLITE_VERSION})",
        "questions_digest": questions_digest({q.id: q for q in sorted(gold, key=lambda q: q.id)}),
        "agent": {
            "name": AgentAdapter.name,
            "version": AgentAdapter.version,
            "system": AGENT_SYSTEM.format(schemas=schemas, tables=table_lines),
            "nudge": NUDGE,
            "nothing_ran": NOTHING_RAN,
            "tools": TOOLS,
            "max_calls": MAX_AGENT_CALLS,
            "max_tokens": DEFAULT_MAX_TOKENS,
            "mode": "tools",
            "preview_rows": PREVIEW_ROWS,
            "cell_chars": CELL_CHARS,
        },
        "tables": tables,
        "questions": questions,
    }


def build_runner(
    out: Path,
    *,
    scale: str = "tiny",
    seed: int = 42,
    cache: Path | None = None,
    progress: Progress | None = None,
) -> Path:
    """Write the runner folder into ``out`` (emptied first); returns the path of runner.html."""
    say = progress or (lambda _msg: None)
    if out.exists():
        shutil.rmtree(out)
    (out / "assets").mkdir(parents=True)
    source = resources.files("pytest_heron.browser") / "assets"
    for name in ASSETS:
        (out / "assets" / name).write_bytes((source / name).read_bytes())
    (out / PAGE).write_bytes((source / PAGE).read_bytes())
    for package in vendor.PACKAGES:
        say(f"vendoring {package.spec}")
        tgz = vendor.fetch(package, (cache or cache_dir()) / "browser")
        vendor.unpack(package, tgz, out / package.folder)
    say(f"writing the {scale} state of seed {seed}")
    data.write_state(out / "state", scale, seed, say)
    doc = benchmark_document(scale, seed)
    text = json.dumps(doc, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    (out / "benchmark.json").write_text(text, encoding="utf-8")
    return out / PAGE
