"""Seed one PostgreSQL database: DDL, COPY of every table, constraints and indexes, ANALYZE."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from functools import cache

import psycopg
from psycopg import sql

from pytest_heron.generate.columns import Generator
from pytest_heron.generate.copytext import encode
from pytest_heron.generate.spec import load_bundle

CHUNK_ROWS = 50_000
Progress = Callable[[str], None]


@dataclass(frozen=True)
class SeedResult:
    tables: int
    schemas: int
    rows: int
    row_counts: dict[str, int]
    seconds: float


@cache
def _generator(scale: str, seed: int) -> Generator:
    return Generator(load_bundle(), scale, seed)


def _copy_range(dsn: str, scale: str, seed: int, fq: str, start: int, stop: int) -> int:
    """Generate rows ``[start, stop)`` of a table and COPY them in (runs in any process)."""
    gen = _generator(scale, seed)
    spec = gen.bundle.table(fq)
    cols = sql.SQL(", ").join(sql.Identifier(c) for c in spec.column_names)
    target = sql.Identifier(spec.module, spec.name)
    stmt = sql.SQL("COPY {} ({}) FROM STDIN").format(target, cols)
    with (
        psycopg.connect(dsn, autocommit=True) as conn,
        conn.cursor() as cur,
        cur.copy(stmt) as copy,
    ):
        for lo in range(start, stop, CHUNK_ROWS):
            copy.write(encode(gen.chunk(fq, lo, min(stop, lo + CHUNK_ROWS))))
    return stop - start


def _tasks(gen: Generator, per_task: int) -> list[tuple[str, int, int]]:
    tasks = []
    for fq, n in gen.row_counts().items():
        for lo in range(0, n, per_task):
            tasks.append((fq, lo, min(n, lo + per_task)))
    # Largest first, so parallel workers finish together; ties broken by name for stability.
    return sorted(tasks, key=lambda t: (-(t[2] - t[1]), t[0], t[1]))


def seed_database(
    dsn: str,
    scale: str,
    seed: int,
    *,
    jobs: int = 1,
    progress: Progress | None = None,
) -> SeedResult:
    """Build the schema with data for ``(scale, seed)`` in the (empty) database ``dsn``."""
    say = progress or (lambda _msg: None)
    gen = _generator(scale, seed)
    bundle = gen.bundle
    counts = gen.row_counts()
    total = sum(counts.values())
    started = time.perf_counter()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET client_min_messages = warning")
        conn.execute(bundle.ddl)
    say(f"schema: {len(counts)} tables in {len(bundle.modules)} schemas; loading {total:,} rows")
    tasks = _tasks(gen, per_task=max(CHUNK_ROWS, 4 * CHUNK_ROWS))
    done = 0
    last = 0.0

    def report(n: int) -> None:
        nonlocal done, last
        done += n
        now = time.perf_counter()
        if now - last < 1.0 and done < total:
            return
        last = now
        elapsed = max(now - started, 1e-9)
        rate = done / elapsed
        eta = (total - done) / rate if rate > 0 else 0.0
        say(f"loaded {done:,}/{total:,} rows ({rate:,.0f} rows/s, ETA {eta:,.0f}s)")

    if jobs <= 1:
        for fq, lo, hi in tasks:
            report(_copy_range(dsn, scale, seed, fq, lo, hi))
    else:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            futures = [pool.submit(_copy_range, dsn, scale, seed, *t) for t in tasks]
            for f in futures:
                report(f.result())
    say("constraints and indexes")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET client_min_messages = warning")
        for module in bundle.modules:
            conn.execute(module.ddl_constraints)
        identity = conn.execute(
            "SELECT table_schema, table_name, column_name FROM information_schema.columns"
            " WHERE is_identity = 'YES' ORDER BY 1, 2, 3"
        ).fetchall()
        for schema, table, column in identity:
            conn.execute(
                sql.SQL(
                    "SELECT setval(pg_get_serial_sequence({}, {}), COALESCE(max({}), 0) + 1, false)"
                    " FROM {}"
                ).format(
                    sql.Literal(f"{schema}.{table}"),
                    sql.Literal(column),
                    sql.Identifier(column),
                    sql.Identifier(schema, table),
                )
            )
        say("analyze")
        conn.execute("ANALYZE")
    return SeedResult(
        tables=len(counts),
        schemas=len(bundle.modules),
        rows=total,
        row_counts=counts,
        seconds=time.perf_counter() - started,
    )
