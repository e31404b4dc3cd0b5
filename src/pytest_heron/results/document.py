"""The results file and the terminal summary."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_heron.results.files import write_atomic
from pytest_heron.scoring import metrics

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
    "price",
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
    summary = metrics.summary(
        ordered,
        first_seed,
        samples=int(conditions.get("samples") or 1),
        price=conditions.get("price"),
    )
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


def write_results(path: Path, doc: Mapping[str, Any]) -> None:
    write_atomic(path, json.dumps(doc, indent=2, sort_keys=False) + "\n")
