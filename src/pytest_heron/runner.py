"""Answer and score one question: adapter -> prediction -> sandbox on every state -> compare.

The outcome is a plain JSON-able dict (the ``questions`` entry of the results file), so it can
travel on an xdist test report unchanged.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pytest_heron import compare, metrics, sandbox
from pytest_heron.adapters import to_prediction
from pytest_heron.errors import AdapterError, InvalidPrediction
from pytest_heron.types import Adapter, Prediction, Question


@dataclass(frozen=True)
class StateRef:
    """What a process needs to query one state (plain data, sent to xdist workers)."""

    seed: int
    database: str
    admin_dsn: str
    reader_dsn: str


class AdapterTimeout(Exception):
    pass


def _call_with_deadline(adapter: Adapter, q: Question, timeout_s: float) -> Any:
    """Call ``adapter.generate(q)``; give up after ``timeout_s`` (the call is abandoned)."""
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["value"] = adapter.generate(q)
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
    }


def score_question(
    adapter: Adapter,
    q: Question,
    states: Sequence[StateRef],
    *,
    adapter_timeout: float,
    statement_timeout: float,
    time_runs: int = 5,
) -> dict[str, Any]:
    """Run the adapter on ``q`` and score its SQL on every state. Never raises for the
    prediction's or the adapter's faults: they become the outcome's ``error_kind``."""
    out = new_outcome(q)
    started = time.perf_counter()
    try:
        raw = _call_with_deadline(adapter, q, adapter_timeout)
        pred: Prediction = to_prediction(raw)
    except AdapterTimeout as exc:
        out.update(error_kind="adapter_timeout", error=str(exc))
        return out
    except InvalidPrediction as exc:
        out.update(error_kind="invalid_prediction", error=str(exc))
        return out
    except AdapterError as exc:
        out.update(error_kind="adapter_error", error=str(exc), usage=_usage_of(exc))
        return out
    except TimeoutError as exc:
        out.update(error_kind="adapter_timeout", error=str(exc) or "the adapter timed out")
        out["usage"] = _usage_of(exc)
        return out
    except Exception as exc:
        out.update(error_kind="adapter_error", error=f"{type(exc).__name__}: {exc}")
        out["usage"] = _usage_of(exc)
        return out
    finally:
        out["latency_s"] = round(time.perf_counter() - started, 6)
    out["pred_sql"] = pred.sql
    out["tables_in_context"] = _plain(pred.tables_in_context)
    out["usage"] = _plain(pred.usage)
    out["exact_match"] = metrics.exact_match(q.gold_sql, pred.sql)
    keys = compare.order_keys(q.gold_sql)
    reasons = []
    for i, state in enumerate(states):
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
        got = sandbox.execute(state.reader_dsn, pred.sql, timeout_s=statement_timeout)
        if not got.ok:
            out.update(error_kind=got.error_kind, error=got.error)
            out["correct_by_state"][str(state.seed)] = False
            return out
        result = compare.compare(gold.rows, got.rows, order=keys)
        out["correct_by_state"][str(state.seed)] = result.equal
        if i == 0:
            out["soft_f1"] = round(metrics.soft_f1(gold.rows, got.rows), 6)
        if not result.equal:
            reasons.append(f"seed {state.seed}: {result.reason}")
    out["correct"] = bool(states) and all(out["correct_by_state"].values())
    if reasons:
        out["reason"] = "\n".join(reasons)
    if out["correct"] and time_runs:
        out["ves"] = _efficiency(states[0], q.gold_sql, pred.sql, statement_timeout, time_runs)
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
