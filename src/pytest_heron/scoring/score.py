"""Answer and score one question: adapter -> prediction -> sandbox on every state -> compare.

The outcome is a plain JSON-able dict (the ``questions`` entry of the results file), so it can
travel on an xdist test report unchanged.
"""

from __future__ import annotations

import inspect
import math
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_heron import compare, sandbox
from pytest_heron.errors import AdapterError, InvalidPrediction
from pytest_heron.scoring import similarity
from pytest_heron.systems.registry import to_prediction
from pytest_heron.types import Adapter, Prediction, Question


@dataclass(frozen=True)
class StateRef:
    """What a process needs to query one state (plain data, sent to xdist workers)."""

    seed: int
    database: str
    admin_dsn: str
    reader_dsn: str
    adapter_dsn: str | None = None  # the system under test's DSN (first state only)


class AdapterTimeout(Exception):
    pass


def accepts_sample(adapter: Adapter) -> bool:
    """Whether ``adapter.generate`` takes a ``sample`` keyword (see :class:`Adapter`)."""
    try:
        params = inspect.signature(adapter.generate).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == "sample" or p.kind is p.VAR_KEYWORD for p in params)


def _call_with_deadline(adapter: Adapter, q: Question, timeout_s: float, sample: int | None) -> Any:
    """Call ``adapter.generate(q)`` (with ``sample=`` when given); give up after ``timeout_s``
    (the call is abandoned)."""
    box: dict[str, Any] = {}

    generate: Any = adapter.generate  # ``sample`` is an optional extension of the protocol

    def work() -> None:
        try:
            box["value"] = generate(q) if sample is None else generate(q, sample=sample)
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=work, name=f"heron-adapter-{q.id}", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        raise AdapterTimeout(f"the adapter did not answer within {timeout_s:g}s")
    if "error" in box:
        raise box["error"]
    return box.get("value")


