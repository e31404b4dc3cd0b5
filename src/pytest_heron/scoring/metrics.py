"""Benchmark metrics over question outcomes: pure functions, no I/O.

Shares are percentages (0-100). A metric that does not apply is ``None``, never 0.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from pytest_heron.core.errors import ErrorKind
from pytest_heron.core.records import JSON, RecordReader
from pytest_heron.scoring.context import context_recall as context_recall
from pytest_heron.scoring.context import (
    context_size_median,
    ranked_count,
    set_recall,
    set_recall_at_k,
)
from pytest_heron.scoring.figures import OPTIONAL_FIGURES, ex_superset, soft_f1_mean
from pytest_heron.scoring.grading import GRADE_WEIGHTS as GRADE_WEIGHTS
from pytest_heron.scoring.grading import REF_LATENCY_S as REF_LATENCY_S
from pytest_heron.scoring.grading import REF_TOKENS_PER_Q as REF_TOKENS_PER_Q
from pytest_heron.scoring.grading import grade
from pytest_heron.scoring.outcome import Outcome


def _pct(hits: int, n: int) -> float | None:
    return None if n == 0 else round(100.0 * hits / n, 4)


def ex_first_state(outcomes: Sequence[Outcome], first_seed: int) -> float | None:
    """EX@1 on the first state: the share of questions right on seed ``first_seed``."""
    key = str(first_seed)
    return _pct(sum(bool(o.correct_by_state.get(key)) for o in outcomes), len(outcomes))


def ex_multistate(outcomes: Sequence[Outcome]) -> float | None:
    """Multi-state EX@1 (the headline): the share of questions right on every state."""
    return _pct(sum(o.correct for o in outcomes), len(outcomes))


def ex_set_first_state(outcomes: Sequence[Outcome], first_seed: int) -> float | None:
    """set-EX@1: the share of questions right on seed ``first_seed`` with rows compared as sets
    (BIRD's count); None when an outcome has no set verdict (a results file from before)."""
    if any(o.correct_set_by_state is None for o in outcomes):
        return None
    key = str(first_seed)
    return _pct(sum(bool((o.correct_set_by_state or {}).get(key)) for o in outcomes), len(outcomes))


def ex_set_multistate(outcomes: Sequence[Outcome]) -> float | None:
    """Multi-state set-EX: right as a set on every state; None as for :func:`ex_set_first_state`."""
    if any(o.correct_set is None for o in outcomes):
        return None
    return _pct(sum(bool(o.correct_set) for o in outcomes), len(outcomes))


SYNTAX_KINDS = frozenset({ErrorKind.DB_ERROR, ErrorKind.REJECTED})
"""Error kinds of SQL that did not run: the database or the guard refused it."""


def failure_mode(o: Outcome) -> str | None:
    """``"syntax"`` when the SQL did not run (``db_error``, ``rejected``), ``"semantic"`` when
    it ran on every state and returned other rows on one, None otherwise (right, or failed
    another way: no SQL, a timeout, a result too large).

    >>> failure_mode(Outcome("q", error_kind=ErrorKind.DB_ERROR)), failure_mode(Outcome("q"))
    ('syntax', 'semantic')
    """
    if o.error_kind in SYNTAX_KINDS:
        return "syntax"
    if o.error_kind is None and not o.correct:
        return "semantic"
    return None


def failures_by_mode(outcomes: Iterable[Outcome]) -> tuple[int, int]:
    """(syntax, semantic) failure counts; see :func:`failure_mode`."""
    modes = [failure_mode(o) for o in outcomes]
    return modes.count("syntax"), modes.count("semantic")


def _usage_sum(outcomes: Sequence[Outcome], key: str) -> int | None:
    values = [int(o.usage[key]) for o in outcomes if o.usage and key in o.usage]
    return sum(values) if values else None


def ex_at_k(outcomes: Sequence[Outcome], samples: int) -> dict[str, float] | None:
    """EX@k for k in 1, 5, 10, ... up to ``samples`` (and ``samples`` itself): the mean over
    questions of the unbiased pass@k, with c = the samples right on every state. Questions
    without a ``samples`` list (e.g. a crashed worker) count as c = 0. None with one sample.

    >>> from pytest_heron.scoring.outcome import Sample
    >>> ex_at_k([Outcome("q", samples=(Sample(0, True, None, ""), Sample(1, False, None, "")))], 2)
    {'1': 50.0, '2': 100.0}
    """
    if samples < 2 or not outcomes:
        return None
    ks = sorted({1, samples} | {k for k in (5, 10, 20, 50, 100) if k < samples})
    correct = [sum(s.correct for s in o.samples or ()) for o in outcomes]
    return {
        str(k): round(
            100.0 * sum(pass_at_k(samples, min(c, samples), k) for c in correct) / len(outcomes), 4
        )
        for k in ks
    }


def pass_all_k(n: int, c: int, k: int) -> float:
    """Unbiased pass^k: the chance that all of k samples drawn from n (c correct) are correct,
    ``C(c, k) / C(n, k)`` (reliability, where pass@k is capability).

    >>> pass_all_k(5, 5, 3), pass_all_k(5, 2, 3), pass_all_k(4, 2, 2)
    (1.0, 0.0, 0.16666666666666666)
    """
    from math import comb

    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass^k needs 0 <= c <= n and 1 <= k <= n (n={n}, c={c}, k={k})")
    return comb(c, k) / comb(n, k)


def ex_all_k(outcomes: Sequence[Outcome], samples: int) -> dict[str, float] | None:
    """pass^k for the ks of :func:`ex_at_k`: the mean over questions of :func:`pass_all_k`, with
    c = the samples right on every state. None with one sample (it would equal EX@1).

    >>> from pytest_heron.scoring.outcome import Sample
    >>> ex_all_k([Outcome("q", samples=(Sample(0, True, None, ""), Sample(1, False, None, "")))], 2)
    {'1': 50.0, '2': 0.0}
    """
    if samples < 2 or not outcomes:
        return None
    ks = sorted({1, samples} | {k for k in (5, 10, 20, 50, 100) if k < samples})
    correct = [sum(s.correct for s in o.samples or ()) for o in outcomes]
    return {
        str(k): round(
            100.0 * sum(pass_all_k(samples, min(c, samples), k) for c in correct) / len(outcomes),
            4,
        )
        for k in ks
    }


def cost_usd(
    prompt_tokens: int | None,
    completion_tokens: int | None,
    price: Mapping[str, Any] | None,
    cached_prompt_tokens: int | None = None,
) -> float | None:
    """Billed tokens times the price (USD per million tokens); None when there is no price for
    the model or no tokens were billed. Cached prompt tokens (part of ``prompt_tokens``, as
    providers count them) are priced at the table's ``cached_prompt`` price when it gives one,
    else as prompt tokens; reasoning tokens are part of ``completion_tokens`` and priced so.

    >>> cost_usd(2_000_000, 500_000, {"prompt": 2.5, "completion": 10.0})
    10.0
    >>> cost_usd(2_000_000, 0, {"prompt": 2.5, "completion": 10, "cached_prompt": 1}, 1_000_000)
    3.5
    """
    if not price or (prompt_tokens is None and completion_tokens is None):
        return None
    prompt = prompt_tokens or 0
    cached = min(prompt, cached_prompt_tokens or 0)
    cached_price = price.get("cached_prompt")
    cached_rate = float(price["prompt"] if cached_price is None else cached_price)
    total = (
        (prompt - cached) * float(price["prompt"])
        + cached * cached_rate
        + (completion_tokens or 0) * float(price["completion"])
    )
    return round(total / 1_000_000, 10)


def cost_per_correct(cost: float | None, correct: int) -> float | None:
    """USD per multi-state-correct question; None with no cost or no correct answer.

    >>> cost_per_correct(1.5, 3), cost_per_correct(1.5, 0), cost_per_correct(None, 3)
    (0.5, None, None)
    """
    if cost is None or correct == 0:
        return None
    return round(cost / correct, 10)


@dataclass(frozen=True)
class Summary:
    """Every metric of a run (the results file's ``metrics`` object). Shares are percentages;
    a metric that does not apply is None."""

    ex1: float | None = None
    ex_multistate: float | None = None
    ex_multistate_ci95: tuple[float, float] | None = None
    ex_at_k: dict[str, float] | None = None
    exact_match: float | None = None
    ex_superset: float | None = None
    ves: float | None = None
    r_ves: float | None = None
    soft_f1: float | None = None
    set_recall: float | None = None
    tokens_prompt: int | None = None
    tokens_completion: int | None = None
    tokens_per_q: float | None = None
    cost_usd: float | None = None
    errors: int = 0
    latency_s_median: float | None = None
    latency_s_p90: float | None = None
    grade: float | None = None
    llm_calls: int | None = None  # LLM calls the adapter reported (usage "calls"), if any
    replayed_calls: int | None = (
        None  # ... of which replayed from the cache (tokens not billed now)
    )
    ex1_set: float | None = None
    ex_multistate_set: float | None = None
    ex_all_k: dict[str, float] | None = None
    tokens_prompt_cached: int | None = None
    tokens_reasoning: int | None = None
    cost_per_correct_usd: float | None = None
    failures_syntax: int | None = None
    failures_semantic: int | None = None
    set_recall_at_k: dict[str, float] | None = None  # Set-Recall@5/@10/@20 (scoring.context)
    context_tables_median: float | None = None  # median tables in context, where reported
    tables_ranked_n: int | None = None  # questions answered with a ranked list of tables

    @property
    def absent(self) -> tuple[str, ...]:
        """The figures of a run with outcomes that its results file does not carry (a browser
        run has no Soft-F1, superset EX or VES): null in files, ``n/a`` everywhere they are
        shown, never 0, and the Grade is renormalised over the parts it has (:func:`grade`)."""
        if self.ex_multistate is None:
            return ()
        return tuple(label for key, label in OPTIONAL_FIGURES if getattr(self, key) is None)

    def to_json(self) -> dict[str, JSON]:
        out = asdict(self)
        ci = out["ex_multistate_ci95"]
        out["ex_multistate_ci95"] = None if ci is None else list(ci)
        return out

    @classmethod
    def from_json(cls, data: Any, where: str = "metrics") -> Summary:
        r = RecordReader(data, where)
        values: dict[str, Any] = {}
        for f in fields(cls):
            if f.name == "errors":
                values[f.name] = r.integer(f.name, 0)
            elif f.name in _OPT_INTEGERS:
                values[f.name] = r.opt_integer(f.name)
            elif f.name in ("ex_at_k", "ex_all_k", "set_recall_at_k"):
                at_k = r.counters(f.name)
                values[f.name] = None if at_k is None else {k: float(v) for k, v in at_k.items()}
            elif f.name == "ex_multistate_ci95":
                ci = r.data.get(f.name)
                if ci is not None and not (
                    isinstance(ci, list)
                    and len(ci) == 2
                    and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in ci)
                ):
                    raise r.bad(f.name, "a pair of numbers or null")
                values[f.name] = None if ci is None else (float(ci[0]), float(ci[1]))
            else:
                values[f.name] = r.opt_number(f.name)
        return cls(**values)


