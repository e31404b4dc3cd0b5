"""The terminal summary of a run's :class:`~pytest_heron.results.document.Results`."""

from __future__ import annotations

from typing import Any

from pytest_heron.core.safe_text import one_line
from pytest_heron.results.conditions import Conditions
from pytest_heron.results.document import Results
from pytest_heron.scoring import (
    GRADE_WEIGHTS,
    REF_LATENCY_S,
    REF_TOKENS_PER_Q,
    Bucket,
    Summary,
    error_kinds,
)


def _fmt(value: Any, suffix: str = "%") -> str:
    return "n/a" if value is None else f"{value:.1f}{suffix}"


def _interval(ci: tuple[float, float] | None) -> str:
    return "n/a" if not ci else f"[{ci[0]:.1f}%, {ci[1]:.1f}%]"


def _modes(b: Bucket) -> str:
    """A bucket's failures by mode, when it has any."""
    if not b.failures_syntax and not b.failures_semantic:
        return ""
    return f", syntax {b.failures_syntax or 0}, semantic {b.failures_semantic or 0}"


def conditions_line(c: Conditions) -> str:
    seeds = ",".join(str(s) for s in c.seeds)
    extra = "".join(f" {k}={v}" for k, v in sorted(c.adapter_conditions.items()))
    return one_line(
        f"adapter={c.adapter} scale={c.scale} seeds={seeds} states={c.states}"
        f" ({'multi' if c.states > 1 else 'single'}-state)"
        f" model={c.model or 'n/a'} temperature={c.temperature:g}{_llm(c)}"
        f" samples={c.samples}{extra}{_variants(c)} n={c.n_questions}"
        + (f" ({c.subset_note})" if c.subset_note else "")
        + f" backend={c.backend}{_layout(c)} postgres={c.postgres_version}"
        f" data={c.tables} tables/{c.rows} rows (data version {c.data_version})"
    )


def _variants(c: Conditions) -> str:
    """A run on ``--heron-variants`` (never-published variants, not the public questions) says
    so, with the spec that regenerates them: ``variants=SEED:COUNT``."""
    if c.variants is None:
        return ""
    return f" variants={c.variants['seed']}:{c.variants['count']}"


def _layout(c: Conditions) -> str:
    """The key layout and node count of a run not on the standard layout."""
    if c.layout == "standard":
        return ""
    return f" layout={c.layout} nodes={c.nodes if c.nodes is not None else 'n/a'}"


def _llm(c: Conditions) -> str:
    """Where an LLM run asked its model, and the reply length it allowed."""
    if not c.model:
        return ""
    return f" endpoint={c.endpoint or 'n/a'} max_tokens={c.max_tokens or 'none'}"


def tokens_text(m: Summary) -> str:
    """The tokens part of the usage line: "billed" only for calls billed by this run; replayed
    calls are named as such (their tokens were billed when they were recorded)."""
    if m.tokens_prompt is None and m.tokens_completion is None:
        return "billed tokens: n/a (the adapter reported no usage)"
    counts = f"{m.tokens_prompt or 0}/{m.tokens_completion or 0} ({m.tokens_per_q or 0:.0f}/q)"
    replayed, calls = m.replayed_calls or 0, m.llm_calls or 0
    if calls and replayed >= calls:
        return (
            f"tokens prompt/completion: {counts}, replayed from the cache (all {calls} calls; "
            "billed when recorded, not by this run)"
        )
    if replayed:
        return (
            f"tokens prompt/completion: {counts} ({replayed} of {calls} calls replayed from "
            "the cache, billed when recorded; the rest billed by this run)"
        )
    return f"billed tokens prompt/completion: {counts}"


def usage_line(c: Conditions, m: Summary) -> str:
    """EX@k (a ceiling, never the headline), R-VES, billed tokens and cost."""
    if m.ex_at_k:
        at_k = ", ".join(f"EX@{k} {_fmt(v)}" for k, v in m.ex_at_k.items())
        at_k = f"{at_k} (pass@k over {c.samples} samples, multi-state; a ceiling)"
    else:
        at_k = "EX@k: n/a (1 sample; use --heron-samples N)"
    tokens = tokens_text(m)
    if m.tokens_prompt is not None or m.tokens_completion is not None:
        tokens += (
            f" (of which cached prompt {_count(m.tokens_prompt_cached)}, "
            f"reasoning {_count(m.tokens_reasoning)})"
        )
    price = c.price
    if m.cost_usd is not None and price:
        cost = f"cost: ${m.cost_usd:.6f} ({price['model']} list price as of {price['as_of']}"
        if m.tokens_prompt_cached and price.get("cached_prompt") is None:
            cost += "; cached prompt tokens priced as prompt: the table gives no cached price"
        cost += ")"
    elif c.model and not price:
        cost = f"cost: n/a (no price for {c.model!r}; see --heron-prices)"
    else:
        cost = "cost: n/a"
    superset = f"superset EX (extra columns allowed; not EX): {_fmt(m.ex_superset)}"
    return f"{at_k}   R-VES: {_fmt(m.r_ves, '')}   {superset}   {tokens}   {cost}"


