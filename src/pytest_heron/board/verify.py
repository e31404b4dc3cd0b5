"""``heron verify-submission``: a submission's numbers recomputed, never accepted.

Two stages. :func:`check_folder` validates the folder without running anything (schema of every
file, UTF-8, size caps, no symlinks or folders, no path outside the folder, the digest, the ids,
the claimed numbers, the protocol) and lists *every* problem. Only a folder without problems
reaches :func:`reproduce`, which builds the protocol's states plus one on a seed drawn at
verification time, checks gold scores 100 % on all of them, re-executes every predicted query
through the sandbox as the scoring role (nothing of the submitter's code runs), and recomputes
every metric with :mod:`pytest_heron.scoring.metrics`, the code the plugin uses.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import secrets
import stat
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from pytest_heron import __version__
from pytest_heron.board.protocol import Protocol
from pytest_heron.board.replay import Replay, replay
from pytest_heron.board.standing import RANKED, gold_equal, gold_share, standing
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
from pytest_heron.core.errors import ErrorKind, HeronError, ResultsFileError
from pytest_heron.core.outside import Limits, OutsideFileError, loads_json, loads_yaml, read_json
from pytest_heron.core.progress import Steps
from pytest_heron.core.records import JSON, RecordReader
from pytest_heron.core.safe_text import printable
from pytest_heron.database import StateRef
from pytest_heron.dataset import GoldQuestion
from pytest_heron.results import Conditions
from pytest_heron.scoring import TIME_RUNS, Outcome, Sample, Summary, score_sql
from pytest_heron.scoring import breakdown as metrics_breakdown
from pytest_heron.scoring import summary as metrics_summary

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
    """The run's digest of the question set (:func:`pytest_heron.run.questions_digest`)."""
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
    isolation = protocol.isolation_problem(conditions.adapter_isolation)
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


@dataclass
class Verdict:
    """What ``verify-submission`` found (``verdict.json``)."""

    submission: str
    digest: str | None
    accepted: bool
    reasons: list[str]
    protocol: dict[str, JSON]
    hidden_seed: int
    hidden_seed_source: str
    metrics: dict[str, dict[str, JSON]] = field(default_factory=dict)
    ex_hidden_seed: float | None = None
    reproduced: dict[str, JSON] | None = None
    breakdown: dict[str, JSON] | None = None
    correct: dict[str, bool] = field(default_factory=dict)
    correct_hidden: dict[str, bool] = field(default_factory=dict)
    meta: dict[str, JSON] | None = None
    replay: Replay | None = None
    standing: str | None = None  # "reference", "ranked" or "refused" (board.standing)
    gold_share: float | None = None  # share of sample-0 predictions that are the public gold
    gold_equal: list[str] = field(default_factory=list)  # their question ids
    variants: dict[str, JSON] | None = None  # public EX against EX on unseen variants
    versions: dict[str, JSON] = field(default_factory=dict)
    verified_at: str = ""
    format: int = VERDICT_FORMAT

    def to_json(self) -> dict[str, JSON]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["replay"] = None if self.replay is None else self.replay.to_json()
        return out


def read_verdict(path: Path) -> dict[str, Any]:
    """A ``verdict.json`` as a mapping, with the fields the leaderboard reads checked."""
    data = read_json(path, limits=Limits(SIZE_CAPS[VERDICT]))
    r = RecordReader(data, str(path))
    if r.integer("format") != VERDICT_FORMAT:
        raise ResultsFileError(f"{path}: verdict format {data.get('format')!r}")
    r.flag("accepted")
    r.texts("reasons")
    r.text("submission")
    return dict(r.data)


