"""Peak Python memory of ``sandbox.execute`` on results the caps must stop, against the cap.

Runs each hostile query on the tiny state (seeded on first use) under ``--cap`` bytes and
prints, per query, the error kind, the tracemalloc peak of the execute() call (every Python
allocation it made: the raw values copied to measure them, decoded rows, the estimate's work)
and ``ratio=<peak/cap>``. The old caps counted only text and bytes, so every one of these was
decoded whole (1-2 GB at the default cap). A ratio at or under 1 means the cap bounds the
memory a prediction can make the harness hold; the last line is the worst ratio.

    HERON_CACHE_DIR=... python bench/result_memory.py [--cap 268435456] [--timeout 120]
"""

from __future__ import annotations

import argparse
import sys
import time
import tracemalloc

from pytest_heron import sandbox
from pytest_heron.database.server import embedded
from pytest_heron.database.states import ensure_state

QUERIES = {
    "one_huge_array": (
        "SELECT array_agg(g) FROM generate_series(1, 1000) g, generate_series(1, 30000)"
    ),
    "int_arrays_per_row": (
        "SELECT array(SELECT generate_series(1000, 2000)) FROM generate_series(1, 20000)"
    ),
    "numeric_arrays": (
        "SELECT array(SELECT generate_series(1, 2000)::numeric) FROM generate_series(1, 2000)"
    ),
    "jsonb_rows": (
        "SELECT jsonb_build_object('k', g, 'v', array[g, g], 'w', jsonb_build_object('x', g))"
        " FROM generate_series(1, 190000) g"
    ),
    "jsonb_document": (
        "SELECT jsonb_agg(jsonb_build_object('k', g)) FROM generate_series(1, 3000000) g"
    ),
    "wide_numeric": (
        "SELECT " + ", ".join(["g::numeric * 1.5"] * 10) + " FROM generate_series(1, 199000) g"
    ),
    "long_text": "SELECT repeat('x', 200000000)",
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cap", type=int, default=sandbox.MAX_BYTES)
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--only", nargs="*", help="names of queries to run (default: all)")
    args = parser.parse_args()
    state = ensure_state(embedded(), "tiny", 42)
    worst = 0.0
    print(f"cap={args.cap:,} bytes")
    for name, sql in QUERIES.items():
        if args.only and name not in args.only:
            continue
        tracemalloc.start()
        started = time.perf_counter()
        got = sandbox.execute(state.reader_dsn, sql, timeout_s=args.timeout, max_bytes=args.cap)
        seconds = time.perf_counter() - started
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        ratio = peak / args.cap
        worst = max(worst, ratio)
        print(
            f"{name:20} {got.error_kind or 'ok':17} rows={len(got.rows):<7}"
            f" peak_mb={peak / 1e6:7.1f} seconds={seconds:6.1f} ratio={ratio:.2f}",
            flush=True,
        )
        del got
    print(f"worst_ratio={worst:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
