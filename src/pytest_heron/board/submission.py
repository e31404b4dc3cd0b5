"""``heron submit``: a results file made into a submission folder small enough for a pull request.

A submission folder ``submissions/<name>/`` holds

- ``submission.yaml``: who and what (tool, version, approach, model, temperature, strategy,
  samples, contact, link) and the run's conditions;
- ``predictions.jsonl``: one line per question and sample (id, sample, pred SQL, tables in
  context, billed usage, latency, and the error kind the run recorded);
- ``claimed.json``: the metrics and breakdown exactly as the run computed them;
- optionally ``llm-cache.sqlite3``, the LLM response cache of the run;
- ``DIGEST``: SHA-256 over the sorted file names and bytes of every other file (``verdict.json``,
  written later by CI, is not part of the content).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from pytest_heron.core.errors import HeronError
from pytest_heron.core.records import JSON
from pytest_heron.results import Results

SUBMISSION_FORMAT = 1
META = "submission.yaml"
PREDICTIONS = "predictions.jsonl"
CLAIMED = "claimed.json"
CACHE = "llm-cache.sqlite3"
DIGEST = "DIGEST"
VERDICT = "verdict.json"
CONTENT = (META, PREDICTIONS, CLAIMED, CACHE)  # what the digest covers (CACHE only if present)
NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
PLACEHOLDER = "FILL ME IN"
PREDICTION_FIELDS = (
    "id",
    "sample",
    "pred_sql",
    "tables_in_context",
    "usage",
    "latency_s",
    "error_kind",
)


@dataclass(frozen=True)
class About:
    """What the submitter says about the system (flags of ``heron submit``; a field not given
    gets :data:`PLACEHOLDER`, to be filled in before the pull request)."""

    tool: str | None = None
    tool_version: str | None = None
    approach: str | None = None
    contact: str | None = None
    link: str | None = None


def folder_digest(folder: Path, names: list[str]) -> str:
    """SHA-256 (hex) over the given files of ``folder``, in sorted order: for each, its name,
    a NUL, its size, a NUL and its bytes, so no two different folders give the same stream."""
    digest = hashlib.sha256()
    for name in sorted(names):
        data = (folder / name).read_bytes()
        digest.update(name.encode("utf-8") + b"\0" + str(len(data)).encode() + b"\0")
        digest.update(data)
    return digest.hexdigest()


def content_names(folder: Path) -> list[str]:
    """The files of a submission the digest covers (those of :data:`CONTENT` that exist)."""
    return [n for n in CONTENT if (folder / n).is_file()]


def prediction_lines(results: Results) -> list[dict[str, JSON]]:
    """``predictions.jsonl`` records: one per question and sample, in id then sample order.
    Usage and latency are the question's (summed over samples by the run) and go on sample 0."""
    out: list[dict[str, JSON]] = []
    for o in results.outcomes:
        samples = o.samples or ()
        first = {
            "id": o.id,
            "sample": 0,
            "pred_sql": o.pred_sql,
            "tables_in_context": None if o.tables_in_context is None else list(o.tables_in_context),
            "usage": o.usage,
            "latency_s": o.latency_s,
            "error_kind": None if o.error_kind is None else str(o.error_kind),
        }
        out.append(first)
        for s in samples[1:]:
            out.append(
                {
                    "id": o.id,
                    "sample": s.sample,
                    "pred_sql": s.pred_sql,
                    "tables_in_context": None,
                    "usage": None,
                    "latency_s": None,
                    "error_kind": None if s.error_kind is None else str(s.error_kind),
                }
            )
    return out


def metadata(name: str, results: Results, about: About, with_cache: bool) -> dict[str, Any]:
    c = results.conditions
    strategy = c.adapter_conditions.get("strategy")
    return {
        "format": SUBMISSION_FORMAT,
        "name": name,
        "tool": about.tool or c.adapter or PLACEHOLDER,
        "tool_version": about.tool_version or c.adapter_version or PLACEHOLDER,
        "approach": about.approach or PLACEHOLDER,
        "model": c.model,
        "temperature": c.temperature,
        "strategy": None if strategy is None else str(strategy),
        "samples": c.samples,
        "contact": about.contact or PLACEHOLDER,
        "link": about.link or PLACEHOLDER,
        "cache": CACHE if with_cache else None,
        "conditions": c.to_json(),
    }


def copy_cache(source: Path, target: Path, results: Results) -> int:
    """Copy the run's replies out of an LLM cache (``--heron-cache DIR``'s file, perhaps in WAL
    mode and shared with other runs) into a new single-file cache at ``target``: only rows of the
    run's model and questions, in key order (so the same replies give the same bytes). Returns
    the number of rows copied."""
    import sqlite3

    from pytest_heron.systems import ResponseCache

    ids = sorted(o.id for o in results.outcomes)
    model = results.conditions.model or ""
    src = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
    try:
        rows = src.execute(
            "SELECT key, endpoint, reply, model, question FROM responses WHERE model = ? "
            "ORDER BY key, endpoint",
            (model,),
        ).fetchall()
    except sqlite3.Error as exc:
        raise HeronError(f"--cache {source}: not an LLM cache of pytest-heron ({exc})") from None
    finally:
        src.close()
    wanted = set(ids)
    rows = [r for r in rows if r[4] in wanted]
    ResponseCache(target)  # creates the table
    dst = sqlite3.connect(target, isolation_level=None)
    try:
        dst.execute("PRAGMA journal_mode = DELETE")  # one file, no -wal beside it
        dst.executemany(
            "INSERT INTO responses (key, endpoint, reply, model, question, created)"
            " VALUES (?, ?, ?, ?, ?, 0)",
            rows,
        )
        dst.execute("VACUUM")
    finally:
        dst.close()
    return len(rows)


def write_submission(
    results: Results,
    name: str,
    out: Path,
    *,
    about: About = About(),
    cache: Path | None = None,
) -> Path:
    """Write ``out/<name>/`` from a results file's :class:`Results`; return the folder."""
    if not NAME.fullmatch(name):
        raise HeronError(
            f"--name {name!r}: use 1-64 characters of a-z, 0-9, '.', '_' or '-', starting with "
            "a letter or digit (it becomes a folder name)"
        )
    if about.approach is not None and ("\n" in about.approach or len(about.approach) > 200):
        raise HeronError("--approach: one line of at most 200 characters")
    if cache is not None and not cache.is_file():
        raise HeronError(f"--cache {cache}: not a file")
    folder = out / name
    if folder.exists():
        raise HeronError(f"{folder} exists already: remove it or choose another --name")
    folder.mkdir(parents=True)
    meta = metadata(name, results, about, cache is not None)
    (folder / META).write_text(
        yaml.safe_dump(meta, sort_keys=False, allow_unicode=True), encoding="utf-8"
    )
    lines = "".join(
        json.dumps(r, ensure_ascii=False, sort_keys=False) + "\n" for r in prediction_lines(results)
    )
    (folder / PREDICTIONS).write_text(lines, encoding="utf-8")
    claimed = {
        "metrics": results.metrics.to_json(),
        "breakdown": {
            axis: {bucket: b.to_json() for bucket, b in buckets.items()}
            for axis, buckets in results.breakdown.items()
        },
    }
    (folder / CLAIMED).write_text(json.dumps(claimed, indent=2) + "\n", encoding="utf-8")
    if cache is not None:
        copy_cache(cache, folder / CACHE, results)
    (folder / DIGEST).write_text(
        folder_digest(folder, content_names(folder)) + "\n", encoding="utf-8"
    )
    return folder
