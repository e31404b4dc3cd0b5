"""The state the runner loads: the DDL and each table as gzip-compressed COPY text.

The bytes come from the generator itself (``Generator.chunk`` and ``copytext.encode``, as
``heron seed`` sends them), so PGlite ends up holding exactly what ``heron checksum`` describes
for the same scale and seed. gzip is written without a file name or time: the same inputs give
the same bytes.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytest_heron.dataset import split_statements
from pytest_heron.generate import CHUNK_ROWS, Generator, encode, load_bundle

Progress = Callable[[str], None]


def constraint_statements() -> list[str]:
    """Section 2 of every module's DDL (keys, indexes, foreign keys), one statement each."""
    out = []
    for module in load_bundle().modules:
        for raw in split_statements(module.ddl_constraints):
            out.append(" ".join(raw.split()) + ";")
    return out


def write_state(
    out: Path, scale: str, seed: int, progress: Progress | None = None
) -> dict[str, Any]:
    """Write ``schema.sql``, ``constraints.sql`` and ``data/*.copy.gz`` into ``out``; returns the
    manifest (also written as ``state.json``) the page reads."""
    say = progress or (lambda _msg: None)
    bundle = load_bundle()
    gen = Generator(bundle, scale, seed)
    data = out / "data"
    data.mkdir(parents=True, exist_ok=True)
    (out / "schema.sql").write_text(bundle.ddl, encoding="utf-8")
    (out / "constraints.sql").write_text("\n".join(constraint_statements()) + "\n", "utf-8")
    tables = []
    counts = gen.row_counts()
    for fq in sorted(counts):
        spec = bundle.table(fq)
        n = counts[fq]
        raw = b"".join(
            encode(gen.chunk(fq, lo, min(n, lo + CHUNK_ROWS))) for lo in range(0, n, CHUNK_ROWS)
        )
        name = f"data/{fq}.copy.gz"
        packed = gzip.compress(raw, compresslevel=9, mtime=0)
        (out / name).write_bytes(packed)
        tables.append(
            {
                "table": fq,
                "columns": list(spec.column_names),
                "rows": n,
                "file": name,
                "bytes": len(raw),
                "gzip_bytes": len(packed),
            }
        )
        say(f"{fq}: {n:,} rows")
    manifest = {
        "scale": scale,
        "seed": seed,
        "data_version": bundle.data_version,
        "schemas": [m.name for m in bundle.modules],
        "rows": sum(counts.values()),
        "tables": tables,
    }
    (out / "state.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n", "utf-8")
    return manifest
