"""The gold audit for question authors: ``python -m pytest_heron.audit``."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from pytest_heron.audit.gold import state_problems
from pytest_heron.audit.mutants import MutantResult, kill_rate, mutant_results
from pytest_heron.audit.static import duplicate_problems, static_problems
from pytest_heron.core.progress import Steps


def main(argv: Sequence[str] | None = None) -> int:
    from pytest_heron.database import embedded, ensure_state, foreign_keys
    from pytest_heron.dataset import load_questions

    parser = argparse.ArgumentParser(prog="python -m pytest_heron.audit")
    parser.add_argument("--questions", type=Path, help="question folder (default: built-in)")
    parser.add_argument("--ids", help="comma-separated question ids (default: all)")
    parser.add_argument(
        "--scales",
        default="small,tiny",
        help="first scale's first seed is the single state of the single-state kill rate",
    )
    parser.add_argument("--seeds", default="42,43,44")
    parser.add_argument("--no-mutants", action="store_true")
    args = parser.parse_args(argv)
    every = load_questions(args.questions)
    questions = every
    if args.ids:
        wanted = set(args.ids.split(","))
        questions = [q for q in questions if q.id in wanted]
    server = embedded()
    failures = 0
    results: dict[str, list[MutantResult]] = {}
    try:
        dups = duplicate_problems(every)
        by_scale = {
            scale: [ensure_state(server, scale, int(s)).admin_dsn for s in args.seeds.split(",")]
            for scale in args.scales.split(",")
        }
        everywhere = [d for dsns in by_scale.values() for d in dsns]
        fks = foreign_keys(everywhere[0])  # the same schema in every state: read once
        steps = Steps("audit", len(questions))  # seconds per question with its mutants
        for q in questions:
            problems = dict(static_problems(q))
            if q.id in dups:
                problems["duplicate"] = dups[q.id]
            for scale, dsns in by_scale.items():
                problems.update({f"{k}@{scale}": v for k, v in state_problems(q, dsns).items()})
            line = f"{q.id}: " + (
                "ok" if not problems else "; ".join(f"{k}: {v}" for k, v in problems.items())
            )
            if not args.no_mutants and not problems:
                res = results[q.id] = mutant_results(q, everywhere, fks)
                alive = [r for r in res if not r.killed_any and not r.equivalent]
                equal = sum(1 for r in res if not r.killed_any and r.equivalent)
                line += (
                    f"; mutants: {len(res) - len(alive) - equal} killed, {equal} equivalent,"
                    f" {len(alive)} survived"
                )
                line += "".join(f"\n    survivor: {r.description}" for r in alive)
            failures += bool(problems)
            steps.above(line)
            steps.advance(detail=q.id)
    finally:
        server.stop()
    if results:
        rate = kill_rate(results, questions)
        print(
            f"kill rate: single-state {rate.single():.1f}% multi-state {rate.multi():.1f}% "
            f"({rate.counted} mutants, {rate.equivalent} equivalent not counted)"
        )
    return 1 if failures else 0
