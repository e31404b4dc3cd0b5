"""What a submission folder must hold, checked before anything runs: the files it may have,
read with bounds (:mod:`pytest_heron.core.outside`), its metadata against the board protocol,
its predictions and claimed figures. :func:`check_folder` is the one entry; :mod:`.verify` then
reproduces what passed."""

from __future__ import annotations

import math
import os
import secrets
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_heron.board.protocol import Protocol
from pytest_heron.board.submission import (
    CACHE,
    CLAIMED,
    DIGEST,
    META,
    NAME,
    PLACEHOLDER,
    PREDICTION_FIELDS,
    PREDICTIONS,
    SUBMISSION_FORMAT,
    VERDICT,
    content_names,
    folder_digest,
)
from pytest_heron.core.errors import ErrorKind, ResultsFileError
from pytest_heron.core.outside import Limits, OutsideFileError, loads_json, loads_yaml
from pytest_heron.core.records import RecordReader
from pytest_heron.dataset import GoldQuestion
from pytest_heron.results import Conditions
from pytest_heron.scoring import Summary

VERDICT_FORMAT = 1
SIZE_CAPS = {  # bytes
    META: 64 * 1024,
    PREDICTIONS: 8 * 1024 * 1024,
    CLAIMED: 256 * 1024,
    DIGEST: 128,
    CACHE: 32 * 1024 * 1024,
    VERDICT: 4 * 1024 * 1024,
}
MAX_SQL_CHARS = 100_000
LINE_LIMITS = Limits(SIZE_CAPS[PREDICTIONS], max_depth=8, max_items=1_000)  # one line
MAX_PROBLEMS = 200  # listed in full up to this many; then "and N more"
HIDDEN_SEED_LOW = 100_000  # `auto` draws from [LOW, LOW + SPAN): far from any protocol's seeds
HIDDEN_SEED_SPAN = 900_000
EX_FAMILY = ("ex1", "ex_multistate", "ex_superset")  # and every ex_at_k figure
PERCENTAGES = (*EX_FAMILY, "exact_match", "soft_f1", "set_recall", "grade")
STATUS = {  # how each metric of the verdict was obtained
    "ex1": "checked",
    "ex_multistate": "checked",
    "ex_multistate_ci95": "checked",
    "ex_at_k": "checked",
    "exact_match": "checked",
    "ex_superset": "checked",
    "soft_f1": "checked",
    "errors": "checked",
    "ves": "recomputed (timed on the verifier's machine)",
    "r_ves": "recomputed (timed on the verifier's machine)",
    "set_recall": "computed from the reported tables in context",
    "tokens_prompt": "as reported",
    "tokens_completion": "as reported",
    "tokens_per_q": "as reported",
    "cost_usd": "as reported (reported tokens, protocol price table)",
    "latency_s_median": "as reported",
    "latency_s_p90": "as reported",
    "grade": "recomputed from checked EX, VES and errors with reported tokens and latency",
    "tokens_prompt_cached": "as reported",
    "tokens_reasoning": "as reported",
    "cost_per_correct_usd": "as reported cost over checked correct answers",
}


TOKEN_FIGURES = ("tokens_prompt", "tokens_completion", "tokens_per_q", "cost_usd")


@dataclass(frozen=True)
class Entry:
    """One line of ``predictions.jsonl``, checked."""

    id: str
    sample: int
    pred_sql: str | None
    tables_in_context: tuple[str, ...] | None
    usage: dict[str, int | float] | None
    latency_s: float | None
    error_kind: ErrorKind | None


@dataclass(frozen=True)
class Checked:
    """A submission folder that passed :func:`check_folder`."""

    folder: Path
    name: str
    meta: dict[str, Any]
    conditions: Conditions
    entries: dict[str, tuple[Entry, ...]]  # id -> samples in order
    claimed: Summary
    digest: str


def questions_digest(questions: Sequence[GoldQuestion]) -> str:
    """The run's digest of the question set (:func:`pytest_heron.dataset.questions_digest`)."""
    from pytest_heron.dataset import questions_digest as digest

    return digest({q.id: q for q in sorted(questions, key=lambda q: q.id)})