def _count(value: int | None) -> str:
    return "n/a" if value is None else str(value)


def _money(value: float | None) -> str:
    return "n/a" if value is None else f"${value:.6f}"


def figures_line(c: Conditions, m: Summary) -> str:
    """set-EX beside EX, pass^k beside EX@k, failures by mode, cost per correct answer."""
    first = c.seeds[0] if c.seeds else "?"
    if m.ex_all_k:
        all_k = ", ".join(f"pass^{k} {_fmt(v)}" for k, v in m.ex_all_k.items())
    else:
        all_k = "pass^k: n/a (1 sample)"
    return (
        f"set-EX (rows as sets, BIRD's count; not EX): multi-state {_fmt(m.ex_multistate_set)}, "
        f"seed {first} {_fmt(m.ex1_set)}   {all_k}   failures by mode: syntax "
        f"{_count(m.failures_syntax)}, semantic {_count(m.failures_semantic)}   "
        f"cost per correct answer: {_money(m.cost_per_correct_usd)}"
    )


FIGURES_LEGEND = (
    "legend: set-EX = EX with duplicates and row order ignored (how BIRD counts; the gap to EX "
    "is what set comparison over-counts); pass^k = all k of k samples right (reliability; "
    "pass@k = at least one); syntax = the SQL did not run (db_error, rejected); semantic = it "
    "ran and returned other rows; cost per correct answer = cost / multi-state-correct questions"
)


def summary_lines(results: Results) -> list[str]:
    """The terminal summary: conditions first, then the headline and the breakdown."""
    c, m = results.conditions, results.metrics
    n = len(results.outcomes)
    first = c.seeds[0] if c.seeds else "?"
    subset = f"[{c.subset_note}] " if c.subset_note else ""
    lines = [
        conditions_line(c),
        f"{subset}multi-state EX@1 (all {c.states} states): {_fmt(m.ex_multistate)}   "
        f"EX@1 (seed {first} only): {_fmt(m.ex1)}   "
        f"errors: {m.errors}/{n}   Set-Recall: {_fmt(m.set_recall)}   "
        f"latency median/p90: {_fmt(m.latency_s_median, 's')}/"
        f"{_fmt(m.latency_s_p90, 's')}",
        f"95% bootstrap interval of multi-state EX: {_interval(m.ex_multistate_ci95)}   "
        f"exact match (sqlglot-normalised SQL, not EX): {_fmt(m.exact_match)}   "
        f"Soft-F1: {_fmt(m.soft_f1)}   VES (seed {first}): {_fmt(m.ves, '')}",
        f"Grade: {_fmt(m.grade, '')} = "
        + " + ".join(f"{w:.2f}·{k}" for k, w in GRADE_WEIGHTS.items())
        + f" (alone: T_ref={REF_TOKENS_PER_Q:g} tokens/q,"
        f" L_ref={REF_LATENCY_S:g}s)",
    ]
    lines.append(usage_line(c, m))
    lines.append(figures_line(c, m))
    lines.append(FIGURES_LEGEND)
    kinds = error_kinds(results.outcomes)
    if kinds:
        lines.append("errors by kind: " + ", ".join(f"{k}={v}" for k, v in kinds.items()))
    for axis, buckets in results.breakdown.items():
        if not buckets:
            continue
        cells = [
            f"{name} {_fmt(b.ex_multistate)} (n={b.n}{_modes(b)})" for name, b in buckets.items()
        ]
        lines.append(f"by {axis}: " + "; ".join(cells))
    lines.extend(LEGEND)
    return [one_line(line) for line in lines]  # results-file text never steers the terminal


# What makes some figures look wrong at first sight (the README says the same, at length).
LEGEND = (
    "legend: VES and R-VES time each correct answer against gold on this machine, now (min of "
    "5 runs each): gold against itself has a time ratio of 1 plus noise, so VES moves by several "
    "points from run to run (about 90-101 on a busy 2-core machine; compare tools within one run)",
    "legend: R-VES uses BIRD's steps (1 at least as fast as gold, 0.75 just slower): an answer as "
    "fast as gold lands on either side by noise, so gold itself scores 75-100 (about 88 expected); "
    "the Grade counts VES at most 100 and is at most 100",
)
