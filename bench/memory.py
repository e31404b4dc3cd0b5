"""Peak memory of generating a scale, without a server.

Runs what a seeding worker runs for every chunk (generate the rows, render the COPY text) and
throws the bytes away, in ``--jobs`` worker processes, then prints the peak resident memory of
the parent (which builds the plans) and of the largest worker. ``large`` needs ~90 GB of disk to
seed, but generating it needs none, so this shows the memory bound at every scale.

``--sample K`` renders only K chunks of each table, spread over it and always including the
last one (where per-parent offsets and keys are largest); the default renders all of them.

    python bench/memory.py --scale large --sample 4 --jobs 2
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from concurrent.futures import ProcessPoolExecutor

from pytest_heron.generate.copytext import encode
from pytest_heron.generate.load import CHUNK_ROWS, _generator


def _chunks(n: int, sample: int | None) -> list[int]:
    starts = list(range(0, n, CHUNK_ROWS))
    if sample is None or len(starts) <= sample:
        return starts
    step = (len(starts) - 1) / (sample - 1) if sample > 1 else 0
    return sorted({starts[round(i * step)] for i in range(sample)} | {starts[-1]})


def _render(scale: str, seed: int, fq: str, starts: list[int]) -> tuple[int, int, float]:
    """Rows and bytes rendered, and this worker's peak RSS in MB so far."""
    gen = _generator(scale, seed)
    n = gen.row_counts()[fq]
    rows = size = 0
    for lo in starts:
        hi = min(n, lo + CHUNK_ROWS)
        size += len(encode(gen.chunk(fq, lo, hi)))
        rows += hi - lo
    return rows, size, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", default="small")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--sample", type=int, help="chunks per table (default: all)")
    args = parser.parse_args()

    started = time.perf_counter()
    gen = _generator(args.scale, args.seed)  # plans are built here, before the workers fork
    counts = gen.row_counts()
    planned = time.perf_counter() - started
    parent_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    work = [(fq, _chunks(n, args.sample)) for fq, n in counts.items()]
    work.sort(key=lambda w: -len(w[1]))
    rows = size = 0
    worker_mb = 0.0
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(_render, args.scale, args.seed, fq, s) for fq, s in work]
        for future in futures:
            r, b, mb = future.result()
            rows, size, worker_mb = rows + r, size + b, max(worker_mb, mb)
    seconds = time.perf_counter() - started
    print(f"scale={args.scale} seed={args.seed} jobs={args.jobs} sample={args.sample or 'all'}")
    print(f"table_rows={sum(counts.values())} rendered_rows={rows} rendered_mb={size / 1e6:.0f}")
    print(f"plan_seconds={planned:.1f} seconds={seconds:.1f} rows_per_s={rows / seconds:,.0f}")
    print(f"parent_peak_rss_mb={parent_mb:.0f} worker_peak_rss_mb={worker_mb:.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
