"""The heron command: seed, ddl, checksum, compare, recall, submit, verify-submission,
leaderboard, site, runner, variants, stub-llm and seal."""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_heron import __version__
from pytest_heron.core.errors import HeronError
from pytest_heron.core.safe_text import printable
from pytest_heron.generate import LAYOUTS
from pytest_heron.options import SCALES

if TYPE_CHECKING:  # psycopg and the server code load only for a command that needs a server
    from pytest_heron.database import Server


def _say(msg: str) -> None:
    print(f"heron: {msg}", file=sys.stderr, flush=True)


def _server(dsn: str | None) -> Server:
    from pytest_heron.database import embedded, from_dsn

    return from_dsn(dsn) if dsn else embedded()


def _seed(args: argparse.Namespace) -> int:
    from pytest_heron.database import ensure_state, redacted

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
    from pytest_heron.generate import ddl_script

    sys.stdout.write(ddl_script(args.layout))
    return 0


def _runner(args: argparse.Namespace) -> int:
    from pytest_heron.browser import build_runner

    page = build_runner(Path(args.out), progress=lambda msg: print(msg, file=sys.stderr))
    print(page)
    return 0


def _checksum(args: argparse.Namespace) -> int:
    import psycopg

    from pytest_heron.database import citus_state_name, state_name, table_checksums, total_line
    from pytest_heron.generate import load_bundle

    named = citus_state_name if args.layout == "citus" else state_name
    database = args.database or named(args.scale, args.seed)
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
    """Two runs side by side, paired question by question. Exit status: 0, or 1 when B's
    multi-state EX is more than ``--max-drop`` points below A's, or 2 when the runs' conditions
    differ and ``--strict`` is given (or a file cannot be read)."""
    from pytest_heron.results import compare_runs, read_results

    first, second = (read_results(Path(path)) for path in (args.a, args.b))
    comparison = compare_runs(first, second, args.a, args.b)
    for line in comparison.lines():
        print(line)
    warning = comparison.warning()
    if warning:
        print(f"warning: {warning}", file=sys.stderr)
        if args.strict:
            print("heron: refusing (--strict)", file=sys.stderr)
            return 2
    ex_a, ex_b = first.metrics.ex_multistate or 0.0, second.metrics.ex_multistate or 0.0
    if args.max_drop is not None and ex_b < ex_a - args.max_drop:
        print(
            f"heron: B's multi-state EX {ex_b:.1f}% is {ex_a - ex_b:.1f} points below A's "
            f"{ex_a:.1f}% (more than --max-drop {args.max_drop:g})",
            file=sys.stderr,
        )
        return 1
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
    from pytest_heron.dataset import load_questions
    from pytest_heron.scoring import markdown, rank_questions, recall_table
    from pytest_heron.systems import ranker

    questions = load_questions(Path(args.questions) if args.questions else None)
    if args.method == "embedding":  # minutes on a small machine: show progress
        from pytest_heron.core.progress import Steps
        from pytest_heron.systems import build_ranker, table_docs

        docs = table_docs()
        with Steps("embedding tables and questions", 2 * len(docs) + len(questions)) as steps:
            built = build_ranker("embedding", docs, steps.advance)
            rankings = rank_questions(built, questions, steps.advance)
    else:
        built = ranker(args.method)
        rankings = rank_questions(built, questions)
    rows = recall_table(questions, rankings, args.k)
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


def _submit(args: argparse.Namespace) -> int:
    from pytest_heron.board import About, write_submission
    from pytest_heron.results import read_results

    folder = write_submission(
        read_results(Path(args.results)),
        args.name,
        Path(args.out),
        about=About(
            tool=args.tool,
            tool_version=args.tool_version,
            approach=args.approach,
            contact=args.contact,
            link=args.link,
        ),
        cache=None if args.cache is None else Path(args.cache),
    )
    from pytest_heron.board import PLACEHOLDER

    text = (folder / "submission.yaml").read_text(encoding="utf-8")
    missing = [
        line.split(":", 1)[0].strip()
        for line in text.splitlines()
        if PLACEHOLDER in line and ":" in line
    ]
    if missing:
        flags = ", ".join(f"--{name.replace('_', '-')}" for name in missing)
        _say(f"wrote {folder}; {len(missing)} field(s) still say {PLACEHOLDER!r}: give {flags}")
        _say(f"and run heron submit again, then heron verify-submission {folder}")
    else:
        _say(f"wrote {folder}; check it with heron verify-submission {folder}, then open a pull")
        _say("request with the folder")
    print(folder)
    return 0