_OPT_INTEGERS = (
    "tokens_prompt",
    "tokens_completion",
    "llm_calls",
    "replayed_calls",
    "tokens_prompt_cached",
    "tokens_reasoning",
    "failures_syntax",
    "failures_semantic",
    "tables_ranked_n",
)


@dataclass(frozen=True)
class Bucket:
    """EX within one bucket of a breakdown (one shape, retrieval class, trap or join width),
    with its failures by mode (None in results written before they were counted)."""

    n: int
    ex1: float | None
    ex_multistate: float | None
    errors: int
    failures_syntax: int | None = None
    failures_semantic: int | None = None

    def to_json(self) -> dict[str, JSON]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Any, where: str = "bucket") -> Bucket:
        r = RecordReader(data, where)
        return cls(
            n=r.integer("n"),
            ex1=r.opt_number("ex1"),
            ex_multistate=r.opt_number("ex_multistate"),
            errors=r.integer("errors", 0),
            failures_syntax=r.opt_integer("failures_syntax"),
            failures_semantic=r.opt_integer("failures_semantic"),
        )


Breakdown = dict[str, dict[str, Bucket]]  # axis -> bucket name -> EX in that bucket


SQL_ONLY = (
    "ex1",
    "ex_multistate",
    "ex_multistate_ci95",
    "ex_at_k",
    "exact_match",
    "ex_superset",
    "ves",
    "r_ves",
    "soft_f1",
    "grade",
    "ex1_set",
    "ex_multistate_set",
    "ex_all_k",
    "cost_per_correct_usd",
    "failures_syntax",
    "failures_semantic",
)
"""The figures of the answers' SQL: None (n/a) in a retrieval run, which asks for no SQL."""


