"""The results file and the terminal summary."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_heron import metrics

RESULTS_VERSION = 1
CONDITION_KEYS = (
    "adapter",
    "adapter_version",
    "scale",
    "seeds",
    "states",
    "model",
    "temperature",
    "samples",
    "strategy",
    "n_questions",
    "tables",
    "schemas",
    "rows",
    "backend",
    "postgres_version",
    "heron_version",
    "started_at",
    "machine",
)
QUESTION_KEYS = (
    "id",
    "correct",
    "correct_by_state",
    "error_kind",
    "error",
    "pred_sql",
    "tables_in_context",
    "usage",
    "latency_s",
    "ves",
    "soft_f1",
)


def results_document(
    conditions: Mapping[str, Any], outcomes: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """The results file as a dict: version, conditions, metrics, breakdown, questions."""
    ordered = sorted(outcomes, key=lambda o: str(o["id"]))
    first_seed = int(conditions["seeds"][0])
    summary = metrics.summary(ordered, first_seed)
    summary.pop("n")
    return {
        "version": RESULTS_VERSION,
        "conditions": {k: conditions.get(k) for k in CONDITION_KEYS},
        "metrics": summary,
        "breakdown": metrics.breakdown(ordered, first_seed),
        "questions": [
            {
                **{k: o.get(k) for k in QUESTION_KEYS},
                **{k: v for k, v in o.items() if k not in QUESTION_KEYS},
            }
            for o in ordered
        ],
    }


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that readers see the old file or the new one, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    os.chmod(tmp, 0o644)  # mkstemp makes the file private; results are meant to be shared
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_results(path: Path, doc: Mapping[str, Any]) -> None:
    write_atomic(path, json.dumps(doc, indent=2, sort_keys=False) + "\n")


def _fmt(value: Any, suffix: str = "%") -> str:
    return "n/a" if value is None else f"{value:.1f}{suffix}"


def _interval(ci: Any) -> str:
    return "n/a" if not ci else f"[{ci[0]:.1f}%, {ci[1]:.1f}%]"


def conditions_line(c: Mapping[str, Any]) -> str:
    seeds = ",".join(str(s) for s in c.get("seeds") or [])
    return (
        f"adapter={c.get('adapter')} scale={c.get('scale')} seeds={seeds} states={c.get('states')}"
        f" model={c.get('model') or 'n/a'} temperature={c.get('temperature')}"
        f" samples={c.get('samples')}"
        + (f" strategy={c['strategy']}" if c.get("strategy") else "")
        + f" n={c.get('n_questions')}"
        f" backend={c.get('backend')} postgres={c.get('postgres_version')}"
        f" data={c.get('tables')} tables/{c.get('rows')} rows"
    )


def summary_lines(doc: Mapping[str, Any]) -> list[str]:
    """The terminal summary: conditions first, then the headline and the breakdown."""
    c, m = doc["conditions"], doc["metrics"]
    n = len(doc["questions"])
    states = c.get("states")
    lines = [
        conditions_line(c),
        f"multi-state EX@1 (all {states} states): {_fmt(m['ex_multistate'])}   "
        f"EX@1 (seed {c['seeds'][0]} only): {_fmt(m['ex1'])}   "
        f"errors: {m['errors']}/{n}   Set-Recall: {_fmt(m['set_recall'])}   "
        f"latency median/p90: {_fmt(m['latency_s_median'], 's')}/"
        f"{_fmt(m.get('latency_s_p90'), 's')}",
        f"95% bootstrap interval of multi-state EX: {_interval(m.get('ex_multistate_ci95'))}   "
        f"exact match (sqlglot-normalised SQL, not EX): {_fmt(m['exact_match'])}   "
        f"Soft-F1: {_fmt(m['soft_f1'])}   VES (seed {c['seeds'][0]}): {_fmt(m['ves'], '')}",
        f"Grade: {_fmt(m['grade'], '')} = "
        + " + ".join(f"{w:.2f}·{k}" for k, w in metrics.GRADE_WEIGHTS.items())
        + f" (alone: T_ref={metrics.REF_TOKENS_PER_Q:g} tokens/q,"
        f" L_ref={metrics.REF_LATENCY_S:g}s)",
    ]
    kinds = metrics.error_kinds(doc["questions"])
    if kinds:
        lines.append("errors by kind: " + ", ".join(f"{k}={v}" for k, v in kinds.items()))
    for axis, buckets in doc["breakdown"].items():
        if not buckets:
            continue
        cells = [f"{name} {_fmt(b['ex_multistate'])} (n={b['n']})" for name, b in buckets.items()]
        lines.append(f"by {axis}: " + "; ".join(cells))
    return lines
