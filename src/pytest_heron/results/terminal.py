"""The terminal summary of a run's :class:`~pytest_heron.results.document.Results`."""

from __future__ import annotations

from typing import Any

from pytest_heron.core.safe_text import one_line
from pytest_heron.results.conditions import Conditions
from pytest_heron.results.document import Results
from pytest_heron.scoring import (
    REF_LATENCY_S,
    REF_TOKENS_PER_Q,
    RUN_KS,
    Bucket,
    Summary,
    error_kinds,
    grade_formula,
    grade_note,
    markdown,
    outcome_table,
)


def _fmt(value: Any, suffix: str = "%") -> str:
    return "n/a" if value is None else f"{value:.1f}{suffix}"


def absent_note(m: Summary) -> str | None:
    """One sentence naming the figures the run's file does not carry (:attr:`Summary.absent`),
    or None when it carries them all.

    >>> print(absent_note(Summary(ex_multistate=50.0, soft_f1=80.0, ves=90.0)))
    not in this results file: superset EX (n/a, not 0)
    >>> absent_note(Summary(ex_multistate=50.0, soft_f1=80.0, ex_superset=50.0, ves=90.0)) is None
    True
    """
    if not m.absent:
        return None
    text = f"not in this results file: {', '.join(m.absent)} (n/a, not 0)"
    if "VES" in m.absent:
        text += "; the Grade is renormalised over the parts present (without VES)"
    return text


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
        f"adapter={c.adapter}{_named(c)}{'' if c.task == 'sql' else ' task=' + c.task}"
        f" scale={c.scale} seeds={seeds} states={c.states}"
        f" ({'multi' if c.states > 1 else 'single'}-state)"
        f" model={c.model or 'n/a'} temperature={c.temperature:g}{_llm(c)}"
        f" samples={c.samples}{extra}{_variants(c)} n={c.n_questions}"
        + (f" ({c.subset_note})" if c.subset_note else "")
        + f" backend={c.backend}{_layout(c)} postgres={c.postgres_version}"
        f" data={c.tables} tables/{c.rows} rows (data version {c.data_version})" + _isolation(c)
    )


def header_line(
    *,
    adapter: str,
    isolation: str,
    sandbox: str | None,
    scale: str,
    seeds: tuple[int, ...],
    backend: str,
    layout: str,
    data_version: str,
    questions: int,
    source: str,
) -> str:
    """The report header's line (pytest's ``pytest_report_header``): what the run will run on,
    before any state is built.

    >>> line = header_line(adapter="gold", isolation="not-needed", sandbox=None, scale="tiny",
    ...                    seeds=(42,), backend="auto", layout="standard", data_version="v1",
    ...                    questions=100, source="built-in")
    >>> line.split(" scale=")[0]
    'heron: adapter=gold isolation=not-needed'
    >>> line.split(" backend=")[1]
    'auto layout=standard data version v1, 100 questions (built-in)'
    """
    how = f" ({sandbox})" if sandbox else ""
    return one_line(
        f"heron: adapter={adapter} isolation={isolation}{how} scale={scale}"
        f" seeds={','.join(str(s) for s in seeds)} states={len(seeds)} backend={backend}"
        f" layout={layout} data version {data_version}, {questions} questions ({source})"
    )


def _isolation(c: Conditions) -> str:
    """How the adapter was isolated, and by what, when the run recorded it."""
    if c.adapter_isolation is None:
        return ""
    how = f" ({c.adapter_sandbox})" if c.adapter_sandbox else ""
    return f" isolation={c.adapter_isolation}{how}"


def _named(c: Conditions) -> str:
    """`` (name X)`` when the adapter's own name is not the spec it was asked for."""
    return "" if c.adapter_name in (None, c.adapter) else f" (name {c.adapter_name})"


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


def retrieval_line(m: Summary, n: int) -> str:
    """Set-Recall@5/@10/@20 beside the context's size and how many answers were ranked: n/a
    when the adapter reported no tables (the whole schema in context)."""
    if m.set_recall_at_k:
        at_k = "".join(f"@{k} {_fmt(v)}, " for k, v in m.set_recall_at_k.items()).rstrip(", ")
    else:
        at_k = "@k: n/a (no tables reported: the whole schema in context)"
    size = "n/a" if m.context_tables_median is None else f"{m.context_tables_median:g} tables"
    ranked = "n/a" if m.tables_ranked_n is None else f"{m.tables_ranked_n}/{n}"
    return (
        f"Set-Recall{at_k}   median context: {size}   ranked lists: {ranked} (an unranked set "
        f"counts at its own size)   Set-Recall of the whole context: {_fmt(m.set_recall)}"
    )


FIGURES_LEGEND = (
    "legend: set-EX = EX with duplicates and row order ignored (how BIRD counts; the gap to EX "
    "is what set comparison over-counts); pass^k = all k of k samples right (reliability; "
    "pass@k = at least one); syntax = the SQL did not run (db_error, rejected); semantic = it "
    "ran and returned other rows; cost per correct answer = cost / multi-state-correct questions"
)


def retrieval_lines(results: Results) -> list[str]:
    """A retrieval run's summary: conditions, Set-Recall@k and the context, the table by
    retrieval class (as ``heron recall`` prints it), the errors."""
    c, m = results.conditions, results.metrics
    n = len(results.outcomes)
    lines = [
        conditions_line(c),
        f"task=retrieval: only the tables the adapter reported were scored (no SQL asked, no "
        f"EX, no Grade)   errors: {m.errors}/{n}   latency median/p90: "
        f"{_fmt(m.latency_s_median, 's')}/{_fmt(m.latency_s_p90, 's')}",
        retrieval_line(m, n),
        *markdown(outcome_table(results.outcomes, RUN_KS), RUN_KS).splitlines(),
    ]
    kinds = error_kinds(results.outcomes)
    if kinds:
        lines.append("errors by kind: " + ", ".join(f"{k}={v}" for k, v in kinds.items()))
    return [one_line(line) for line in lines]


def summary_lines(results: Results) -> list[str]:
    """The terminal summary: conditions first, then the headline and the breakdown."""
    if results.conditions.task == "retrieval":
        return retrieval_lines(results)
    c, m = results.conditions, results.metrics
    n = len(results.outcomes)
    first = c.seeds[0] if c.seeds else "?"
    subset = f"[{c.subset_note}] " if c.subset_note else ""
    lines = [
        conditions_line(c),
        f"{subset}multi-state EX@1 (all {c.states} states): {_fmt(m.ex_multistate)}   "
        f"Soft-F1 (partial credit, not in the Grade): {_fmt(m.soft_f1)}   "
        f"EX@1 (seed {first} only): {_fmt(m.ex1)}   "
        f"errors: {m.errors}/{n}   "
        f"latency median/p90: {_fmt(m.latency_s_median, 's')}/"
        f"{_fmt(m.latency_s_p90, 's')}",
        f"95% bootstrap interval of multi-state EX: {_interval(m.ex_multistate_ci95)}   "
        f"exact match (sqlglot-normalised SQL, not EX): {_fmt(m.exact_match)}   "
        f"VES (seed {first}): {_fmt(m.ves, '')}",
        f"Grade: {_fmt(m.grade, '')} = {grade_formula()}"
        f" (alone: T_ref={REF_TOKENS_PER_Q:g} tokens/q, L_ref={REF_LATENCY_S:g}s)",
    ]
    note = absent_note(m)
    if note:
        lines.append(note)
    note = grade_note(m.ex_multistate, m.grade)
    if note:
        lines.append(note)
    lines.append(retrieval_line(m, n))
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