def summary(
    outcomes: Sequence[Outcome],
    first_seed: int,
    *,
    price: Mapping[str, Any] | None = None,
    samples: int = 1,
    task: str = "sql",
) -> Summary:
    """Every metric of the run; with ``task="retrieval"`` those of :data:`SQL_ONLY` are None."""
    if task == "retrieval":
        full = summary(outcomes, first_seed, price=price)
        blank: dict[str, Any] = dict.fromkeys(SQL_ONLY)
        return replace(full, **blank)
    latencies = [o.latency_s for o in outcomes if o.latency_s is not None]
    prompt = _usage_sum(outcomes, "prompt_tokens")
    completion = _usage_sum(outcomes, "completion_tokens")
    cached = _usage_sum(outcomes, "prompt_tokens_cached")
    cost = cost_usd(prompt, completion, price, cached)
    syntax, semantic = failures_by_mode(outcomes)
    tokens = None if prompt is None and completion is None else (prompt or 0) + (completion or 0)
    n = len(outcomes)
    ex = ex_multistate(outcomes)
    ves_score = ves(outcomes)
    tokens_per_q = None if tokens is None or not outcomes else tokens / n
    errors = sum(o.error_kind is not None for o in outcomes)
    latency = round(statistics.median(latencies), 6) if latencies else None
    return Summary(
        ex1=ex_first_state(outcomes, first_seed),
        ex_multistate=ex,
        ex_multistate_ci95=bootstrap_interval([o.correct for o in outcomes]),
        ex_at_k=ex_at_k(outcomes, samples),
        exact_match=_pct(sum(o.exact_match for o in outcomes), n),
        ex_superset=ex_superset(outcomes),
        ves=ves_score,
        r_ves=r_ves(outcomes),
        soft_f1=soft_f1_mean(outcomes),
        set_recall=set_recall(outcomes),
        tokens_prompt=prompt,
        tokens_completion=completion,
        tokens_per_q=tokens_per_q,
        cost_usd=cost,
        errors=errors,
        latency_s_median=latency,
        latency_s_p90=_quantile(latencies, 0.9),
        grade=grade(ex, ves_score, tokens_per_q, errors, n, latency),
        llm_calls=_usage_sum(outcomes, "calls"),
        replayed_calls=_usage_sum(outcomes, "cached_calls"),
        ex1_set=ex_set_first_state(outcomes, first_seed),
        ex_multistate_set=ex_set_multistate(outcomes),
        ex_all_k=ex_all_k(outcomes, samples),
        tokens_prompt_cached=cached,
        tokens_reasoning=_usage_sum(outcomes, "completion_tokens_reasoning"),
        cost_per_correct_usd=cost_per_correct(cost, sum(o.correct for o in outcomes)),
        failures_syntax=syntax,
        failures_semantic=semantic,
        set_recall_at_k=set_recall_at_k(outcomes),
        context_tables_median=context_size_median(outcomes),
        tables_ranked_n=ranked_count(outcomes),
    )


