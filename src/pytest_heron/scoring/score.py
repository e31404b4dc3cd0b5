"""Answer and score one question: adapter -> prediction -> sandbox on every state -> compare.

The result is an :class:`~pytest_heron.scoring.outcome.Outcome`. Nothing the adapter or its SQL
does makes :func:`score_question` raise: the adapter's faults, the prediction's and even an
unexpected failure of the harness while scoring become the outcome's ``error_kind``, with the
prediction, its billed usage and its latency kept.
"""

from __future__ import annotations

import dataclasses
import math
import time
import traceback
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_heron import compare, sandbox
from pytest_heron.compare import set_equal
from pytest_heron.core.errors import AdapterError, AdapterTimeout, ErrorKind, adapter_failure_kind
from pytest_heron.core.types import Prediction
from pytest_heron.database import StateRef
from pytest_heron.dataset import GoldQuestion
from pytest_heron.scoring.outcome import Outcome, Sample
from pytest_heron.scoring.similarity import exact_match
from pytest_heron.scoring.volatility import VOLATILE, server_catalog, volatile_reason
from pytest_heron.systems import System, reported_tables, to_prediction

TIME_RUNS = 5  # timed executions of gold and of a correct prediction (after one warm-up each)


class VolatileTiming(Exception):
    """A timed run of a prediction returned other rows than the run that was scored."""


VES_FACTOR_CAP = 2.0  # sqrt(t_gold / t_pred) counts at most this much (4x faster than gold)


