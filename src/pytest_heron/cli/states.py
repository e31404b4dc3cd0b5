"""The ``heron`` commands on database states: ``seed``, ``ddl``, ``checksum`` and ``dsn``
(registered on the parser by :func:`add_state_commands`; :mod:`pytest_heron.cli` has the rest),
and the state and adapter process that ``heron recall --adapter`` asks (:func:`adapter_tables`)."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pytest_heron.core.errors import HeronError
from pytest_heron.generate import LAYOUTS
from pytest_heron.options import SCALES

if TYPE_CHECKING:  # psycopg and the server code load only for a command that needs a server
    from pytest_heron.database import Server
    from pytest_heron.dataset import GoldQuestion


def say(msg: str) -> None:
    print(f"heron: {msg}", file=sys.stderr, flush=True)


def server_for(dsn: str | None) -> Server:
    from pytest_heron.database import embedded, from_dsn

    return from_dsn(dsn) if dsn else embedded()


def _seed(args: argparse.Namespace) -> int:
    from pytest_heron.database import ensure_state, redacted

    started = time.perf_counter()
    server = server_for(args.dsn)
    try:
        state = ensure_state(
            server,
            args.scale,
            args.seed,
            jobs=args.jobs,
            progress=say,
            database=args.database,
            replace=args.replace,
            layout=args.layout,
        )
    finally:
        server.stop()
    print(
        json.dumps(
            {
                "database": state.database,
                "dsn": redacted(state.admin_dsn),
                "tables": state.manifest.get("tables"),
                "schemas": state.manifest.get("schemas"),
                "rows": state.manifest.get("rows"),
                "seconds": round(time.perf_counter() - started, 3),
            }
        )
    )
    return 0


def _ddl(args: argparse.Namespace) -> int:
    from pytest_heron.generate import ddl_script

    sys.stdout.write(ddl_script(args.layout))
    return 0


def _checksum(args: argparse.Namespace) -> int:
    import psycopg

    from pytest_heron.database import citus_state_name, state_name, state_report
    from pytest_heron.generate import load_bundle

    named = citus_state_name if args.layout == "citus" else state_name
    database = args.database or named(args.scale, args.seed)
    server = server_for(args.dsn)
    try:
        with psycopg.connect(server.admin_dsn, autocommit=True) as conn:
            found = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (database,))
            if found.fetchone() is None:
                raise HeronError(
                    f"database {database!r} does not exist on the server; build it first with "
                    f"heron seed --scale {args.scale or '...'} --seed {args.seed or '...'}"
                )
        schemas = [m.name for m in load_bundle().modules]
        lines, note = state_report(server.dsn(database), schemas)
        print("\n".join(lines))
        if note:
            say(note)
    finally:
        server.stop()
    return 0


def _dsn(args: argparse.Namespace) -> int:
    """A read-only DSN of a state (its scoring role: SELECT only, read-only transactions), in
    the form asked; the embedded server is kept up until Ctrl-C, so the DSN stays usable."""
    from pytest_heron.core.conninfo import parts, url
    from pytest_heron.database import ensure_state

    server = server_for(args.dsn)
    try:
        state = ensure_state(server, args.scale, args.seed, progress=say, layout=args.layout)
        dsn = state.reader_dsn
        forms = {"libpq": dsn, "url": url(dsn), "parts": json.dumps(parts(dsn))}
        print(forms[args.form], flush=True)
        if server.kind == "embedded":
            say("heron dsn: the embedded server stays up while this runs; Ctrl-C stops it")
            wait_for_interrupt()
    finally:
        server.stop()
    return 0


def wait_for_interrupt() -> None:
    with contextlib.suppress(KeyboardInterrupt):
        threading.Event().wait()


def adapter_tables(
    spec: str,
    questions: Sequence[GoldQuestion],
    scale: str,
    seed: int,
    dsn: str | None,
    timeout_s: float,
) -> tuple[dict[str, tuple[list[str] | None, list[str] | None]], int]:
    """Ask an adapter (in a process of its own, as a run does) every question on the state
    ``scale``/``seed``, keeping only the tables it reports (``tables_ranked``, the context): no
    SQL is needed. Returns them by question id, and how many questions failed."""
    from pytest_heron.core.types import BenchmarkContext, Limits
    from pytest_heron.database import ensure_state
    from pytest_heron.generate import load_bundle
    from pytest_heron.sandbox import release_adapters
    from pytest_heron.systems import open_system, reported_tables

    reported: dict[str, tuple[list[str] | None, list[str] | None]] = {}
    failures = 0
    server = server_for(dsn)
    try:
        state = ensure_state(server, scale, seed, progress=say, adapter=True)
        bundle = load_bundle()
        ctx = BenchmarkContext(
            dsn=state.adapter_dsn or "",
            dialect="postgres",
            scale=scale,
            seed=seed,
            schema_ddl=bundle.ddl,
            tables=tuple(sorted(bundle.tables)),
            limits=Limits(timeout_s=timeout_s),
            data_version=bundle.data_version,
        )
        system = open_system(spec, timeout_s=timeout_s)
        try:
            system.ready(ctx)
            for q in questions:
                try:
                    reported[q.id] = reported_tables(system.ask(q, timeout_s, None))
                except Exception as exc:  # one question's failure, as in a run
                    failures += 1
                    say(f"{q.id}: {type(exc).__name__}: {exc}"[:300])
        finally:
            system.close()
    finally:
        release_adapters()
        server.stop()
    return reported, failures


def add_state_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The state commands' parsers, in the order ``heron --help`` lists them."""
    seed = sub.add_parser("seed", help="build one seeded database state")
    seed.add_argument("--scale", choices=SCALES, required=True)
    seed.add_argument("--seed", type=int, required=True)
    seed.add_argument("--dsn", help="a server to build on (default: the embedded server)")
    seed.add_argument(
        "--database",
        help="database name (default: heron_<scale>_<seed>_<ver>, with _citus after it for"
        " --layout citus)",
    )
    seed.add_argument("--jobs", type=int, default=1, help="parallel load processes (default: 1)")
    seed.add_argument("--replace", action="store_true", help="rebuild even if a valid one exists")
    seed.add_argument(
        "--layout",
        choices=LAYOUTS,
        default="standard",
        help="key layout; citus: composite (tenant_id, id) keys, tables distributed by tenant_id,"
        " on a Citus coordinator (--dsn); a missing database is created on every node"
        " (default: standard)",
    )
    seed.set_defaults(func=_seed)

    ddl = sub.add_parser("ddl", help="print the schema of a key layout as a psql script")
    ddl.add_argument("--layout", choices=LAYOUTS, default="standard", help="(default: standard)")
    ddl.set_defaults(func=_ddl)

    check = sub.add_parser("checksum", help="per-table SHA-256 of a seeded database")
    check.add_argument("--dsn", help="the server (default: the embedded server)")
    target = check.add_mutually_exclusive_group(required=True)
    target.add_argument("--database", help="the database to checksum")
    target.add_argument("--scale", choices=SCALES, help="with --seed: the state's database")
    check.add_argument("--seed", type=int)
    check.add_argument(
        "--layout",
        choices=LAYOUTS,
        default="standard",
        help="with --scale: the state of this key layout (default: standard)",
    )
    check.set_defaults(func=_checksum)

    dsn = sub.add_parser("dsn", help="a read-only DSN of a seeded state, to look at it by hand")
    dsn.add_argument("--scale", choices=SCALES, required=True)
    dsn.add_argument("--seed", type=int, required=True)
    dsn.add_argument("--layout", choices=LAYOUTS, default="standard")
    dsn.add_argument("--dsn", help="the server (default: the embedded server, kept up)")
    dsn.add_argument(
        "--form",
        choices=("libpq", "url", "parts"),
        default="libpq",
        help="key=value, a postgresql:// URL, or the parts as JSON (default: libpq)",
    )
    dsn.set_defaults(func=_dsn)
