"""The ``heron`` command: ``heron seed`` and ``heron checksum``."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence

from pytest_heron.backends import Server, embedded, from_dsn
from pytest_heron.errors import HeronError
from pytest_heron.options import SCALES


def _say(msg: str) -> None:
    print(f"heron: {msg}", file=sys.stderr, flush=True)


def _server(dsn: str | None) -> Server:
    return from_dsn(dsn) if dsn else embedded()


def _seed(args: argparse.Namespace) -> int:
    from pytest_heron.states import ensure_state

    started = time.perf_counter()
    server = _server(args.dsn)
    try:
        state = ensure_state(
            server,
            args.scale,
            args.seed,
            jobs=args.jobs,
            progress=_say,
            database=args.database,
            replace=args.replace,
        )
    finally:
        server.stop()
    print(
        json.dumps(
            {
                "database": state.database,
                "dsn": state.admin_dsn,
                "tables": state.manifest.get("tables"),
                "schemas": state.manifest.get("schemas"),
                "rows": state.manifest.get("rows"),
                "seconds": round(time.perf_counter() - started, 3),
            }
        )
    )
    return 0


def _checksum(args: argparse.Namespace) -> int:
    import psycopg

    from pytest_heron.checksum import table_checksums, total_line
    from pytest_heron.generate import load_bundle
    from pytest_heron.states import state_name

    database = args.database or state_name(args.scale, args.seed)
    server = _server(args.dsn)
    try:
        with psycopg.connect(server.admin_dsn, autocommit=True) as conn:
            found = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (database,))
            if found.fetchone() is None:
                raise HeronError(
                    f"database {database!r} does not exist on the server; build it first with "
                    f"heron seed --scale {args.scale or '...'} --seed {args.seed or '...'}"
                )
        schemas = [m.name for m in load_bundle().modules]
        lines = []
        for name, rows, sha in table_checksums(server.dsn(database), schemas):
            lines.append((name, rows, sha))
            print(f"{name}\t{rows}\t{sha}", flush=True)
        name, rows, sha = total_line(lines)
        print(f"{name}\t{rows}\t{sha}")
    finally:
        server.stop()
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="heron", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    seed = sub.add_parser("seed", help="build one seeded database state")
    seed.add_argument("--scale", choices=SCALES, required=True)
    seed.add_argument("--seed", type=int, required=True)
    seed.add_argument("--dsn", help="a server to build on (default: the embedded server)")
    seed.add_argument("--database", help="database name (default: heron_<scale>_<seed>_<ver>)")
    seed.add_argument("--jobs", type=int, default=1, help="parallel load processes (default: 1)")
    seed.add_argument("--replace", action="store_true", help="rebuild even if a valid one exists")
    seed.set_defaults(func=_seed)

    check = sub.add_parser("checksum", help="per-table SHA-256 of a seeded database")
    check.add_argument("--dsn", help="the server (default: the embedded server)")
    target = check.add_mutually_exclusive_group(required=True)
    target.add_argument("--database", help="the database to checksum")
    target.add_argument("--scale", choices=SCALES, help="with --seed: the state's database")
    check.add_argument("--seed", type=int)
    check.set_defaults(func=_checksum)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "checksum" and args.scale and args.seed is None:
        parser.error("checksum --scale needs --seed")
    if args.command == "seed" and args.jobs < 1:
        parser.error("--jobs must be at least 1")
    try:
        return int(args.func(args))
    except HeronError as exc:
        print(f"heron: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("heron: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
