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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from pytest_heron import __version__
from pytest_heron.board.checks import (
    EX_FAMILY,
    SIZE_CAPS,
    STATUS,
    TOKEN_FIGURES,
    VERDICT_FORMAT,
    Checked,
    Entry,
    check_folder,
    draw_hidden_seed,
)
from pytest_heron.board.protocol import Protocol
from pytest_heron.board.replay import Replay, replay
from pytest_heron.board.standing import RANKED, gold_equal, gold_share, standing
from pytest_heron.board.submission import (
    VERDICT,
)
from pytest_heron.core.errors import ErrorKind, HeronError, ResultsFileError
from pytest_heron.core.outside import Limits, read_json
from pytest_heron.core.progress import Steps
from pytest_heron.core.records import JSON, RecordReader
from pytest_heron.core.safe_text import printable
from pytest_heron.core.types import DEFAULT_STATEMENT_TIMEOUT_S
from pytest_heron.database import StateRef
from pytest_heron.dataset import GoldQuestion
from pytest_heron.scoring import TIME_RUNS, Outcome, Sample, Summary, score_sql
from pytest_heron.scoring import breakdown as metrics_breakdown
from pytest_heron.scoring import summary as metrics_summary


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
    statement_timeout: float = DEFAULT_STATEMENT_TIMEOUT_S,
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
            why = "details withheld: sealed question" if q.sealed else gold.error or gold.reason
            broken.append(f"{q.id}: {why}"[:200])
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
            f"public gold SQL (by its parse tree's fingerprint, wrapped or not), above the "
            f"protocol's max_gold_share_unreplayed "
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
