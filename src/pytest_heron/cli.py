"""The ``heron`` command: ``seed``, ``ddl``, ``checksum``, ``compare`` and ``recall``."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from pytest_heron.database.server import Server, embedded, from_dsn, redacted
from pytest_heron.errors import HeronError
from pytest_heron.generate.citus import LAYOUTS
from pytest_heron.options import SCALES


def _say(msg: str) -> None:
    print(f"heron: {msg}", file=sys.stderr, flush=True)


def _server(dsn: str | None) -> Server:
    return from_dsn(dsn) if dsn else embedded()


def _seed(args: argparse.Namespace) -> int:
    from pytest_heron.database.states import ensure_state

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
    from pytest_heron.generate.load import ddl_script

    sys.stdout.write(ddl_script(args.layout))
    return 0


def _checksum(args: argparse.Namespace) -> int:
    import psycopg

    from pytest_heron.database.checksum import table_checksums, total_line
    from pytest_heron.database.states import state_name
    from pytest_heron.generate import load_bundle

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


def _compare(args: argparse.Namespace) -> int:
    from pytest_heron.scoring.metrics import mcnemar_exact

    docs = []
    for path in (args.a, args.b):
        try:
            docs.append(json.loads(Path(path).read_text(encoding="utf-8")))
        except (OSError, ValueError) as exc:
            raise HeronError(f"{path}: not a readable results file ({exc})") from None
    a, b = ({q["id"]: bool(q["correct"]) for q in d.get("questions", [])} for d in docs)
    common = sorted(set(a) & set(b))
    if not common:
        raise HeronError("the two results files have no question in common")
    wins = [q for q in common if a[q] and not b[q]]
    losses = [q for q in common if b[q] and not a[q]]
    ties = len(common) - len(wins) - len(losses)
    for label, doc in (("A", docs[0]), ("B", docs[1])):
        c = doc.get("conditions", {})
        print(
            f"{label}: adapter={c.get('adapter')} model={c.get('model')} scale={c.get('scale')}"
            f" seeds={c.get('seeds')}"
            f" multi-state EX@1={doc.get('metrics', {}).get('ex_multistate')}"
        )
    print(
        f"questions compared: {len(common)} (only in A: {len(set(a) - set(b))},"
        f" only in B: {len(set(b) - set(a))})"
    )
    print(f"A right, B wrong (wins): {len(wins)} {' '.join(wins)}")
    print(f"B right, A wrong (losses): {len(losses)} {' '.join(losses)}")
    print(f"ties (both right or both wrong): {ties}")
    print(f"McNemar exact p = {mcnemar_exact(len(wins), len(losses)):.4g}")
    return 0


def _ks(text: str) -> tuple[int, ...]:
    try:
        ks = tuple(int(k) for k in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers, got {text!r}"
        ) from None
    if not ks or min(ks) < 1:
        raise argparse.ArgumentTypeError("every k must be at least 1")
    return ks


def _recall(args: argparse.Namespace) -> int:
    from pytest_heron.dataset.questions import load_questions
    from pytest_heron.scoring.recall import markdown, rank_questions, recall_table
    from pytest_heron.systems.retrieval.rankers import ranker

    questions = load_questions(Path(args.questions) if args.questions else None)
    built = ranker(args.method)
    rows = recall_table(questions, rank_questions(built, questions), args.k)
    conditions = {
        "method": args.method,
        "model": {
            "bm25": "BM25 (Lucene variant, k1 1.5, b 0.75, Snowball stems)",
            "embedding": "all-MiniLM-L6-v2 (numpy, first 256 word pieces)",
        }[args.method],
        "fields": "whole table document + qualified name, scores summed",
        "questions": len(questions),
        "tables": len(built.tables),
        "unit": "percent of gold tables in the top k, averaged over questions",
    }
    if args.json:
        print(json.dumps({"conditions": conditions, "recall": rows}, indent=2))
    else:
        print(
            f"Set-Recall@k, {conditions['model']}, {len(questions)} questions, "
            f"{conditions['tables']} tables ranked (percent of gold tables in the top k)\n"
        )
        print(markdown(rows, args.k))
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
    seed.add_argument(
        "--layout",
        choices=LAYOUTS,
        default="standard",
        help="key layout; citus: composite (tenant_id, id) keys, tables distributed by tenant_id,"
        " seeded into the existing --database on a Citus coordinator (default: standard)",
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
    check.set_defaults(func=_checksum)

    cmp = sub.add_parser("compare", help="compare two results files question by question")
    cmp.add_argument("a", help="results file A")
    cmp.add_argument("b", help="results file B")
    cmp.set_defaults(func=_compare)

    rec = sub.add_parser("recall", help="Set-Recall@k of an offline table retrieval baseline")
    rec.add_argument("--method", choices=("bm25", "embedding"), required=True)
    rec.add_argument("--k", type=_ks, default=(5, 10, 20), help="comma-separated (default 5,10,20)")
    rec.add_argument("--json", action="store_true", help="print JSON instead of a Markdown table")
    rec.add_argument("--questions", help="a folder of question files (default: the built-in set)")
    rec.set_defaults(func=_recall)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "checksum" and args.scale and args.seed is None:
        parser.error("checksum --scale needs --seed")
    if args.command == "seed" and args.jobs < 1:
        parser.error("--jobs must be at least 1")
    if args.command == "seed" and args.layout == "citus" and not args.database:
        parser.error(
            "--layout citus needs --database: an existing database prepared on the Citus"
            " coordinator and every worker (see the README, section Scales)"
        )
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