def draw_hidden_seed(protocol: Protocol) -> int:
    """A seed nobody knew before this moment (the OS's randomness), never a protocol seed."""
    while True:
        seed = HIDDEN_SEED_LOW + secrets.randbelow(HIDDEN_SEED_SPAN)
        if seed not in protocol.seeds:
            return seed


def _decode(folder: Path, name: str, problems: list[str]) -> str | None:
    try:
        return (folder / name).read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        problems.append(f"{name}: not UTF-8 (byte {exc.start})")
    except OSError as exc:
        problems.append(f"{name}: cannot be read ({exc.strerror})")
    return None


def _files(folder: Path, problems: list[str]) -> set[str]:
    """The regular files of the folder that may be read; every other entry is a problem."""
    allowed = {META, PREDICTIONS, CLAIMED, DIGEST, CACHE, VERDICT}
    present: set[str] = set()
    for entry in sorted(os.scandir(folder), key=lambda e: e.name):
        mode = entry.stat(follow_symlinks=False).st_mode
        if stat.S_ISLNK(mode):
            target = os.readlink(entry.path)
            problems.append(f"{entry.name}: a symlink (to {target[:80]!r}); submissions hold files")
        elif stat.S_ISDIR(mode):
            problems.append(f"{entry.name}/: a folder; a submission holds files only")
        elif not stat.S_ISREG(mode):
            problems.append(f"{entry.name}: not a regular file")
        elif entry.name not in allowed:
            problems.append(
                f"{entry.name}: not a submission file (allowed: {', '.join(sorted(allowed))})"
            )
        elif entry.stat(follow_symlinks=False).st_size > SIZE_CAPS[entry.name]:
            size = entry.stat(follow_symlinks=False).st_size
            problems.append(f"{entry.name}: {size} bytes, over the cap of {SIZE_CAPS[entry.name]}")
        else:
            present.add(entry.name)
    for required in (META, PREDICTIONS, CLAIMED, DIGEST):
        if required not in present and not any(p.startswith(required + ":") for p in problems):
            problems.append(f"{required}: missing")
    return present


def _check_meta(
    text: str, folder: Path, present: set[str], problems: list[str]
) -> tuple[dict[str, Any], Conditions] | None:
    try:
        meta = loads_yaml(text, META, Limits(SIZE_CAPS[META], max_depth=16, max_items=1_000))
    except OutsideFileError as exc:
        problems.append(str(exc))
        return None
    if not isinstance(meta, dict):
        problems.append(f"{META}: expected a mapping")
        return None
    if meta.get("format") != SUBMISSION_FORMAT:
        problems.append(f"{META}, field 'format': expected {SUBMISSION_FORMAT}")
    name = meta.get("name")
    if not isinstance(name, str) or not NAME.fullmatch(name) or name != folder.name:
        problems.append(f"{META}, field 'name': expected the folder's name {folder.name!r}")
    for key in ("tool", "tool_version", "approach", "contact", "link"):
        value = meta.get(key)
        if not isinstance(value, str) or not value.strip():
            problems.append(f"{META}, field {key!r}: expected a non-empty string")
        elif value == PLACEHOLDER:
            problems.append(f"{META}, field {key!r}: still {PLACEHOLDER!r}")
        elif "\n" in value or len(value) > 200:
            problems.append(f"{META}, field {key!r}: one line of at most 200 characters")
    cache = meta.get("cache")
    if cache is not None:
        if not isinstance(cache, str) or "/" in cache or "\\" in cache or cache.startswith("."):
            problems.append(f"{META}, field 'cache': {str(cache)[:80]!r} points outside the folder")
        elif cache != CACHE:
            problems.append(f"{META}, field 'cache': expected {CACHE!r} or null")
        elif CACHE not in present:
            problems.append(f"{META}, field 'cache': names {CACHE}, which is not in the folder")
    elif CACHE in present:
        problems.append(f"{CACHE}: present but {META} says cache: null")
    try:
        conditions = Conditions.from_json(meta.get("conditions"), f"{META}, conditions")
    except ResultsFileError as exc:
        problems.append(str(exc))
        return None
    for key in ("model", "temperature", "samples"):
        if meta.get(key) != getattr(conditions, key):
            problems.append(
                f"{META}, field {key!r}: {meta.get(key)!r} differs from the conditions' "
                f"{getattr(conditions, key)!r}"
            )
    return meta, conditions


