"""Benchmark metrics over question outcomes: pure functions, no I/O.

Shares are percentages (0-100). A metric that does not apply is ``None``, never 0.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

Outcome = Mapping[str, Any]


def _pct(hits: int, n: int) -> float | None:
    return None if n == 0 else round(100.0 * hits / n, 4)


def ex_first_state(outcomes: Sequence[Outcome], first_seed: int) -> float | None:
    """EX@1 on the first state: the share of questions right on seed ``first_seed``."""
    key = str(first_seed)
    return _pct(sum(bool(o["correct_by_state"].get(key)) for o in outcomes), len(outcomes))


def ex_multistate(outcomes: Sequence[Outcome]) -> float | None:
    """Multi-state EX@1 (the headline): the share of questions right on every state."""
    return _pct(sum(bool(o["correct"]) for o in outcomes), len(outcomes))


def set_recall(outcomes: Sequence[Outcome]) -> float | None:
    """Mean share of gold tables among the tables in the adapter's context, over the questions
    whose adapter reported its context; None when no question did."""
    shares = []
    for o in outcomes:
        ctx, gold = o.get("tables_in_context"), o.get("gold_tables")
        if ctx is None or not gold:
            continue
        shares.append(len(set(gold) & set(ctx)) / len(set(gold)))
    return None if not shares else round(100.0 * sum(shares) / len(shares), 4)


def _usage_sum(outcomes: Sequence[Outcome], key: str) -> int | None:
    values = [o["usage"][key] for o in outcomes if o.get("usage") and key in o["usage"]]
    return sum(values) if values else None


def summary(outcomes: Sequence[Outcome], first_seed: int) -> dict[str, Any]:
    """Every key of the results file's ``metrics`` object."""
    latencies = [o["latency_s"] for o in outcomes if o.get("latency_s") is not None]
    prompt = _usage_sum(outcomes, "prompt_tokens")
    completion = _usage_sum(outcomes, "completion_tokens")
    tokens = None if prompt is None and completion is None else (prompt or 0) + (completion or 0)
    return {
        "n": len(outcomes),
        "ex1": ex_first_state(outcomes, first_seed),
        "ex_multistate": ex_multistate(outcomes),
        "ex_at_k": None,
        "exact_match": None,
        "ves": None,
        "soft_f1": None,
        "set_recall": set_recall(outcomes),
        "tokens_prompt": prompt,
        "tokens_completion": completion,
        "tokens_per_q": None if tokens is None or not outcomes else tokens / len(outcomes),
        "cost_usd": None,
        "errors": sum(o.get("error_kind") is not None for o in outcomes),
        "latency_s_median": round(statistics.median(latencies), 6) if latencies else None,
        "grade": None,
    }


def _buckets(outcomes: Sequence[Outcome], keys_of: Any) -> dict[str, list[Outcome]]:
    groups: dict[str, list[Outcome]] = {}
    for o in outcomes:
        for key in keys_of(o):
            groups.setdefault(key, []).append(o)
    return {k: groups[k] for k in sorted(groups)}


def breakdown(outcomes: Sequence[Outcome], first_seed: int) -> dict[str, dict[str, Any]]:
    """EX per shape, retrieval class and trap."""
    axes: dict[str, Any] = {
        "shape": lambda o: [o["shape"]],
        "retrieval": lambda o: [o["retrieval"]],
        "trap": lambda o: list(o.get("traps") or []),
    }
    out: dict[str, dict[str, Any]] = {}
    for axis, keys_of in axes.items():
        out[axis] = {
            bucket: {
                "n": len(group),
                "ex1": ex_first_state(group, first_seed),
                "ex_multistate": ex_multistate(group),
                "errors": sum(o.get("error_kind") is not None for o in group),
            }
            for bucket, group in _buckets(outcomes, keys_of).items()
        }
    return out


def error_kinds(outcomes: Iterable[Outcome]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for o in outcomes:
        kind = o.get("error_kind")
        if kind:
            counts[kind] = counts.get(kind, 0) + 1
    return dict(sorted(counts.items()))
