"""The report folder of ``--heron-report``: results.json, questions.csv and the run's pages.

``report.html`` is the run page of the results site (:mod:`pytest_heron.site`), rendered by the
same templates as ``heron site``, with a page per question and the schema pages beside it; no
page fetches anything. ``questions.csv`` has one row per question: every outcome field but the
nested ones, billed tokens, then the question's English and gold SQL; every cell is made
printable and a cell starting with ``=``, ``+``, ``-`` or ``@`` is quoted so a spreadsheet shows
it rather than running it.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_heron.core.safe_text import csv_cell
from pytest_heron.dataset import GoldQuestion
from pytest_heron.results import Results, write_atomic, write_results
from pytest_heron.scoring import FIELDS as OUTCOME_FIELDS
from pytest_heron.scoring import Outcome, failure_mode

CSV_COLUMNS = (
    *(f for f in OUTCOME_FIELDS if f not in ("usage", "samples")),
    "tokens",
    "question",
    "gold_sql",
    "tokens_prompt",
    "tokens_prompt_cached",
    "tokens_completion",
    "tokens_reasoning",
    "failure_mode",
)  # every outcome field but the nested ones, billed tokens, the question itself, then the
# billed tokens' split and the failure mode
_USAGE_COLUMNS = {
    "tokens_prompt": "prompt_tokens",
    "tokens_prompt_cached": "prompt_tokens_cached",
    "tokens_completion": "completion_tokens",
    "tokens_reasoning": "completion_tokens_reasoning",
}


def _tokens(o: Outcome) -> int:
    """Billed tokens of one question (prompt + completion, as the provider reported them)."""
    return sum(int(v) for k, v in (o.usage or {}).items() if k.endswith("_tokens"))


def _csv_value(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return " ".join(str(v) for v in value)
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True)
    return value


def questions_csv(results: Results, questions: Mapping[str, GoldQuestion] | None = None) -> str:
    """One row per outcome (see the module docstring); ``question`` and ``gold_sql`` are empty
    for a question not in ``questions``."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for o in results.outcomes:
        row = {k: _csv_value(v) for k, v in o.to_json().items()}
        row["tokens"] = _tokens(o) if o.usage else None
        q = (questions or {}).get(o.id)
        row["question"] = q.question if q else None
        row["gold_sql"] = q.gold_sql if q else None
        for column, key in _USAGE_COLUMNS.items():
            row[column] = (o.usage or {}).get(key)  # empty when not reported
        row["failure_mode"] = failure_mode(o)
        writer.writerow([csv_cell(row.get(c)) for c in CSV_COLUMNS])
    return out.getvalue()


REPORT_FILES = ("results.json", "questions.csv", "report.html")


def check_report_folder(folder: Path) -> None:
    """Fail before the run when a file the report writes exists as a folder (or other non-file)
    in ``folder``: the run would otherwise end with the report unwritten."""
    from pytest_heron.core.errors import ConfigError

    for name in REPORT_FILES:
        path = folder / name
        if path.exists() and not path.is_file():
            raise ConfigError(
                f"--heron-report: {path} is a folder (or not a regular file); the report writes "
                f"a file there: remove it or choose another --heron-report folder"
            )


def write_report(
    folder: Path, results: Results, questions: Sequence[GoldQuestion] | None = None
) -> None:
    """results.json, questions.csv, report.html and its question and schema pages in ``folder``
    (each written atomically). ``questions`` is the run's question set (default: built-in)."""
    from pytest_heron.dataset import load_questions
    from pytest_heron.site.build import report_pages, write_files

    qs = list(questions) if questions is not None else load_questions()
    pages = report_pages(results, qs, str(folder / "results.json"))
    folder.mkdir(parents=True, exist_ok=True)
    write_results(folder / "results.json", results)
    write_atomic(folder / "questions.csv", questions_csv(results, {q.id: q for q in qs}))
    write_files(folder, pages)