def _plain(value: Any) -> Any:
    """JSON-safe copy of usage/tables data."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def _adapter_failure(exc: Exception) -> tuple[str, str]:
    """The error kind and message of an adapter that did not produce a usable prediction."""
    if isinstance(exc, AdapterTimeout):
        return "adapter_timeout", str(exc)
    if isinstance(exc, InvalidPrediction):
        return "invalid_prediction", str(exc)
    if isinstance(exc, AdapterError):
        return "adapter_error", str(exc)
    if isinstance(exc, TimeoutError):
        return "adapter_timeout", str(exc) or "the adapter timed out"
    return "adapter_error", f"{type(exc).__name__}: {exc}"


def _usage_of(exc: BaseException) -> Any:
    """What a failed adapter billed before failing, when it says so (an LLM adapter attaches
    its meter's usage to the error as ``usage``)."""
    return _plain(getattr(exc, "usage", None))


def new_outcome(q: Question) -> dict[str, Any]:
    return {
        "id": q.id,
        "shape": q.shape,
        "retrieval": q.retrieval,
        "traps": list(q.traps),
        "gold_tables": list(q.gold_tables),
        "correct": False,
        "correct_by_state": {},
        "error_kind": None,
        "error": None,
        "reason": None,
        "pred_sql": None,
        "tables_in_context": None,
        "usage": None,
        "latency_s": None,
        "ves": None,
        "soft_f1": None,
        "exact_match": False,
        "correct_superset": False,
    }


def score_question(
    adapter: Adapter,
    q: Question,
    states: Sequence[StateRef],
    *,
    adapter_timeout: float,
    statement_timeout: float,
    time_runs: int = 5,
    samples: int = 1,
) -> dict[str, Any]:
    """Run the adapter on ``q`` and score its SQL on every state. Never raises for the
    prediction's or the adapter's faults: they become the outcome's ``error_kind``.

    With ``samples`` > 1 the adapter answers ``samples`` times; the outcome's own fields describe
    sample 0 (EX@1, VES and Soft-F1 use it), ``samples`` lists every sample's SQL and correctness
    (for EX@k), and ``usage`` is summed over all samples, since every sample was billed."""
    gold_rows: dict[int, Any] = {}
    with_index = samples > 1 and accepts_sample(adapter)
    every = [
        _score_sample(
            adapter,
            q,
            states,
            gold_rows,
            adapter_timeout,
            statement_timeout,
            sample=i if with_index else None,
        )
        for i in range(samples)
    ]
    first = every[0]
    if first["correct"] and time_runs:
        first["ves"] = _efficiency(
            states[0], q.gold_sql, first["pred_sql"], statement_timeout, time_runs
        )
    if samples > 1:
        first["samples"] = [
            {
                "sample": i,
                "correct": o["correct"],
                "error_kind": o["error_kind"],
                "pred_sql": o["pred_sql"],
            }
            for i, o in enumerate(every)
        ]
        first["usage"] = _sum_usage([o["usage"] for o in every])
    return first


def _sum_usage(usages: Sequence[Mapping[str, Any] | None]) -> dict[str, Any] | None:
    """Numeric usage counters summed over samples (non-numeric entries keep the first value)."""
    total: dict[str, Any] = {}
    for usage in usages:
        for key, value in (usage or {}).items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                total[key] = total.get(key, 0) + value
            else:
                total.setdefault(key, value)
    return total or None


def _wider(pred: Sequence[Sequence[Any]], gold: Sequence[Sequence[Any]]) -> bool:
    """Whether the prediction has more columns than gold (the only case superset mode changes)."""
    return bool(pred) and bool(gold) and len(pred[0]) > len(gold[0])


def _score_sample(
    adapter: Adapter,
    q: Question,
    states: Sequence[StateRef],
    gold_rows: dict[int, Any],
    adapter_timeout: float,
    statement_timeout: float,
    *,
    sample: int | None,
) -> dict[str, Any]:
    """One answer from the adapter, scored on every state (gold results cached across samples)."""
    out = new_outcome(q)
    started = time.perf_counter()
    try:
        raw = _call_with_deadline(adapter, q, adapter_timeout, sample)
        pred: Prediction = to_prediction(raw)
    except Exception as exc:
        kind, message = _adapter_failure(exc)
        out.update(error_kind=kind, error=message, usage=_usage_of(exc))
        return out
    finally:
        out["latency_s"] = round(time.perf_counter() - started, 6)
    out["pred_sql"] = pred.sql
    out["tables_in_context"] = _plain(pred.tables_in_context)
    out["usage"] = _plain(pred.usage)
    out["exact_match"] = similarity.exact_match(q.gold_sql, pred.sql)
    keys = compare.order_keys(q.gold_sql)
    reasons = []
    superset_all = True
    for i, state in enumerate(states):
        if state.seed not in gold_rows:
            gold = sandbox.execute(
                state.admin_dsn, q.gold_sql, timeout_s=statement_timeout, guard=False
            )
            if not gold.ok:
                out.update(
                    error_kind="infra_crash",
                    error=f"the gold SQL failed on seed {state.seed}: {gold.error}",
                )
                out["correct_by_state"][str(state.seed)] = False
                return out
            gold_rows[state.seed] = gold.rows
        got = sandbox.execute(state.reader_dsn, pred.sql, timeout_s=statement_timeout)
        if not got.ok:
            out.update(error_kind=got.error_kind, error=got.error)
            out["correct_by_state"][str(state.seed)] = False
            return out
        result = compare.compare(gold_rows[state.seed], got.rows, order=keys)
        out["correct_by_state"][str(state.seed)] = result.equal
        superset_ok = result.equal or (
            _wider(got.rows, gold_rows[state.seed])
            and compare.compare(gold_rows[state.seed], got.rows, order=keys, superset=True).equal
        )
        superset_all = superset_all and superset_ok
        if i == 0:
            out["soft_f1"] = round(similarity.soft_f1(gold_rows[state.seed], got.rows), 6)
        if not result.equal:
            reasons.append(f"seed {state.seed}: {result.reason}")
    out["correct"] = bool(states) and all(out["correct_by_state"].values())
    out["correct_superset"] = bool(states) and superset_all
    if reasons:
        out["reason"] = "\n".join(reasons)
    return out


def _efficiency(
    state: StateRef, gold_sql: str, pred_sql: str, timeout_s: float, runs: int
) -> float | None:
    """``sqrt(t_gold / t_pred)`` with each time the minimum of ``runs`` executions after one
    warm-up, gold and prediction interleaved on the first state (server-side execution time)."""
    best = {"gold": float("inf"), "pred": float("inf")}
    for attempt in range(runs + 1):
        for side, dsn, text in (
            ("gold", state.admin_dsn, gold_sql),
            ("pred", state.reader_dsn, pred_sql),
        ):
            ms = sandbox.execution_ms(dsn, text, timeout_s=timeout_s)
            if ms is None:
                return None
            if attempt > 0:
                best[side] = min(best[side], ms)
    return round(math.sqrt(max(best["gold"], 1e-3) / max(best["pred"], 1e-3)), 6)
