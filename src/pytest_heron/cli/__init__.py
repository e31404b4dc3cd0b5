"""The heron command: seed, ddl, checksum, dsn (:mod:`.states`, the commands on database
states), compare, runs, convert, recall, submit, verify-submission, leaderboard, site, runner,
variants, stub-llm and seal."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pytest_heron import __version__
from pytest_heron.cli.states import (
    adapter_tables,
    add_state_commands,
    say,
    server_for,
    wait_for_interrupt,
)
from pytest_heron.core.errors import HeronError
from pytest_heron.core.safe_text import printable
from pytest_heron.options import SCALES


def _runner(args: argparse.Namespace) -> int:
    from pytest_heron.browser import build_runner

    page = build_runner(Path(args.out), progress=lambda msg: print(msg, file=sys.stderr))
    print(page)
    return 0


def _compare(args: argparse.Namespace) -> int:
    from pytest_heron.results import compare_command

    return compare_command(
        args.a, args.b, Path(args.rootdir), as_json=args.json, strict=args.strict,
        max_drop=args.max_drop,
    )  # fmt: skip


def _runs(args: argparse.Namespace) -> int:
    from pytest_heron.results import runs_command

    return runs_command(Path(args.rootdir), as_json=args.json)


def _convert(args: argparse.Namespace) -> int:
    from pytest_heron.dataset import load_questions
    from pytest_heron.systems import convert_command

    ids = [q.id for q in load_questions(Path(args.questions) if args.questions else None)]
    return convert_command(args.format, Path(args.file), Path(args.out) if args.out else None, ids)


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
    from pytest_heron.scoring import recall_command

    if args.adapter:
        from pytest_heron.dataset import load_questions

        questions = load_questions(Path(args.questions) if args.questions else None)
        return _recall_of_adapter(args, list(questions))
    return recall_command(args.method, args.k, args.questions, as_json=args.json)


def _recall_of_adapter(args: argparse.Namespace, questions: list[Any]) -> int:
    """``heron recall --adapter``: the adapter's reported tables, scored as Set-Recall@k."""
    from pytest_heron.scoring import markdown, reported_table

    reported, failures = adapter_tables(
        args.adapter, questions, args.scale, args.seed, args.dsn, args.timeout
    )
    rows = reported_table(questions, reported, args.k)
    ranked = sum(r[0] is not None for r in reported.values())
    conditions = {
        "adapter": args.adapter,
        "scale": args.scale,
        "seed": args.seed,
        "questions": len(questions),
        "ranked": ranked,
        "failures": failures,
        "unit": "percent of gold tables in the top k of the adapter's tables_ranked (an unranked"
        " set counts at its own size), averaged over questions",
    }
    if args.json:
        print(json.dumps({"conditions": conditions, "recall": rows}, indent=2))
    else:
        print(
            f"Set-Recall@k, adapter {args.adapter}, {len(questions)} questions ({ranked} answered "
            f"with a ranking, {failures} failed), {args.scale}/{args.seed}\n"
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
        say(f"wrote {folder}; {len(missing)} field(s) still say {PLACEHOLDER!r}: give {flags}")
        say(f"and run heron submit again, then heron verify-submission {folder}")
    else:
        say(f"wrote {folder}; check it with heron verify-submission {folder}, then open a pull")
        say("request with the folder")
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
    protocol_path = Path(args.protocol) if args.protocol else default_protocol_path()
    protocol = load_protocol(protocol_path)
    say(f"protocol: {protocol.name} ({protocol_path})")
    verdict = verify(
        folder,
        protocol,
        load_questions(
            Path(args.questions) if args.questions else None, key_env=args.sealed_key_env
        ),
        hidden_seed=args.hidden_seed,
        backend=args.backend,
        dsn=args.dsn,
        progress=say,
        questions_dir=Path(args.questions) if args.questions else None,
        replay_cache=not args.no_replay,
        variant_endpoint=args.variant_endpoint,
    )
    out = Path(args.out) if args.out else folder / VERDICT
    write_verdict(out, verdict)
    data = verdict.to_json()
    say(one_line(summary_of(data)))
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
            say(
                f"{', '.join(differ)} differ from what {args.submissions} produces: regenerate "
                f"with `heron leaderboard {args.submissions} --out {args.out}` (never edit by hand)"
            )
            return 1
        say(f"{out}: up to date ({len(files)} files)")
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
            return gold_rows_on_state(questions, scale, seed, args.dsn, say)

    written = build_site(
        Path(args.out),
        board=None if args.board is None else Path(args.board),
        runs=[Path(p) for p in args.runs],
        questions=None if args.questions is None else Path(args.questions),
        gold=gold,
        runner=args.runner,
        progress=say,
    )
    say(f"wrote {len(written)} pages; open {Path(args.out) / 'index.html'}")
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
    server = server_for(args.dsn)
    try:
        dsns = [ensure_state(server, args.scale, s, progress=say).admin_dsn for s in seeds]
        variants, short = draw_variants(questions, args.seed, args.count, dsns, progress=say)
    finally:
        server.stop()
    sys.stdout.write(json_lines(variants))
    sys.stdout.flush()
    say(
        f"{len(variants)} variants of {sum(1 for q in questions if q.parameters)} parameterised"
        f" questions, audited on {len(dsns)} states of scale {args.scale} in"
        f" {time.perf_counter() - started:.1f} s; {len(short)} question(s) short"
    )
    return 1 if short else 0


DESCRIPTION = (
    "pytest-heron's command line: seed, checksum and connect to the states, compare results "
    "files, build the results site, make and verify submissions, serve a stub LLM endpoint. The "
    "benchmark "
    "itself runs under pytest: pytest --heron-adapter=gold --heron-scale=tiny"
)


def _stub_llm(args: argparse.Namespace) -> int:
    from pytest_heron.systems import STUB_MODEL, serve

    stub = serve(args.host, args.port, cors=args.cors).start()
    print(
        f"heron stub-llm: serving {stub.url} (model {STUB_MODEL}; gold's SQL for four "
        f"questions in five, SELECT 1 for the fifth{'; CORS on' if args.cors else ''}); "
        "Ctrl-C stops it",
        flush=True,
    )
    try:
        wait_for_interrupt()
    finally:
        stub.stop()
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="heron", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"heron {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    add_state_commands(sub)

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
    stub.add_argument("--cors", action="store_true", help="send CORS headers (the browser runner)")
    stub.set_defaults(func=_stub_llm)

    cmp = sub.add_parser("compare", help="compare two runs question by question")
    for name in ("a", "b"):
        cmp.add_argument(
            name, help=f"run {name.upper()}: a results file, or a saved run's number or name"
        )
    cmp.add_argument("--json", action="store_true", help="print the comparison as JSON")
    cmp.add_argument("--rootdir", default=".", help="where .heron/runs/ is (default: .)")
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

    conv = sub.add_parser(
        "convert", help="a BIRD or Spider predictions file as heron's (--heron-predictions)"
    )
    conv.add_argument("format", choices=("bird", "spider"), help="the file's format")
    conv.add_argument("file", help="BIRD's predict_dev.json, or Spider's pred.txt")
    conv.add_argument("--out", help="the JSON-lines file to write (default: stdout)")
    conv.add_argument("--questions", help="question folder (default: built-in; its id order)")
    conv.set_defaults(func=_convert)

    runs = sub.add_parser("runs", help="list the saved runs (--heron-save), oldest first")
    runs.add_argument("--json", action="store_true", help="one JSON list instead of the table")
    runs.add_argument("--rootdir", default=".", help="where .heron/runs/ is (default: .)")
    runs.set_defaults(func=_runs)

    rec = sub.add_parser(
        "recall", help="Set-Recall@k of a table retrieval: a baseline or an adapter"
    )
    how = rec.add_mutually_exclusive_group(required=True)
    how.add_argument("--method", choices=("bm25", "embedding"))
    how.add_argument(
        "--adapter",
        help="any adapter (entry point or module:Class): its tables_ranked, no SQL needed",
    )
    rec.add_argument(
        "--scale", choices=SCALES, default="tiny", help="with --adapter (default: tiny)"
    )
    rec.add_argument("--seed", type=int, default=42, help="with --adapter (default: 42)")
    rec.add_argument("--dsn", help="with --adapter: the server (default: the embedded server)")
    rec.add_argument(
        "--timeout", type=float, default=120.0, help="with --adapter: per question, s (default 120)"
    )
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
    ver.add_argument(
        "--protocol",
        help="the board protocol file (default: ./board/protocol.yaml, else the one installed)",
    )
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