def _buckets(
    outcomes: Sequence[Outcome], keys_of: Callable[[Outcome], list[str]]
) -> dict[str, list[Outcome]]:
    groups: dict[str, list[Outcome]] = {}
    for o in outcomes:
        for key in keys_of(o):
            groups.setdefault(key, []).append(o)
    return {k: groups[k] for k in sorted(groups)}


def breakdown(outcomes: Sequence[Outcome], first_seed: int) -> Breakdown:
    """EX per shape, retrieval class, trap and join width (the number of gold tables)."""
    axes: dict[str, Callable[[Outcome], list[str]]] = {
        "shape": lambda o: [o.shape],
        "retrieval": lambda o: [o.retrieval],
        "trap": lambda o: list(o.traps),
        "join_width": lambda o: [_width_bucket(len(o.gold_tables))],
    }
    out: Breakdown = {}
    for axis, keys_of in axes.items():
        out[axis] = {
            bucket: Bucket(
                n=len(group),
                ex1=ex_first_state(group, first_seed),
                ex_multistate=ex_multistate(group),
                errors=sum(o.error_kind is not None for o in group),
                failures_syntax=failures_by_mode(group)[0],
                failures_semantic=failures_by_mode(group)[1],
            )
            for bucket, group in _buckets(outcomes, keys_of).items()
        }
    return out


def _width_bucket(n: int) -> str:
    return f"{n} tables" if n < 5 else "5+ tables"


def _quantile(values: Sequence[float], q: float) -> float | None:
    """The q-quantile by linear interpolation (as numpy's default), or None without values.

    >>> _quantile([1.0, 2.0, 3.0, 4.0, 5.0], 0.9)
    4.6
    """
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return round(ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo), 6)


