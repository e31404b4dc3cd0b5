"""A file of predictions, scored without an adapter: ``--heron-adapter=file
--heron-predictions=FILE.jsonl``.

The file is JSON lines, one object per question: ``{"id": "q001", "sql": "SELECT ..."}``, with
an optional ``"tables"`` (the tables the system put in its model's context, a list of strings,
for Set-Recall) and an optional ``"tables_ranked"`` (its table retrieval's ranking, best first,
for Set-Recall@k). It comes from elsewhere, so it is read as untrusted input: every problem is
collected and reported before the first question, each naming its line (a line that is not a
JSON object, a field of the wrong type, an unknown field, an id the question set does not have,
an id given twice), then every question without a prediction. The SQL itself is untrusted as
any adapter's is: it goes through the sandbox like every other answer. The file's SHA-256 is
recorded in the run's conditions.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_heron.core.errors import ConfigError
from pytest_heron.core.outside import Limits, OutsideFileError, loads_json
from pytest_heron.core.safe_text import printable

MAX_BYTES = 64 * 1024 * 1024  # a predictions file larger than this is refused unread
MAX_PROBLEMS = 10  # problems listed in the error (the count says how many more)
FIELDS = ("id", "sql", "tables", "tables_ranked")
LINE_LIMITS = Limits(max_bytes=MAX_BYTES, max_depth=8, max_items=10_000)
# a variant's id (audit.variants.variant_id): the public parent, the variant seed, the index


def quoted(text: str) -> str:
    """At most 60 characters of ``text``, printable, in quotes (it came from the file)."""
    return repr(printable(text[:60]) + ("..." if len(text) > 60 else ""))


@dataclass(frozen=True)
class PredictionFile:
    path: Path
    sha256: str
    sql: dict[str, str]  # question id -> predicted SQL
    tables: dict[str, list[str]]  # question id -> tables in context, where given
    ranked: dict[str, list[str]] = field(default_factory=dict)  # id -> ranking, where given


def _line_problem(number: int, value: Any, known: Collection[str]) -> str | None:
    if not isinstance(value, dict):
        return f"line {number}: expected a JSON object with 'id' and 'sql'"
    unknown = sorted(str(k) for k in value if k not in FIELDS)
    if unknown:
        return f"line {number}: unknown field {quoted(unknown[0])} (allowed: {', '.join(FIELDS)})"
    qid, sql = value.get("id"), value.get("sql")
    if not isinstance(qid, str):
        return f"line {number}: 'id' must be a string"
    if qid not in known:
        return f"line {number}: unknown question id {quoted(qid)}"
    if not isinstance(sql, str):
        return f"line {number}: 'sql' of {qid!r} must be a string"
    for key in ("tables", "tables_ranked"):
        tables = value.get(key)
        if tables is not None and not (
            isinstance(tables, list) and all(isinstance(t, str) for t in tables)
        ):
            return f"line {number}: {key!r} of {qid!r} must be a list of strings"
    return None


def _public_ids_on_variants(
    path: Path, unknown: list[str], known: Collection[str], parents: Mapping[str, str]
) -> str | None:
    """The one-line error for a file keyed by the public questions' ids in a run on variants
    (``--heron-variants``, whose ids name no parent): every unknown id is the public parent of
    a variant the run asks (``parents``: a public id -> the run's first variant of it). None
    when that is not the case."""
    asked = {p: v for p, v in parents.items() if v in known}
    if not unknown or not asked or any(u not in asked for u in unknown):
        return None
    first = unknown[0]
    return (
        f"--heron-predictions {path}: its ids are the public questions' ({quoted(first)} and "
        f"{len(unknown) - 1} more), but this run asks never-published variants "
        f"(--heron-variants): key by variant id (here {asked[first]!r} for {first!r}; "
        "`heron variants --seed SEED --count N` prints the run's ids and questions)"
    )


def load_predictions(
    path: Path,
    question_ids: Collection[str],
    *,
    every: bool = True,
    parents: Mapping[str, str] | None = None,
) -> PredictionFile:
    """Read and check ``path`` against the run's question ids; ConfigError listing every
    problem (see the module docstring). With ``every=False`` (a run narrowed by ``-k`` or
    ``-m``) questions without a line are allowed here; the plugin then checks the selected
    ones (:func:`missing_for`)."""
    where = f"--heron-predictions {path}"
    try:
        if not path.is_file():
            raise ConfigError(f"{where}: no such file")
        if path.stat().st_size > MAX_BYTES:
            raise ConfigError(f"{where}: larger than {MAX_BYTES >> 20} MiB")
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{where}: cannot be read ({exc.strerror or exc})") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{where}: not UTF-8 (byte {exc.start})") from None
    problems: list[str] = []
    sql: dict[str, str] = {}
    tables: dict[str, list[str]] = {}
    ranked: dict[str, list[str]] = {}
    first_line: dict[str, int] = {}
    unknown: list[str] = []  # ids the question set does not have, in file order
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            value = loads_json(line, f"line {number}", LINE_LIMITS)
        except OutsideFileError as exc:
            problems.append(str(exc))
            continue
        problem = _line_problem(number, value, question_ids)
        qid = value.get("id") if isinstance(value, dict) else None
        if isinstance(qid, str) and qid not in question_ids:
            unknown.append(qid)
        if problem is None and value["id"] in first_line:
            qid = value["id"]
            problem = f"line {number}: {qid!r} again (first on line {first_line[qid]})"
        if problem is not None:
            problems.append(problem)
            continue
        first_line[value["id"]] = number
        sql[value["id"]] = value["sql"]
        if value.get("tables") is not None:
            tables[value["id"]] = list(value["tables"])
        if value.get("tables_ranked") is not None:
            ranked[value["id"]] = list(value["tables_ranked"])
    missing = sorted(q for q in question_ids if q not in sql and q not in first_line)
    if missing and every:
        shown = ", ".join(missing[:MAX_PROBLEMS]) + (
            f" and {len(missing) - MAX_PROBLEMS} more" if len(missing) > MAX_PROBLEMS else ""
        )
        problems.append(f"no prediction for {len(missing)} question(s): {shown}")
    keyed_by_public = _public_ids_on_variants(path, unknown, question_ids, parents or {})
    if keyed_by_public is not None:
        raise ConfigError(keyed_by_public)
    if problems:
        more = len(problems) - MAX_PROBLEMS
        listed = "; ".join(problems[:MAX_PROBLEMS]) + (f"; and {more} more" if more > 0 else "")
        raise ConfigError(
            f"{where}: {len(problems)} problem(s): {listed}. Expected one JSON object per line, "
            '{"id": "q001", "sql": "SELECT ..."}, for every question of the set'
        )
    return PredictionFile(path, hashlib.sha256(data).hexdigest(), sql, tables, ranked)


def missing_for(predictions: PredictionFile, selected: Collection[str]) -> str | None:
    """The usage error for selected questions the file has no line for; None when it has all."""
    missing = sorted(q for q in selected if q not in predictions.sql)
    if not missing:
        return None
    shown = ", ".join(missing[:MAX_PROBLEMS]) + (
        f" and {len(missing) - MAX_PROBLEMS} more" if len(missing) > MAX_PROBLEMS else ""
    )
    return (
        f"--heron-predictions {predictions.path}: no prediction for {len(missing)} selected "
        f"question(s): {shown}. Add their lines, or narrow the selection (-k, -m) to the "
        "questions the file answers"
    )