def _versions(server_version: str | None) -> dict[str, JSON]:
    from pytest_heron.generate import load_bundle

    def package(name: str) -> str | None:
        try:
            return version(name)
        except PackageNotFoundError:
            return None

    return {
        "heron": __version__,
        "postgres": server_version,
        "sqlglot": package("sqlglot"),
        "psycopg": package("psycopg"),
        "data_version": load_bundle().data_version,
    }


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _reproduce_question(
    q: GoldQuestion,
    entries: tuple[Entry, ...],
    states: Sequence[StateRef],
    hidden: StateRef,
    statement_timeout: float,
    time_runs: int,
) -> tuple[Outcome, bool, list[str]]:
    """The outcome the submission's SQL gets (sample 0 timed, all samples scored), whether
    sample 0 is right on the hidden state, and the reasons to reject found on the way."""
    reasons: list[str] = []
    gold_rows: dict[int, Any] = {}
    scored: list[Outcome] = []
    for e in entries:
        if e.pred_sql is None:  # the adapter gave no SQL: the failure the run recorded stands
            kind = e.error_kind or ErrorKind.ADAPTER_ERROR
            scored.append(Outcome.blank(q).failed(kind, "no SQL (as recorded by the run)"))
            continue
        out = score_sql(
            q,
            e.pred_sql,
            states,
            statement_timeout=statement_timeout,
            time_runs=time_runs if e.sample == 0 else 0,
            gold_rows=gold_rows,
        )
        if out.error_kind is ErrorKind.REJECTED and e.error_kind is not ErrorKind.REJECTED:
            reasons.append(
                f"{q.id} sample {e.sample}: the SQL is rejected by the guard ({out.error}), "
                f"but the run recorded {e.error_kind or 'no error'}"
            )
        elif out.error_kind is ErrorKind.INFRA_CRASH:
            reasons.append(f"{q.id} sample {e.sample}: could not be scored ({out.error})")
        scored.append(out)
    first = entries[0]
    hidden_ok = False
    if first.pred_sql is not None:
        hidden_ok = score_sql(
            q, first.pred_sql, [hidden], statement_timeout=statement_timeout, gold_rows=gold_rows
        ).correct
    outcome = Outcome(
        **{
            **{f.name: getattr(scored[0], f.name) for f in fields(Outcome)},
            "tables_in_context": first.tables_in_context,
            "usage": first.usage,
            "latency_s": first.latency_s,
            "samples": None
            if len(entries) < 2
            else tuple(
                Sample(e.sample, o.correct, o.error_kind, e.pred_sql)
                for e, o in zip(entries, scored, strict=True)
            ),
        }
    )
    return outcome, hidden_ok, reasons


def reproduce(
    sub: Checked,
    protocol: Protocol,
    questions: Sequence[GoldQuestion],
    states: Sequence[StateRef],
    hidden: StateRef,
    *,
    statement_timeout: float = 30.0,
    time_runs: int = TIME_RUNS,
    progress: Callable[[str], None] | None = None,
) -> tuple[list[str], dict[str, Any]]:
    """Re-execute every prediction; return the reasons to reject and the verdict's figures."""
    from pytest_heron.scoring import load_prices, price_for

    say = progress or (lambda _msg: None)
    everything = [*states, hidden]
    say(f"gold on {len(everything)} states ({len(questions)} questions)")
    broken = []
    gold_steps = Steps("gold on every state", len(questions), emit=say) if progress else None
    for q in questions:
        gold = score_sql(q, q.gold_sql, everything, statement_timeout=statement_timeout)
        if gold_steps is not None:
            gold_steps.advance(detail=q.id)
        if not gold.correct:
            broken.append(f"{q.id}: {gold.error or gold.reason}"[:200])
    if broken:
        raise HeronError(
            f"gold does not score 100 % on the verifier's states ({len(broken)} question(s): "
            f"{'; '.join(broken[:3])}): the states or the question set are damaged, not the "
            "submission (rebuild with `heron seed --replace`; `python -m pytest_heron.audit`)"
        )
    reasons: list[str] = []
    outcomes: list[Outcome] = []
    hidden_hits: dict[str, bool] = {}
    steps = Steps("re-executing predictions", len(questions), emit=say) if progress else None
    for q in sorted(questions, key=lambda q: q.id):
        outcome, hidden_ok, found = _reproduce_question(
            q, sub.entries[q.id], states, hidden, statement_timeout, time_runs
        )
        outcomes.append(outcome)
        hidden_hits[q.id] = hidden_ok
        reasons.extend(found)
        if steps is not None:
            steps.advance(detail=q.id)
    price = price_for(protocol.model, load_prices(None))
    summary = metrics_summary(outcomes, protocol.seeds[0], samples=protocol.samples, price=price)
    table = compare_claims(sub.claimed, summary, protocol.tolerance, reasons)
    n = len(outcomes)
    ex_hidden = None if n == 0 else round(100.0 * sum(hidden_hits.values()) / n, 4)
    if (
        ex_hidden is not None
        and summary.ex_multistate is not None
        and summary.ex_multistate - ex_hidden > protocol.tolerance
    ):
        lost = sorted(o.id for o in outcomes if o.correct and not hidden_hits[o.id])
        reasons.append(
            f"hidden seed {hidden.seed}: multi-state EX {ex_hidden} against {summary.ex_multistate}"
            f" on the protocol's states, more than {protocol.tolerance:g} points lower: the SQL "
            f"gives answers that hold on the published states only ({', '.join(lost[:10])}"
            f"{' ...' if len(lost) > 10 else ''})"
        )
    figures: dict[str, Any] = {
        "metrics": table,
        "ex_hidden_seed": ex_hidden,
        "reproduced": summary.to_json(),
        "breakdown": {
            axis: {b: bucket.to_json() for b, bucket in buckets.items()}
            for axis, buckets in metrics_breakdown(outcomes, protocol.seeds[0]).items()
        },
        "correct": {o.id: o.correct for o in outcomes},
        "correct_hidden": dict(sorted(hidden_hits.items())),
    }
    return reasons, figures