def _check_protocol(
    conditions: Conditions,
    protocol: Protocol,
    questions: Sequence[GoldQuestion],
    problems: list[str],
) -> None:
    from pytest_heron.generate import load_bundle

    for problem in protocol.mismatches(
        scale=conditions.scale,
        seeds=conditions.seeds,
        states=conditions.states,
        model=conditions.model,
        temperature=conditions.temperature,
        samples=conditions.samples,
    ):
        problems.append(f"protocol: {problem}")
    if conditions.protocol != protocol.name or conditions.protocol_digest != protocol.digest:
        problems.append(
            f"protocol: the run claims {conditions.protocol!r} (digest "
            f"{conditions.protocol_digest}), the board's is {protocol.name!r} (digest "
            f"{protocol.digest}); run with --heron-protocol on the board's protocol file"
        )
    level = conditions.adapter_isolation
    if level is None and conditions.adapter in ("gold", "file"):
        level = "not-needed"  # no system code runs for them: results from before the field
    isolation = protocol.isolation_problem(level)
    if isolation is not None:
        problems.append(f"protocol: {isolation}")
    data_version = load_bundle().data_version
    if conditions.data_version != data_version:
        problems.append(
            f"conditions, data_version: {conditions.data_version!r}; this verifier seeds "
            f"{data_version!r}"
        )
    digest = questions_digest(questions)
    if conditions.questions_digest != digest:
        problems.append(
            f"conditions, questions_digest: {conditions.questions_digest!r}; the question set "
            f"is {digest!r}"
        )


def _entry(raw: Any, where: str) -> Entry:
    r = RecordReader(raw, where)
    keys = sorted(str(k) for k in r.data)
    if keys != sorted(PREDICTION_FIELDS):
        extra = sorted(set(keys) - set(PREDICTION_FIELDS))
        missing = sorted(set(PREDICTION_FIELDS) - set(keys))
        raise ResultsFileError(f"{where}: fields missing {missing}, unknown {extra}")
    sql = r.opt_text("pred_sql")
    if sql is not None and len(sql) > MAX_SQL_CHARS:
        raise ResultsFileError(f"{where}: pred_sql over {MAX_SQL_CHARS} characters")
    return Entry(
        id=r.text("id"),
        sample=r.integer("sample"),
        pred_sql=sql,
        tables_in_context=r.opt_texts("tables_in_context"),
        usage=r.counters("usage"),
        latency_s=r.opt_number("latency_s"),
        error_kind=r.kind("error_kind"),
    )


def _check_predictions(
    text: str, samples: int, questions: Sequence[GoldQuestion], problems: list[str]
) -> dict[str, tuple[Entry, ...]]:
    known = {q.id for q in questions}
    seen: dict[tuple[str, int], Entry] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        where = f"{PREDICTIONS}, line {number}"
        try:
            entry = _entry(loads_json(line, where, LINE_LIMITS), where)
        except ResultsFileError as exc:  # an OutsideFileError too
            problems.append(str(exc))
            continue
        key = (entry.id, entry.sample)
        if entry.id not in known:
            problems.append(f"{where}: {entry.id[:80]!r} is not a question of the set")
        elif entry.sample >= samples:
            problems.append(f"{where}: sample {entry.sample}, the run had {samples}")
        elif key in seen:
            problems.append(f"{where}: question {entry.id} sample {entry.sample} listed twice")
        else:
            seen[key] = entry
        if entry.error_kind is ErrorKind.INFRA_CRASH:
            problems.append(
                f"{where}: question {entry.id} crashed in the harness (infra_crash): the run is "
                "incomplete; run it again (--heron-resume asks only the missing questions)"
            )
    missing = [q.id for q in sorted(questions, key=lambda q: q.id) if (q.id, 0) not in seen]
    if missing:
        shown = ", ".join(missing[:10]) + (
            f" and {len(missing) - 10} more" if len(missing) > 10 else ""
        )
        problems.append(f"{PREDICTIONS}: {len(missing)} question(s) missing: {shown}")
    for qid in sorted({k[0] for k in seen}):
        gaps = [i for i in range(samples) if (qid, i) not in seen]
        if gaps and (qid, 0) in seen:
            problems.append(f"{PREDICTIONS}: question {qid} lacks sample(s) {gaps}")
    entries: dict[str, list[Entry]] = {}
    for (qid, _), entry in sorted(seen.items()):
        entries.setdefault(qid, []).append(entry)
    return {k: tuple(v) for k, v in entries.items()}


