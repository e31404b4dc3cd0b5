"""The gold audit, the release gate: ``pytest -m audit`` (excluded from the default run).

One test per question and check, so a failure names both. Gold runs on 3 states at ``tiny`` and
at ``small``; mutants of every gold must differ from it on at least one state (>= 90% of all
non-equivalent mutants, multi-state).
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_heron import audit
from pytest_heron.database.introspect import foreign_keys
from pytest_heron.database.server import Server
from pytest_heron.database.states import ensure_state
from pytest_heron.dataset import load_questions
from pytest_heron.dataset.questions import GoldQuestion

pytestmark = pytest.mark.audit

QUESTIONS = load_questions()
IDS = [q.id for q in QUESTIONS]
SCALES = ("small", "tiny")  # small/42 is the single state of the single-state kill rate
SEEDS = (42, 43, 44)
STATIC = ("parses", "gold_tables", "deterministic", "ordered_limit", "null_order", "duplicate")
DYNAMIC = ("executes", "rows", "empty", "stable", "limit_ties")
MIN_KILL_RATE = 90.0


@pytest.fixture(scope="session")
def state_dsns(server: Server) -> dict[str, list[str]]:
    return {s: [ensure_state(server, s, seed).admin_dsn for seed in SEEDS] for s in SCALES}


@pytest.fixture(scope="session")
def mutant_results(state_dsns: dict[str, list[str]]) -> dict[str, list[audit.MutantResult]]:
    everywhere = [d for s in SCALES for d in state_dsns[s]]
    fks = foreign_keys(everywhere[0])
    return {q.id: audit.mutant_results(q, everywhere, fks) for q in QUESTIONS}


@pytest.mark.parametrize("check", STATIC)
@pytest.mark.parametrize("q", QUESTIONS, ids=IDS)
def test_static(q: GoldQuestion, check: str) -> None:
    problems = audit.static_problems(q)
    duplicate = audit.duplicate_problems(QUESTIONS).get(q.id)
    if duplicate:
        problems["duplicate"] = duplicate
    assert check not in problems, f"{q.id} {check}: {problems[check]}"


_STATE_CACHE: dict[tuple[str, str], dict[str, str]] = {}


@pytest.mark.parametrize("check", DYNAMIC)
@pytest.mark.parametrize("scale", SCALES)
@pytest.mark.parametrize("q", QUESTIONS, ids=IDS)
def test_on_states(q: GoldQuestion, scale: str, check: str, state_dsns: dict[str, Any]) -> None:
    key = (q.id, scale)
    if key not in _STATE_CACHE:
        _STATE_CACHE[key] = audit.state_problems(q, state_dsns[scale])
    problems = _STATE_CACHE[key]
    assert check not in problems, f"{q.id} at {scale} {check}: {problems[check]}"


def test_mutant_kill_rate(
    mutant_results: dict[str, list[audit.MutantResult]], record_property: Any
) -> None:
    rate = audit.kill_rate(mutant_results, QUESTIONS)
    checks = len(QUESTIONS) * (len(STATIC) + len(DYNAMIC) * len(SCALES))
    # the closing summary of `pytest -m audit` (tests/conftest.py prints it, xdist or not)
    record_property(
        "heron_audit_summary",
        f"{len(QUESTIONS)} questions, {checks} checks ({len(STATIC)} static per question, "
        f"{len(DYNAMIC)} on 3 states at each of {', '.join(SCALES)}); mutants: {rate.counted} "
        f"counted, {rate.equivalent} equivalent; killed single-state (small/42) "
        f"{rate.single():.1f}%, multi-state (6 states) {rate.multi():.1f}% "
        f"(the gate: at least {MIN_KILL_RATE:g}%)",
    )
    survivors = [
        f"{qid}: {r.description}"
        for qid, res in sorted(mutant_results.items())
        for r in res
        if not r.killed_any and not r.equivalent
    ]
    print(
        f"\nkill rate over {rate.counted} mutants ({rate.equivalent} equivalent not counted): "
        f"single-state {rate.single():.1f}%, multi-state {rate.multi():.1f}%"
    )
    print("survivors:\n  " + "\n  ".join(survivors or ["none"]))
    assert rate.multi() >= MIN_KILL_RATE, "\n".join(survivors)