def compare_claims(
    claimed: Summary, reproduced: Summary, tolerance: float, reasons: list[str]
) -> dict[str, dict[str, JSON]]:
    """Claimed against reproduced per metric (with how it was obtained); a claimed EX-family
    figure more than ``tolerance`` points above the reproduced one is a reason to reject."""
    table: dict[str, dict[str, JSON]] = {}
    got, said = reproduced.to_json(), claimed.to_json()
    for name in got:
        table[name] = {
            "claimed": said[name],
            "reproduced": got[name],
            "status": STATUS.get(name, "checked"),
        }
    for name in EX_FAMILY:
        c, r = getattr(claimed, name), getattr(reproduced, name)
        if c is not None and (r is None or c - r > tolerance):
            reasons.append(
                f"claimed {name} {c} but the SQL reproduces {r} (tolerance {tolerance:g} points)"
            )
    for k, c in sorted((claimed.ex_at_k or {}).items()):
        r = (reproduced.ex_at_k or {}).get(k)
        if r is None or c - r > tolerance:
            reasons.append(
                f"claimed ex_at_k[{k}] {c} but the SQL reproduces {r} "
                f"(tolerance {tolerance:g} points)"
            )
    return table


def verify(
    folder: Path,
    protocol: Protocol,
    questions: Sequence[GoldQuestion],
    *,
    hidden_seed: int | None = None,
    **options: Any,
) -> Verdict:
    """:func:`_verify`, with every failure it did not foresee turned into a rejected verdict
    whose reason names it: a hostile folder gets a verdict, never a traceback and never none.
    The options are :func:`_verify`'s; only a hidden seed that is one of the protocol's is an
    error (of the verifier's caller, not of the submission)."""
    source = "auto" if hidden_seed is None else "given"
    seed = draw_hidden_seed(protocol) if hidden_seed is None else hidden_seed
    if seed in protocol.seeds:
        raise HeronError(f"--hidden-seed {seed} is one of the protocol's seeds")
    try:
        verdict = _verify(folder, protocol, questions, hidden_seed=seed, **options)
    except Exception as exc:
        verdict = Verdict(
            submission=folder.name,
            digest=None,
            accepted=False,
            reasons=[
                "the verifier could not complete on this submission "
                f"({type(exc).__name__}: {printable(str(exc))[:300]}); if the folder is sound, "
                "verify it again (a failure of the verifier's machine is not the submission's)"
            ],
            protocol={"name": protocol.name, "digest": protocol.digest, "scale": protocol.scale},
            hidden_seed=seed,
            hidden_seed_source=source,
        )
        verdict.versions = _versions(None)
        verdict.verified_at = _now()
    verdict.hidden_seed_source = source
    return verdict