def _hidden_seed(text: str) -> int | None:
    if text == "auto":
        return None
    try:
        seed = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected auto or an integer, got {text!r}") from None
    if seed < 0:
        raise argparse.ArgumentTypeError("a seed is at least 0")
    return seed


def _verify(args: argparse.Namespace) -> int:
    from pytest_heron.board import (
        VERDICT,
        default_protocol_path,
        load_protocol,
        summary_of,
        verify,
        write_verdict,
    )
    from pytest_heron.core.safe_text import one_line
    from pytest_heron.dataset import load_questions

    folder = Path(args.folder)
    if folder.is_symlink() or not folder.is_dir():
        raise HeronError(f"{folder}: not a submission folder")
    protocol = load_protocol(Path(args.protocol) if args.protocol else default_protocol_path())
    verdict = verify(
        folder,
        protocol,
        load_questions(
            Path(args.questions) if args.questions else None, key_env=args.sealed_key_env
        ),
        hidden_seed=args.hidden_seed,
        backend=args.backend,
        dsn=args.dsn,
        progress=_say,
        questions_dir=Path(args.questions) if args.questions else None,
        replay_cache=not args.no_replay,
        variant_endpoint=args.variant_endpoint,
    )
    out = Path(args.out) if args.out else folder / VERDICT
    write_verdict(out, verdict)
    data = verdict.to_json()
    _say(one_line(summary_of(data)))
    for reason in verdict.reasons:  # may quote the submission's text: shown escaped
        print(f"  - {one_line(reason)}", file=sys.stderr)
    print(out)
    return 0 if verdict.accepted else 1


def _leaderboard(args: argparse.Namespace) -> int:
    from pytest_heron.board import build_board, check_board, write_board

    files = build_board(Path(args.submissions))
    out = Path(args.out)
    if args.check:
        differ = check_board(files, out)
        if differ:
            _say(
                f"{', '.join(differ)} differ from what {args.submissions} produces: regenerate "
                f"with `heron leaderboard {args.submissions} --out {args.out}` (never edit by hand)"
            )
            return 1
        _say(f"{out}: up to date ({len(files)} files)")
        return 0
    for path in write_board(files, out):
        print(path)
    return 0


def _site(args: argparse.Namespace) -> int:
    from pytest_heron.site import build_site, gold_rows_on_state

    if args.board is None and not args.runs and not args.runner:
        raise HeronError("heron site: give --board DIR, --runs DIR|FILE ..., --runner, or more")
    gold = None
    if args.database:

        def gold(questions: Any, runs: Any) -> Any:
            first = runs[0].results.conditions if runs else None
            scale = args.scale or (first.scale if first else "small")
            seed = args.seed if args.seed is not None else (first.seeds[0] if first else 42)
            return gold_rows_on_state(questions, scale, seed, args.dsn, _say)

    written = build_site(
        Path(args.out),
        board=None if args.board is None else Path(args.board),
        runs=[Path(p) for p in args.runs],
        questions=None if args.questions is None else Path(args.questions),
        gold=gold,
        runner=args.runner,
        progress=_say,
    )
    _say(f"wrote {len(written)} pages; open {Path(args.out) / 'index.html'}")
    print(Path(args.out) / "index.html")
    return 0