def _check_claimed(text: str, n: int, problems: list[str]) -> Summary | None:
    try:
        data = loads_json(text, CLAIMED, Limits(SIZE_CAPS[CLAIMED], max_depth=16))
        summary = Summary.from_json(
            data.get("metrics") if isinstance(data, dict) else None, f"{CLAIMED}, metrics"
        )
    except ResultsFileError as exc:  # an OutsideFileError too
        problems.append(str(exc))
        return None
    for name in PERCENTAGES:
        value = getattr(summary, name)
        if value is not None and value > 100:
            problems.append(f"{CLAIMED}, metrics, {name}: {value} is above 100 %")
    for k, value in (summary.ex_at_k or {}).items():
        if value > 100:
            problems.append(f"{CLAIMED}, metrics, ex_at_k[{k}]: {value} is above 100 %")
    if summary.ex_multistate_ci95 is not None:
        lo, hi = summary.ex_multistate_ci95
        if not (math.isfinite(lo) and math.isfinite(hi) and 0 <= lo <= hi <= 100):
            problems.append(f"{CLAIMED}, metrics, ex_multistate_ci95: not 0 <= low <= high <= 100")
    for name in ("ves", "r_ves"):
        value = getattr(summary, name)
        if value is not None and value > 100 * 2:
            problems.append(f"{CLAIMED}, metrics, {name}: {value} is above what VES can reach")
    if summary.errors > n:
        problems.append(f"{CLAIMED}, metrics, errors: {summary.errors} for {n} questions")
    return summary


def check_folder(
    folder: Path, protocol: Protocol, questions: Sequence[GoldQuestion]
) -> tuple[Checked | None, list[str]]:
    """Validate a submission folder without running anything: every problem found, in file
    order. Returns the checked submission only when there is no problem."""
    problems: list[str] = []
    if folder.is_symlink() or not folder.is_dir():
        return None, [f"{folder}: not a folder"]
    present = _files(folder, problems)
    digest = None
    if DIGEST in present:
        recorded = (_decode(folder, DIGEST, problems) or "").strip()
        digest = folder_digest(folder, [n for n in content_names(folder) if n in present])
        if recorded != digest:
            problems.append(f"{DIGEST}: {recorded[:64]!r} does not match the content ({digest})")
    checked_meta = None
    if META in present:
        text = _decode(folder, META, problems)
        if text is not None:
            checked_meta = _check_meta(text, folder, present, problems)
    if checked_meta is not None:
        _check_protocol(checked_meta[1], protocol, questions, problems)
    samples = checked_meta[1].samples if checked_meta is not None else protocol.samples
    entries: dict[str, tuple[Entry, ...]] = {}
    if PREDICTIONS in present:
        text = _decode(folder, PREDICTIONS, problems)
        if text is not None:
            entries = _check_predictions(text, samples, questions, problems)
    claimed = None
    if CLAIMED in present:
        text = _decode(folder, CLAIMED, problems)
        if text is not None:
            claimed = _check_claimed(text, len(questions), problems)
    if CACHE in present:
        with (folder / CACHE).open("rb") as fh:
            if fh.read(16) != b"SQLite format 3\0":
                problems.append(f"{CACHE}: not an SQLite database")
    if problems or checked_meta is None or claimed is None or digest is None:
        if len(problems) > MAX_PROBLEMS:
            problems = [*problems[:MAX_PROBLEMS], f"and {len(problems) - MAX_PROBLEMS} more"]
        return None, problems or [f"{folder}: incomplete"]
    meta, conditions = checked_meta
    return Checked(folder, folder.name, meta, conditions, entries, claimed, digest), []