def error_kinds(outcomes: Iterable[Outcome]) -> dict[str, int]:
    """How many questions failed for each error kind, by kind name."""
    counts: dict[str, int] = {}
    for o in outcomes:
        if o.error_kind is not None:
            kind = str(o.error_kind)
            counts[kind] = counts.get(kind, 0) + 1
    return dict(sorted(counts.items()))


# -- partial credit, efficiency, capability ceiling -----------------------------------------------


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k: the chance that at least one of k samples drawn from n (c correct) is
    correct, ``1 - C(n-c, k) / C(n, k)``.

    >>> pass_at_k(5, 0, 1), pass_at_k(5, 5, 1), pass_at_k(4, 1, 2)
    (0.0, 1.0, 0.5)
    """
    from math import comb

    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n (n={n}, c={c}, k={k})")
    return 1.0 - comb(n - c, k) / comb(n, k)


def _timed_share(outcomes: Sequence[Outcome], credit: Callable[[float], float]) -> float | None:
    """``100/N * sum(1[correct] * credit(factor))`` over the questions whose times were measured
    (wrong answers count, with 0); ``factor`` is the stored ``sqrt(t_gold / t_pred)``."""
    timed = [o for o in outcomes if o.ves is not None or not o.correct]
    if not timed or (
        any(o.correct for o in outcomes) and not any(o.correct and o.ves is not None for o in timed)
    ):
        return None  # no right answer was timed: the figure is missing, not 0
    total = sum(credit(o.ves) for o in timed if o.correct and o.ves is not None)
    return round(100.0 * total / len(timed), 4)


def ves(outcomes: Sequence[Outcome]) -> float | None:
    """Valid Efficiency Score: ``100/N * sum(1[correct] * sqrt(t_gold / t_pred))`` over the
    questions whose times were measured (the per-question factor is stored as ``ves``)."""
    return _timed_share(outcomes, lambda factor: factor)


def ves_reward(ratio: float) -> float:
    """The reward of R-VES (BIRD's reward-based VES) for a correct answer with time ratio
    ``t_gold / t_pred``: 1.25 at twice as fast or better, 1 at least as fast, 0.75 down to half
    the speed, 0.5 down to a quarter, 0.25 below.

    >>> [ves_reward(r) for r in (3.0, 1.0, 0.6, 0.3, 0.1)]
    [1.25, 1.0, 0.75, 0.5, 0.25]
    """
    if ratio >= 2:
        return 1.25
    if ratio >= 1:
        return 1.0
    if ratio >= 0.5:
        return 0.75
    if ratio >= 0.25:
        return 0.5
    return 0.25


def r_ves(outcomes: Sequence[Outcome]) -> float | None:
    """R-VES: ``100/N * sum(1[correct] * reward(t_gold / t_pred))`` over the same questions as
    :func:`ves` (the stored factor is ``sqrt(t_gold / t_pred)``, so the ratio is its square).
    Less sensitive than VES to timing noise on fast queries, since the reward is bucketed."""
    return _timed_share(outcomes, lambda factor: ves_reward(factor * factor))


def bootstrap_interval(
    hits: Sequence[bool], *, rounds: int = 2000, seed: int = 20261129
) -> tuple[float, float] | None:
    """A 95% percentile-bootstrap interval (in %) for a share, resampling questions with the
    counter-based streams so the interval is the same on every machine."""
    import numpy as np

    from pytest_heron.generate import integers, stream_key

    n = len(hits)
    if n == 0:
        return None
    values = np.asarray(hits, dtype=np.float64)
    draws = np.arange(rounds * n, dtype=np.int64)
    picks = integers(stream_key(seed, "bootstrap"), draws, 0, n - 1)
    means = np.sort(values[picks].reshape(rounds, n).mean(axis=1))
    lo, hi = means[int(0.025 * (rounds - 1))], means[int(0.975 * (rounds - 1))]
    return round(100.0 * float(lo), 2), round(100.0 * float(hi), 2)


def mcnemar_exact(wins: int, losses: int) -> float:
    """Two-sided exact McNemar p-value from the discordant pairs (A right/B wrong = wins).

    >>> mcnemar_exact(0, 0), round(mcnemar_exact(10, 0), 4)
    (1.0, 0.002)
    """
    from math import comb

    n = wins + losses
    if n == 0:
        return 1.0
    k = min(wins, losses)
    tail: float = sum(comb(n, i) for i in range(k + 1)) / 2**n
    return min(1.0, 2.0 * tail)