def _variants(args: argparse.Namespace) -> int:
    from pytest_heron.audit import draw_variants, json_lines
    from pytest_heron.database import ensure_state
    from pytest_heron.dataset import load_questions

    questions = load_questions(None if args.questions is None else Path(args.questions))
    if args.ids:
        wanted = args.ids.split(",")
        questions = [q for q in questions if q.id in wanted]
    seeds = [int(s) for s in args.seeds.split(",")]
    started = time.perf_counter()
    server = _server(args.dsn)
    try:
        dsns = [ensure_state(server, args.scale, s, progress=_say).admin_dsn for s in seeds]
        variants, short = draw_variants(questions, args.seed, args.count, dsns, progress=_say)
    finally:
        server.stop()
    sys.stdout.write(json_lines(variants))
    sys.stdout.flush()
    _say(
        f"{len(variants)} variants of {sum(1 for q in questions if q.parameters)} parameterised"
        f" questions, audited on {len(dsns)} states of scale {args.scale} in"
        f" {time.perf_counter() - started:.1f} s; {len(short)} question(s) short"
    )
    return 1 if short else 0


DESCRIPTION = (
    "pytest-heron's command line: seed and checksum the states, compare results files, build "
    "the results site, make and verify submissions, serve a stub LLM endpoint. The benchmark "
    "itself runs under pytest: pytest --heron-adapter=gold --heron-scale=tiny"
)