def _verify(
    folder: Path,
    protocol: Protocol,
    questions: Sequence[GoldQuestion],
    *,
    hidden_seed: int | None = None,
    backend: str = "auto",
    dsn: str | None = None,
    time_runs: int = TIME_RUNS,
    progress: Callable[[str], None] | None = None,
    questions_dir: Path | None = None,
    replay_cache: bool = True,
    variant_endpoint: str | None = None,
) -> Verdict:
    """Check, then (if the folder is sound) reproduce a submission. ``hidden_seed`` None draws
    one (:func:`draw_hidden_seed`). ``questions_dir`` is where ``questions`` came from (None:
    the built-in set), for the offline replay of a shipped cache (:mod:`.replay`), which
    ``replay_cache=False`` skips."""
    source = "auto" if hidden_seed is None else "given"
    seed = draw_hidden_seed(protocol) if hidden_seed is None else hidden_seed
    if seed in protocol.seeds:
        raise HeronError(f"--hidden-seed {seed} is one of the protocol's seeds")
    verdict = Verdict(
        submission=folder.name,
        digest=None,
        accepted=False,
        reasons=[],
        protocol={"name": protocol.name, "digest": protocol.digest, "scale": protocol.scale},
        hidden_seed=seed,
        hidden_seed_source=source,
    )
    checked, problems = check_folder(folder, protocol, questions)
    if checked is None:
        verdict.reasons = problems
        verdict.versions = _versions(None)
        verdict.verified_at = _now()
        return verdict
    verdict.digest = checked.digest
    verdict.meta = {
        k: checked.meta.get(k)
        for k in ("tool", "tool_version", "approach", "model", "temperature", "strategy")
    } | {
        "samples": checked.meta.get("samples"),
        "contact": checked.meta.get("contact"),
        "link": checked.meta.get("link"),
        "conditions": checked.conditions.to_json(),
    }
    stand = standing(checked.conditions.adapter, checked.meta.get("tool"))
    verdict.standing = stand.kind
    first_sql = {qid: entries[0].pred_sql for qid, entries in checked.entries.items()}
    verdict.gold_equal = gold_equal(first_sql, {q.id: q.gold_sql for q in questions})
    verdict.gold_share = gold_share(verdict.gold_equal, len(first_sql))
    import psycopg

    from pytest_heron.database import ensure_state, seed_jobs, start

    say = progress or (lambda _msg: None)
    server = start(backend, dsn)
    try:
        built = [
            ensure_state(server, protocol.scale, s, jobs=seed_jobs(), progress=say)
            for s in (*protocol.seeds, seed)
        ]
        refs = [st.ref() for st in built]
        with psycopg.connect(server.admin_dsn) as conn:
            row = conn.execute("SHOW server_version").fetchone()
        reasons, figures = reproduce(
            checked,
            protocol,
            questions,
            refs[:-1],
            refs[-1],
            time_runs=time_runs,
            progress=say,
        )
    finally:
        server.stop()
    if replay_cache:
        verdict.replay = _replay(checked, protocol, questions_dir, backend, dsn, say)
    else:
        verdict.replay = Replay("not attempted", "skipped (--no-replay)")
    reasons.extend(verdict.replay.reasons)
    if stand.reason is not None:
        reasons.append(stand.reason)
    limit = protocol.max_gold_share_unreplayed
    share = verdict.gold_share
    if (
        stand.kind == RANKED
        and share is not None
        and share > limit
        and verdict.replay.status != "confirmed"
    ):
        reasons.append(
            f"{len(verdict.gold_equal)} of {len(first_sql)} predictions ({share:.0%}) are the "
            f"public gold SQL (normalised), above the protocol's max_gold_share_unreplayed "
            f"({limit:.0%}); such a row is ranked only when the offline replay of its shipped "
            f"model transcript confirms every answer (replay {verdict.replay.status}: "
            f"{verdict.replay.detail})"[:800]
        )
    from pytest_heron.board.variants_check import check_variants

    strategy = checked.meta.get("strategy")
    variants = check_variants(
        checked.conditions.adapter,
        protocol,
        seed,
        figures["reproduced"].get("ex_multistate"),
        endpoint=variant_endpoint,
        model=checked.conditions.model,
        strategy=strategy if isinstance(strategy, str) else None,
        questions_dir=questions_dir,
        backend=backend,
        dsn=dsn,
        progress=say,
    )
    verdict.variants = variants.to_json()
    reasons.extend(variants.reasons)
    if verdict.replay.status == "confirmed":
        if verdict.replay.tokens_checked:
            for name in TOKEN_FIGURES:
                if name in figures["metrics"]:
                    figures["metrics"][name]["status"] = "checked by the offline replay"
        elif verdict.replay.tokens_differ:
            reasons.append("the reported token counts differ from those the shipped cache replays")
    verdict.reasons = reasons
    verdict.accepted = not reasons
    verdict.metrics = figures["metrics"]
    verdict.ex_hidden_seed = figures["ex_hidden_seed"]
    verdict.reproduced = figures["reproduced"]
    verdict.breakdown = figures["breakdown"]
    verdict.correct = figures["correct"]
    verdict.correct_hidden = figures["correct_hidden"]
    verdict.versions = _versions(str(row[0]) if row else None)
    verdict.verified_at = _now()
    return verdict


def _replay(
    checked: Checked,
    protocol: Protocol,
    questions_dir: Path | None,
    backend: str,
    dsn: str | None,
    say: Callable[[str], None],
) -> Replay:
    import tempfile

    submitted = {
        qid: [(e.pred_sql, e.usage) for e in entries] for qid, entries in checked.entries.items()
    }
    with tempfile.TemporaryDirectory(prefix="heron-replay-") as work:
        return replay(
            checked.folder,
            checked.conditions.adapter,
            submitted,
            protocol,
            Path(work),
            model=checked.conditions.model,
            strategy=checked.meta.get("strategy")
            if isinstance(checked.meta.get("strategy"), str)
            else None,
            endpoint=getattr(checked.conditions, "endpoint", None),
            questions_dir=questions_dir,
            backend=backend,
            dsn=dsn,
            progress=say,
        )


def write_verdict(path: Path, verdict: Verdict) -> None:
    from pytest_heron.results import write_atomic

    write_atomic(path, json.dumps(verdict.to_json(), indent=2) + "\n")


def summary_of(verdict: Mapping[str, Any]) -> str:
    """One line for the terminal."""
    state = "accepted" if verdict.get("accepted") else "rejected"
    return f"{verdict.get('submission')}: {state} ({len(verdict.get('reasons') or [])} reason(s))"