def _plain(value: Any) -> Any:
    """JSON-safe copy of usage/tables data."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def _counters(value: Any) -> dict[str, int | float] | None:
    """Billed usage as counters: the numeric, finite, non-negative entries of a mapping."""
    if not isinstance(value, Mapping):
        return None
    out: dict[str, int | float] = {}
    for key, v in value.items():
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0:
            out[str(key)] = v
    return out or None


def _latency(wall_s: float, usage: Mapping[str, int | float] | None) -> float:
    """The question's latency: the wall clock of the adapter's answer plus the recorded latency
    of the LLM calls it replayed from the cache (``usage["replayed_ms"]``), so a replayed run
    reports the latencies of the run it replays, not those of a cache lookup.

    >>> _latency(0.25, {"replayed_ms": 1500}), _latency(0.25, None)
    (1.75, 0.25)
    """
    replayed = (usage or {}).get("replayed_ms", 0)
    return round(wall_s + float(replayed) / 1000, 6)


def _adapter_failure(exc: BaseException) -> tuple[ErrorKind, str]:
    """The error kind and message of an adapter that did not produce a usable prediction."""
    if isinstance(exc, AdapterTimeout):
        return ErrorKind.ADAPTER_TIMEOUT, str(exc)
    kind = adapter_failure_kind(exc)
    if kind is ErrorKind.ADAPTER_TIMEOUT:
        return kind, str(exc) or "the adapter timed out"
    if isinstance(exc, AdapterError):
        return kind, str(exc)
    return kind, f"{type(exc).__name__}: {exc}"


def score_question(
    system: System,
    q: GoldQuestion,
    states: Sequence[StateRef],
    *,
    adapter_timeout: float,
    statement_timeout: float,
    time_runs: int = TIME_RUNS,
    samples: int = 1,
) -> Outcome:
    """Ask ``system`` (the adapter, as :mod:`~pytest_heron.systems.answerers` runs it) for an
    answer to ``q`` and score its SQL on every state. Never raises.

    With ``samples`` > 1 the adapter answers ``samples`` times; the outcome's own fields describe
    sample 0 (EX@1, VES and Soft-F1 use it), ``samples`` lists every sample's SQL and correctness
    (for EX@k), and ``usage`` is summed over all samples, since every sample was billed."""
    gold_rows: dict[int, Any] = {}
    with_index = samples > 1 and system.takes_sample
    every: list[Outcome] = []
    scored_rows: list[Any] = []
    for i in range(samples):
        out, rows = _score_sample(
            system,
            q,
            states,
            gold_rows,
            adapter_timeout,
            statement_timeout,
            sample=i if with_index else None,
            timed=bool(time_runs) and i == 0,
        )
        every.append(out)
        scored_rows.append(rows)
    first = every[0]
    if first.correct and time_runs and first.pred_sql is not None:
        try:
            factor = _efficiency(
                states[0], q, first.pred_sql, scored_rows[0], statement_timeout, time_runs
            )
            first = dataclasses.replace(first, ves=factor)
        except VolatileTiming as exc:  # the timing runs are the repeats on the first state
            first = volatile(first, str(exc))
            every[0] = first
        except Exception:  # timing is a bonus: a failure costs VES, never the record
            first = dataclasses.replace(first, ves=None)
    if samples > 1:
        first = dataclasses.replace(
            first,
            samples=tuple(
                Sample(i, o.correct, o.error_kind, o.pred_sql) for i, o in enumerate(every)
            ),
            usage=_sum_usage([o.usage for o in every]),
        )
    return first


NO_TABLES = (
    "the adapter reported no tables (tables_ranked, or tables): a retrieval run scores only them"
)


def score_retrieval(system: System, q: GoldQuestion, adapter_timeout: float) -> Outcome:
    """A retrieval run's answer to ``q`` (``--heron-task=retrieval``): the tables the adapter
    reports, ranked (``tables_ranked``) or as its context, and nothing else: no SQL is asked
    for or run, so the outcome is never ``correct`` (there is no EX); it is an error only when
    the adapter failed or reported no tables (``invalid_prediction``). Never raises."""
    out = Outcome.blank(q)
    started = time.perf_counter()
    try:
        raw = system.ask(q, adapter_timeout, None)
    except Exception as exc:
        kind, message = _adapter_failure(exc)
        usage = _counters(_plain(getattr(exc, "usage", None)))
        latency = _latency(time.perf_counter() - started, usage)
        return out.failed(kind, message, usage=usage, latency_s=latency)
    ranked, context = reported_tables(raw)
    billed = raw.usage if isinstance(raw, Prediction) else None
    if isinstance(raw, Mapping):
        billed = raw.get("usage")
    usage = _counters(_plain(billed))
    out = dataclasses.replace(
        out,
        tables_ranked=None if ranked is None else tuple(ranked),
        tables_in_context=None if context is None else tuple(context),
        usage=usage,
        latency_s=_latency(time.perf_counter() - started, usage),
    )
    if ranked is None and context is None:
        return out.failed(ErrorKind.INVALID_PREDICTION, NO_TABLES)
    return out


def score_sql(
    q: GoldQuestion,
    sql: str,
    states: Sequence[StateRef],
    *,
    statement_timeout: float,
    time_runs: int = 0,
    gold_rows: dict[int, Any] | None = None,
) -> Outcome:
    """Score one SQL text on every state, exactly as :func:`score_question` scores a prediction
    (same guard, executor, comparator and timing), with no adapter involved: used to re-execute
    the predictions of a submission. Never raises. ``gold_rows`` caches gold's rows per seed
    between calls for the same question."""
    out = Outcome.blank(q, pred_sql=sql)
    cache: dict[int, Any] = {} if gold_rows is None else gold_rows
    timed = bool(time_runs) and bool(states)
    try:
        done, rows = _run_on_states(out, q, sql, states, cache, statement_timeout, timed=timed)
    except Exception as exc:  # the harness's own failure: this question's outcome, not a crash
        where = traceback.format_exception_only(type(exc), exc)[-1].strip()
        return out.failed(ErrorKind.INFRA_CRASH, f"scoring failed: {where}"[:2000])
    if done.correct and timed:
        try:
            done = dataclasses.replace(
                done, ves=_efficiency(states[0], q, sql, rows, statement_timeout, time_runs)
            )
        except VolatileTiming as exc:  # the timing runs are the repeats on the first state
            done = volatile(done, str(exc))
        except Exception:
            done = dataclasses.replace(done, ves=None)
    return done


def volatile(out: Outcome, why: str) -> Outcome:
    """``out`` made wrong on every state because its rows are not the same from run to run
    (the reason starts with "volatile result"); a volatile answer is never right by luck."""
    return dataclasses.replace(
        out,
        correct=False,
        correct_by_state=dict.fromkeys(out.correct_by_state or {}, False),
        correct_superset=False,
        correct_set=False,
        correct_set_by_state=dict.fromkeys(out.correct_set_by_state or {}, False),
        ves=None,
        reason=why if why.startswith(VOLATILE) else f"{VOLATILE}: {why}",
    )


def _sum_usage(usages: Sequence[Mapping[str, int | float] | None]) -> dict[str, int | float] | None:
    """Usage counters summed over samples."""
    total: dict[str, int | float] = {}
    for usage in usages:
        for key, value in (usage or {}).items():
            total[key] = total.get(key, 0) + value
    return total or None


def _wider(pred: Sequence[Sequence[Any]], gold: Sequence[Sequence[Any]]) -> bool:
    """Whether the prediction has more columns than gold (the only case superset mode changes)."""
    return bool(pred) and bool(gold) and len(pred[0]) > len(gold[0])


def _score_sample(
    system: System,
    q: GoldQuestion,
    states: Sequence[StateRef],
    gold_rows: dict[int, Any],
    adapter_timeout: float,
    statement_timeout: float,
    *,
    sample: int | None,
    timed: bool = False,
) -> tuple[Outcome, Any]:
    """One answer from the adapter, scored on every state (gold results cached across samples).
    Returns the outcome and the prediction's rows on the first state (for timing; ``timed``:
    the timing runs will repeat it there)."""
    out = Outcome.blank(q)
    started = time.perf_counter()
    raw: Any = None
    try:
        raw = system.ask(q, adapter_timeout, sample)
        pred: Prediction = to_prediction(raw)
    except Exception as exc:
        kind, message = _adapter_failure(exc)
        usage = _counters(_plain(getattr(exc, "usage", None)))
        latency = _latency(time.perf_counter() - started, usage)
        ranked, context = reported_tables(raw)  # kept without SQL: Set-Recall still counts them
        tables = {
            "tables_ranked": None if ranked is None else tuple(ranked),
            "tables_in_context": None if context is None else tuple(context),
        }
        return out.failed(kind, message, usage=usage, latency_s=latency, **tables), None
    tables = _plain(pred.tables_in_context)
    ranked = _plain(pred.tables_ranked)
    usage = _counters(_plain(pred.usage))
    out = dataclasses.replace(
        out,
        pred_sql=pred.sql,
        tables_in_context=None if tables is None else tuple(str(t) for t in tables),
        tables_ranked=None if not isinstance(ranked, list) else tuple(str(t) for t in ranked),
        usage=usage,
        latency_s=_latency(time.perf_counter() - started, usage),
    )
    try:
        return _run_on_states(out, q, pred.sql, states, gold_rows, statement_timeout, timed=timed)
    except Exception as exc:  # the harness's own failure: this question's outcome, not a crash
        where = traceback.format_exception_only(type(exc), exc)[-1].strip()
        return out.failed(ErrorKind.INFRA_CRASH, f"scoring failed: {where}"[:2000]), None


def _run_on_states(
    out: Outcome,
    q: GoldQuestion,
    sql: str,
    states: Sequence[StateRef],
    gold_rows: dict[int, Any],
    statement_timeout: float,
    *,
    timed: bool = False,
) -> tuple[Outcome, Any]:
    """Score ``sql`` on every state. An answer right on a state runs there a second time and
    must give the same rows (as a multiset), except on the first state when ``timed``: the
    timing runs repeat it there (:func:`_efficiency`); every run is a fresh connection
    (:func:`pytest_heron.sandbox.execute`). An answer whose parse tree calls a volatile
    function (:mod:`~pytest_heron.scoring.volatility`), directly or through a view, or whose
    repeat differs is wrong, with a reason starting "volatile result" (also when it failed to
    run because the scoring role may not call what it called)."""
    exact = exact_match(q.gold_sql, sql)
    out = dataclasses.replace(out, exact_match=exact)
    reasons: list[tuple[int, str]] = []
    side: str | None = None  # the first rows of gold and the prediction, on the first wrong state
    verdicts: dict[str, bool] = {}
    set_verdicts: dict[str, bool] = {}
    superset_all = True
    soft_f1: float | None = None
    first_rows: Any = None
    unstable: list[str] = []
    # decided on the tree and the catalog before anything runs: an answer the roles refuse
    # (pg_backend_pid(), pg_stat_activity) fails, and still names what it called
    flagged = volatile_reason(sql, server_catalog(states[0].admin_dsn)) if states else None
    for i, state in enumerate(states):
        seed = str(state.seed)
        if state.seed not in gold_rows:
            gold = sandbox.execute_gold(state.admin_dsn, q.gold_sql, timeout_s=statement_timeout)
            if not gold.ok:
                verdicts[seed] = set_verdicts[seed] = False
                return out.failed(
                    ErrorKind.INFRA_CRASH,
                    f"the gold SQL failed on seed {state.seed}: {gold.result.error} (the state may "
                    "be damaged: rebuild it with `heron seed --replace`, or run "
                    "`python -m pytest_heron.audit`)",
                    correct_by_state=verdicts,
                    correct_set_by_state=set_verdicts,
                ), None
            gold_rows[state.seed] = gold  # its rows, and the order an answer must keep
        got = sandbox.execute(state.reader_dsn, sql, timeout_s=statement_timeout)
        if not got.ok:
            verdicts[seed] = set_verdicts[seed] = False
            kind = ErrorKind(got.error_kind) if got.error_kind else ErrorKind.DB_ERROR
            failed = out.failed(
                kind, got.error or "", correct_by_state=verdicts, correct_set_by_state=set_verdicts
            )
            return (failed if flagged is None else volatile(failed, flagged)), None
        gold_run: sandbox.GoldResult = gold_rows[state.seed]
        result = gold_run.compare(got.rows)
        verdicts[seed] = result.equal
        set_verdicts[seed] = set_equal(gold_run.rows, got.rows, result.equal)
        superset_ok = result.equal or (
            _wider(got.rows, gold_run.rows) and gold_run.compare(got.rows, superset=True).equal
        )
        superset_all = superset_all and superset_ok
        if i == 0:
            soft_f1 = round(
                compare.soft_f1(gold_run.rows, got.rows, equal=True if result.equal else None),
                6,
            )
            first_rows = got.rows
        if not result.equal:
            reasons.append((state.seed, str(result.reason)))
            if side is None:
                try:  # a display aid: never the reason a question fails to score
                    side = rows_side_by_side(gold_run.rows, got.rows, state.seed)
                except Exception:
                    side = ""
        elif not (timed and i == 0) and not unstable:
            again = sandbox.execute(state.reader_dsn, sql, timeout_s=statement_timeout)
            if not again.ok or not compare.compare(got.rows, again.rows).equal:
                unstable.append(
                    f"{VOLATILE}: seed {state.seed}: a second run of the SQL returned "
                    f"{'an error' if not again.ok else 'other rows'}"
                )
    done = dataclasses.replace(
        out,
        correct=bool(states) and all(verdicts.values()),
        correct_by_state=verdicts,
        correct_superset=bool(states) and superset_all,
        correct_set=bool(states) and all(set_verdicts.values()),
        correct_set_by_state=set_verdicts,
        soft_f1=soft_f1,
        reason=None if not reasons else "\n".join(filter(None, [joined_reasons(reasons), side])),
    )
    if flagged is not None:
        unstable.insert(0, flagged)
    if unstable:
        done = volatile(done, "\n".join(unstable))
    return done, first_rows


SHOWN_ROWS = 3
ROW_TEXT = 60
GOLD_SCANNED = 10_000  # gold rows looked through to mark a predicted row as not in gold


def _row_text(row: Any) -> str:
    text = compare.fmt_row(tuple(row))  # as the comparator's own messages write values
    return text if len(text) <= ROW_TEXT else text[: ROW_TEXT - 3] + "..."


def rows_side_by_side(gold: Sequence[Any], predicted: Sequence[Any], seed: int) -> str:
    """Gold's first rows beside the prediction's, on one state. Each predicted row is marked:
    ``=`` gold has this row at this position, ``~`` it is one of gold's rows but at another
    position, ``≠`` it is none of gold's rows as written (columns in another order are not
    recognised). The first row not marked ``=`` is where the two first differ.

    >>> print(rows_side_by_side([(1, "a"), (2, "b")], [(1, "a"), (3, "c"), (2, "b")], 42))
    first rows on seed 42 (gold 2 rows | predicted 3 rows):
        (1, 'a') | = (1, 'a')
        (2, 'b') | ≠ (3, 'c')
                 | ~ (2, 'b')
        (= the same row there, ~ one of gold's rows but elsewhere, ≠ none of gold's rows)
    >>> from decimal import Decimal
    >>> print(rows_side_by_side([(Decimal("1.50"), None)], [], 7))
    first rows on seed 7 (gold 1 rows | predicted 0 rows):
        (1.50, NULL) | (none)
    """
    known = {repr(tuple(r)) for r in list(gold[:GOLD_SCANNED])}
    left = [_row_text(r) for r in list(gold[:SHOWN_ROWS])]
    right = []
    for i, row in enumerate(list(predicted[:SHOWN_ROWS])):
        text = repr(tuple(row))
        if i < len(gold) and text == repr(tuple(gold[i])):
            mark = "= "
        else:
            mark = "~ " if text in known else "≠ "
        right.append(mark + _row_text(row))
    width = max([len(t) for t in left] + [8])
    lines = [
        f"first rows on seed {seed} (gold {len(gold)} rows | predicted {len(predicted)} rows):"
    ]
    for i in range(max(len(left), len(right), 1)):
        a = left[i] if i < len(left) else ("(none)" if not left and i == 0 else "")
        b = right[i] if i < len(right) else ("(none)" if not right and i == 0 else "")
        lines.append(f"    {a:<{width}} | {b}".rstrip())
    if right:
        lines.append(
            "    (= the same row there, ~ one of gold's rows but elsewhere, ≠ none of gold's rows)"
        )
    return "\n".join(lines)


def joined_reasons(reasons: list[tuple[int, str]]) -> str | None:
    """The counterexamples by state, one line per distinct text: states that disagree with gold
    the same way share a line (``seeds 42, 43, 44: ...``) instead of repeating it.

    >>> print(joined_reasons([(42, "row counts differ"), (43, "x"), (44, "row counts differ")]))
    seeds 42, 44: row counts differ
    seed 43: x
    >>> joined_reasons([]) is None
    True
    """
    if not reasons:
        return None
    grouped: dict[str, list[int]] = {}
    for seed, text in reasons:
        grouped.setdefault(text, []).append(seed)
    lines = []
    for text, seeds in grouped.items():  # insertion order: the first state's text first
        label = "seed" if len(seeds) == 1 else "seeds"
        lines.append(f"{label} {', '.join(str(s) for s in seeds)}: {text}")
    return "\n".join(lines)


def _efficiency(
    state: StateRef, q: GoldQuestion, pred_sql: str, scored: Any, timeout_s: float, runs: int
) -> float | None:
    """``min(VES_FACTOR_CAP, sqrt(t_gold / t_pred))`` on the first state, or None.

    Each time is the minimum wall clock of ``runs`` full executions (connect, run, fetch every
    row: the same executor and path that scored the answer) after one warm-up, gold and
    prediction interleaved. Every timed run of the prediction must return the rows that were
    scored; one that does not (a query that behaves differently when run again) raises
    :class:`VolatileTiming`: the answer is wrong, not merely untimed."""
    best = {"gold": math.inf, "pred": math.inf}
    # the repeats are held to the sort keys gold's SQL maps, else compared as multisets (when
    # gold's order needs hidden keys, a repeat may reorder tied rows and still be the same)
    keys = compare.order_keys(q.gold_sql) or None
    for attempt in range(runs + 1):
        for side in ("gold", "pred"):
            if side == "gold":
                got = sandbox.execute(state.admin_dsn, q.gold_sql, timeout_s=timeout_s, guard=False)
            else:
                # the guard accepted this very text when it was scored: not parsed again here,
                # so both sides are timed from connect to the last row and nothing else
                got = sandbox.execute(state.reader_dsn, pred_sql, timeout_s=timeout_s, guard=False)
                if got.ok and not compare.compare(scored, got.rows, order=keys).equal:
                    raise VolatileTiming(
                        f"{VOLATILE}: seed {state.seed}: timed run {attempt + 1} of the SQL "
                        "returned other rows than the run that was scored"
                    )
            if not got.ok:
                return None
            if attempt > 0:
                best[side] = min(best[side], got.seconds)
    ratio = max(best["gold"], 1e-6) / max(best["pred"], 1e-6)
    return round(min(VES_FACTOR_CAP, math.sqrt(ratio)), 6)