def _stub_llm(args: argparse.Namespace) -> int:
    from pytest_heron.systems import STUB_MODEL, serve

    stub = serve(args.host, args.port).start()
    print(
        f"heron stub-llm: serving {stub.url} (model {STUB_MODEL}; gold's SQL for four "
        "questions in five, SELECT 1 for the fifth); Ctrl-C stops it",
        flush=True,
    )
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        stub.stop()
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="heron", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"heron {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

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

    var = sub.add_parser(
        "variants",
        help="draw audited variants of the parameterised questions from a seed (JSON lines)",
    )
    var.add_argument("--seed", type=int, required=True, help="the variant seed")
    var.add_argument("--count", type=int, default=1, help="variants per question (default: 1)")
    var.add_argument("--scale", choices=SCALES, default="tiny", help="(default: tiny)")
    var.add_argument(
        "--seeds", default="42,43,44", help="state seeds of the audit (default: 42,43,44)"
    )
    var.add_argument("--dsn", help="a server (default: the embedded server)")
    var.add_argument("--questions", help="question folder (default: built-in)")
    var.add_argument("--ids", help="comma-separated question ids (default: all)")
    var.set_defaults(func=_variants)

    runner = sub.add_parser(
        "runner",
        help="build the browser runner page (PGlite, the tiny state of seed 42) into a folder",
    )
    runner.add_argument("--out", required=True, help="the folder to write (emptied first)")
    runner.set_defaults(func=_runner)

    stub = sub.add_parser(
        "stub-llm",
        help="serve a deterministic OpenAI-compatible endpoint (model heron-stub) until Ctrl-C, "
        "so the LLM adapters run without a key",
    )
    stub.add_argument("--port", type=int, default=8089, help="(default: 8089; 0 picks a free one)")
    stub.add_argument("--host", default="127.0.0.1", help="(default: 127.0.0.1)")
    stub.set_defaults(func=_stub_llm)

    cmp = sub.add_parser("compare", help="compare two results files question by question")
    cmp.add_argument("a", help="results file A")
    cmp.add_argument("b", help="results file B")
    cmp.add_argument(
        "--strict",
        action="store_true",
        help="refuse (exit 2) when scale, seeds, data version or question set differ",
    )
    cmp.add_argument(
        "--max-drop",
        type=float,
        metavar="POINTS",
        help="exit 1 when B's multi-state EX is more than POINTS below A's (default: never)",
    )
    cmp.set_defaults(func=_compare)

    rec = sub.add_parser("recall", help="Set-Recall@k of an offline table retrieval baseline")
    rec.add_argument("--method", choices=("bm25", "embedding"), required=True)
    rec.add_argument("--k", type=_ks, default=(5, 10, 20), help="comma-separated (default 5,10,20)")
    rec.add_argument("--json", action="store_true", help="print JSON instead of a Markdown table")
    rec.add_argument("--questions", help="a folder of question files (default: the built-in set)")
    rec.set_defaults(func=_recall)

    sub_ = sub.add_parser("submit", help="make a submission folder from a results file")
    sub_.add_argument("results", help="the results file (--heron-output) of a protocol run")
    sub_.add_argument("--name", required=True, help="the submission's folder name (a-z, 0-9, ._-)")
    sub_.add_argument("--cache", help="the run's LLM cache file to ship (default: none)")
    sub_.add_argument("--out", default="submissions", help="(default: submissions)")
    sub_.add_argument("--tool", help="tool name (default: the adapter's name)")
    sub_.add_argument("--tool-version", help="tool version (default: the adapter's version)")
    sub_.add_argument("--approach", help="the approach in one line (default: a placeholder)")
    sub_.add_argument("--contact", help="who to ask (default: a placeholder)")
    sub_.add_argument("--link", help="the tool's or paper's address (default: a placeholder)")
    sub_.set_defaults(func=_submit)

    ver = sub.add_parser(
        "verify-submission", help="re-execute a submission's SQL and write its verdict"
    )
    ver.add_argument("folder", help="the submission folder")
    ver.add_argument(
        "--hidden-seed",
        type=_hidden_seed,
        default=None,
        help="seed of the extra state: auto draws one from the OS's randomness (default: auto)",
    )
    ver.add_argument("--out", help="where the verdict goes (default: FOLDER/verdict.json)")
    ver.add_argument(
        "--variant-endpoint",
        help="an endpoint to run the submitted system on unseen variants at the hidden seed "
        "(default: none; the verdict says the variant check was not run)",
    )
    ver.add_argument("--protocol", help="the board protocol file (default: board/protocol.yaml)")
    ver.add_argument(
        "--questions", help="the question set the run used (default: the built-in set)"
    )
    ver.add_argument("--backend", default="auto", choices=("auto", "embedded", "docker", "dsn"))
    ver.add_argument("--dsn", help="a PostgreSQL server for the states (default: none)")
    ver.add_argument(
        "--no-replay",
        action="store_true",
        help="do not replay a shipped LLM cache with the installed adapter (tokens and cost then "
        "stay 'as reported')",
    )
    ver.add_argument("--sealed-key-env", help="with a sealed --questions: the key's variable")
    ver.set_defaults(func=_verify)
    from pytest_heron.audit import add_seal_parser

    add_seal_parser(sub)

    board = sub.add_parser("leaderboard", help="the board from accepted submissions")
    board.add_argument("submissions", help="the folder of submission folders")
    board.add_argument("--out", default="board", help="(default: board)")
    board.add_argument("--check", action="store_true", help="exit 1 when the files in --out differ")
    board.set_defaults(func=_leaderboard)

    site = sub.add_parser("site", help="a static results site: board, runs, questions, schema")
    site.add_argument("--board", help="the board folder with leaderboard.json (default: none)")
    site.add_argument(
        "--runs",
        nargs="+",
        default=[],
        metavar="DIR|FILE",
        help="results files, or folders of them (*.json, */results.json) (default: none)",
    )
    site.add_argument("--out", required=True, help="the folder to write the site into")
    site.add_argument("--questions", help="a folder of question files (default: the built-in set)")
    site.add_argument(
        "--database",
        action="store_true",
        help="run gold on the first state to show its first rows (the embedded server or "
        "--dsn; the state is built when missing) (default: not computed)",
    )
    site.add_argument("--dsn", help="with --database: the PostgreSQL server (default: embedded)")
    site.add_argument(
        "--scale",
        choices=SCALES,
        help="with --database: the state's scale (default: the first run's, else small)",
    )
    site.add_argument(
        "--seed",
        type=int,
        help="with --database: the state's seed (default: the first run's first seed, else 42)",
    )
    site.add_argument(
        "--runner",
        action="store_true",
        help="add the in-browser runner (PGlite, the tiny state of seed 42) under OUT/runner/ "
        "(default: not built; needs npm the first time)",
    )
    site.set_defaults(func=_site)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "checksum" and args.scale and args.seed is None:
        parser.error("checksum --scale needs --seed")
    if args.command == "variants" and not 1 <= args.count <= 100:
        parser.error("--count must be 1 to 100")
    if args.command == "seed" and args.jobs < 1:
        parser.error("--jobs must be at least 1")
    try:
        return int(args.func(args))
    except HeronError as exc:  # may quote a file from elsewhere: shown escaped
        print(f"heron: error: {printable(str(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("heron: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
