"""Offline replay of a submission's LLM cache: does the tool, installed here, regenerate the SQL
that was submitted?

A submission may ship the LLM response cache of its run (``llm-cache.sqlite3``). When it does
and the adapter it names is an installed entry point of ``pytest_heron.adapters`` (never a
``module:attr`` the submitter chose: that would import a module of their choosing), the verifier
runs the benchmark again with that adapter under ``--heron-offline`` on a copy of the cache, on
the protocol's states, in a child ``pytest`` process. Every answer must then come out of the
cache, and the SQL the adapter produces from those replies must be the submitted SQL, question by
question and sample by sample. With that confirmed, the billed tokens the cache replays are
compared with the tokens the submission reports, and token counts and cost count as checked.

The cache file is untrusted: before anything opens it read-write it is copied, then checked read
only (SQLite's integrity check, exactly the tables and columns of
:class:`~pytest_heron.systems.llm.cache.ResponseCache`, no triggers or views, every reply a JSON
object). A cache that fails a check is a reason to reject the submission; a
replay that cannot be attempted (no cache, adapter not installed) leaves the figures "as
reported" and says why.

A shipped cache is a claim that the model wrote the SQL, so the replay is strict: an adapter
that answers without a model (``gold``, ``cli``, ``file``), a cache with no reply, or a
question with submitted SQL whose replayed answer drew no reply from the shipped cache (the
adapter answered without asking, or the reply it asked for is missing) fails the replay, which
is a reason to reject. What the replay cannot tell is whether the transcript itself came from
the provider: a forged transcript that the adapter turns into the submitted SQL replays fine.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pytest_heron.board.protocol import Protocol
from pytest_heron.board.submission import CACHE
from pytest_heron.core.outside import OutsideFileError, loads_json
from pytest_heron.core.records import JSON
from pytest_heron.systems import CACHE_FILE, ResponseCache, known_adapters

REPLAY_TIMEOUT_S = 3 * 3600  # the whole child run; offline, so far above any honest need
MAX_LISTED = 20  # mismatching answers named in full; then "and N more"
MODEL_FREE_ADAPTERS = ("gold", "cli", "file")  # answer without asking a model: nothing to replay


@dataclass
class Replay:
    """What the offline replay found (part of ``verdict.json``)."""

    status: str  # "confirmed", "differs", "not attempted" or "failed"
    detail: str
    reasons: list[str] = field(default_factory=list)  # reasons to reject the submission
    tokens_checked: bool = False
    tokens_differ: bool = False  # SQL confirmed, but the reported token counts are not replayed
    mismatches: int = 0

    def to_json(self) -> dict[str, JSON]:
        return {
            "status": self.status,
            "detail": self.detail,
            "tokens_checked": self.tokens_checked,
            "mismatches": self.mismatches,
        }


def _layout(conn: sqlite3.Connection) -> tuple[list[tuple[str, str]], dict[str, tuple[str, ...]]]:
    """The schema objects of a cache file and each table's columns."""
    objects = conn.execute("SELECT type, name FROM sqlite_master ORDER BY type, name").fetchall()
    columns = {
        name: tuple(r[1] for r in conn.execute(f"PRAGMA table_info({name})").fetchall())
        for kind, name in objects
        if kind == "table" and name.isidentifier()
    }
    return objects, columns


def expected_layout() -> tuple[list[tuple[str, str]], dict[str, tuple[str, ...]]]:
    """The layout :class:`ResponseCache` creates, read from a new empty cache."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="heron-cache-layout-") as tmp:
        ResponseCache(Path(tmp) / CACHE_FILE)
        conn = sqlite3.connect(Path(tmp) / CACHE_FILE)
        try:
            return _layout(conn)
        finally:
            conn.close()


def check_cache(path: Path) -> list[str]:
    """Problems of an untrusted cache file (empty: sound), read only: SQLite's integrity check,
    exactly the tables, indexes and columns a :class:`ResponseCache` has (no triggers, no views),
    and every reply a JSON object."""
    problems: list[str] = []
    objects_wanted, columns_wanted = expected_layout()
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        return [f"{CACHE}: cannot be opened ({exc})"]
    try:
        conn.execute("PRAGMA trusted_schema = OFF")
        ok = conn.execute("PRAGMA integrity_check").fetchall()
        if ok != [("ok",)]:
            return [f"{CACHE}: fails SQLite's integrity check ({str(ok[:3])[:200]})"]
        objects = conn.execute(
            "SELECT type, name FROM sqlite_master ORDER BY type, name"
        ).fetchall()
        if objects != objects_wanted:
            names = ", ".join(f"{t} {n}" for t, n in objects[:10])
            wanted = ", ".join(f"{t} {n}" for t, n in objects_wanted)
            return [f"{CACHE}: expected exactly {wanted}; found: {names or 'nothing'}"]
        _, columns = _layout(conn)
        for table, cols in sorted(columns_wanted.items()):
            if columns.get(table) != cols:
                return [
                    f"{CACHE}: table {table!r} has columns {columns.get(table)}, expected {cols}"
                ]
        for key, reply in conn.execute("SELECT key, reply FROM responses ORDER BY key"):
            if not isinstance(key, str) or not isinstance(reply, str):
                problems.append(f"{CACHE}: a row holds a non-text key or reply")
                break
            try:  # bounded: a submitted cache is a file from elsewhere
                value = loads_json(reply, f"{CACHE}, reply {key[:16]!r}")
            except OutsideFileError:
                value = None
            if not isinstance(value, dict):
                problems.append(f"{CACHE}: the reply of key {key[:16]!r} is not a JSON object")
                break
    except sqlite3.Error as exc:
        problems.append(f"{CACHE}: unreadable ({exc})")
    finally:
        conn.close()
    return problems


def _tokens(usage: object) -> tuple[int, int] | None:
    if not isinstance(usage, dict):
        return None
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if isinstance(prompt, int) and isinstance(completion, int):
        return prompt, completion
    return None


def compare_replay(
    submitted: Mapping[str, Sequence[tuple[str | None, object]]],
    replayed: Mapping[str, Sequence[tuple[str | None, object]]],
) -> tuple[list[str], bool]:
    """Differences between the submitted and the replayed answers (``id -> [(sql, usage)]`` per
    sample), and whether the reported token counts equal the replayed ones.

    >>> compare_replay({"q1": [("SELECT 1", None)]}, {"q1": [("SELECT 1", None)]})
    ([], True)
    >>> compare_replay({"q1": [("SELECT 1", None)]}, {"q1": [("SELECT 2", None)]})[0]
    ['q1 sample 0: the replay gives other SQL than the submitted']
    """
    diffs: list[str] = []
    tokens_equal = True
    for qid in sorted(set(submitted) | set(replayed)):
        mine, theirs = list(submitted.get(qid, ())), list(replayed.get(qid, ()))
        if len(mine) != len(theirs):
            diffs.append(f"{qid}: {len(mine)} submitted sample(s), {len(theirs)} replayed")
            continue
        for n, ((sql, usage), (again, usage_again)) in enumerate(zip(mine, theirs, strict=True)):
            if sql != again:
                diffs.append(f"{qid} sample {n}: the replay gives other SQL than the submitted")
            if _tokens(usage) != _tokens(usage_again):
                tokens_equal = False
    return diffs, tokens_equal


def cache_rows(path: Path) -> int:
    """The number of replies in a cache file already checked by :func:`check_cache`."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return int(conn.execute("SELECT count(*) FROM responses").fetchone()[0])
    finally:
        conn.close()


def not_from_cache(
    submitted: Mapping[str, Sequence[tuple[str | None, object]]],
    usage: Mapping[str, object],
) -> list[str]:
    """Questions with submitted SQL whose replayed answer read no reply from the cache: the
    replay's usage for the question (``usage``: id -> the replay's usage counters) shows no
    model call, or calls that were not replays. Offline, a reply the cache lacks is an error,
    so a call that happened was answered from the shipped transcript.

    >>> sub = {"q1": [("SELECT 1", None)], "q2": [(None, None)]}
    >>> not_from_cache(sub, {"q1": {"calls": 1, "cached_calls": 1}})
    []
    >>> not_from_cache(sub, {"q1": None})
    ['q1: the replayed answer asked the model nothing (no reply read from the shipped cache)']
    """
    out: list[str] = []
    for qid in sorted(submitted):
        if not any(sql for sql, _ in submitted[qid]):
            continue  # no SQL was submitted: the question counts as wrong anyway
        counters = usage.get(qid)
        calls = counters.get("calls") if isinstance(counters, dict) else None
        cached = counters.get("cached_calls") if isinstance(counters, dict) else None
        if not isinstance(calls, (int, float)) or calls < 1:
            out.append(
                f"{qid}: the replayed answer asked the model nothing (no reply read from the "
                "shipped cache)"
            )
        elif cached != calls:
            out.append(f"{qid}: {calls} model call(s) in the replay, {cached} from the cache")
    return out


def protocol_run(
    adapter: str,
    protocol: Protocol,
    work: Path,
    output: str,
    options: Sequence[str],
    *,
    model: str | None,
    strategy: str | None,
    endpoint: str | None,
    questions_dir: Path | None,
    backend: str,
    dsn: str | None,
) -> list[str]:
    """The pytest command that runs ``adapter`` under the protocol's conditions in ``work``
    (its own LLM cache there, its results file ``work/output``), plus ``options``: the offline
    replay and the verifier's variant check both ask the submitted system this way."""
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:randomly",
        "-q",
        f"--rootdir={work}",
        f"--heron-adapter={adapter}",
        f"--heron-scale={protocol.scale}",
        f"--heron-seed={protocol.seeds[0]}",
        f"--heron-states={len(protocol.seeds)}",
        f"--heron-temperature={protocol.temperature:g}",
        f"--heron-samples={protocol.samples}",
        f"--heron-cache={work / 'cache'}",
        f"--heron-output={work / output}",
        f"--heron-backend={backend}",
        *options,
    ]
    for flag, value in (
        ("dsn", dsn),
        ("model", model),
        ("strategy", strategy),
        ("endpoint", endpoint),
        ("questions", questions_dir),
    ):
        if value:
            cmd.append(f"--heron-{flag}={value}")
    return cmd


def replay(
    folder: Path,
    adapter: str,
    submitted: Mapping[str, Sequence[tuple[str | None, object]]],
    protocol: Protocol,
    work: Path,
    *,
    model: str | None,
    strategy: str | None = None,
    endpoint: str | None = None,
    questions_dir: Path | None = None,
    backend: str = "auto",
    dsn: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> Replay:
    """Replay ``folder``'s cache with the installed ``adapter`` in ``work`` (an empty folder of
    the verifier's) and compare with ``submitted``."""
    say = progress or (lambda _msg: None)
    if not (folder / CACHE).is_file():
        return Replay("not attempted", "the submission ships no LLM cache")
    if adapter in MODEL_FREE_ADAPTERS:
        why = (
            f"adapter {adapter!r} answers without asking a model, so the shipped cache cannot "
            "be what produced the SQL: there is no transcript to replay"
        )
        return Replay("failed", why, reasons=[f"offline replay: {why}"])
    if adapter not in known_adapters():
        return Replay(
            "not attempted",
            f"adapter {adapter!r} is not an installed pytest_heron.adapters entry point here",
        )
    (work / "cache").mkdir(parents=True)
    copy = work / "cache" / CACHE_FILE
    shutil.copyfile(folder / CACHE, copy)  # the submission's own file is never opened to write
    problems = check_cache(copy)
    if not problems and cache_rows(copy) == 0:
        problems = [f"{CACHE}: holds no reply, so nothing can be replayed from it"]
    if problems:
        return Replay("failed", problems[0], reasons=problems)
    cmd = protocol_run(
        adapter,
        protocol,
        work,
        "replay.json",
        ["--heron-offline"],
        model=model,
        strategy=strategy,
        endpoint=endpoint,
        questions_dir=questions_dir,
        backend=backend,
        dsn=dsn,
    )
    say(f"replaying {adapter} offline from the shipped cache ({len(submitted)} questions)")
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    try:
        done = subprocess.run(
            cmd, cwd=work, capture_output=True, text=True, timeout=REPLAY_TIMEOUT_S, env=env
        )
    except subprocess.TimeoutExpired:
        return Replay(
            "failed",
            f"the offline replay ran over {REPLAY_TIMEOUT_S} s",
            reasons=[f"the offline replay of the shipped cache ran over {REPLAY_TIMEOUT_S} s"],
        )
    results = work / "replay.json"
    if not results.is_file():
        tail = (done.stdout + done.stderr).strip().splitlines()[-3:]
        why = f"the replay wrote no results (exit {done.returncode}): {tail}"
        return Replay("failed", why, reasons=[f"offline replay with {adapter}: {why}"[:600]])
    from pytest_heron.results import read_results

    data = read_results(results)
    again: dict[str, list[tuple[str | None, object]]] = {}
    for o in data.outcomes:
        if o.samples:
            again[o.id] = [(s.pred_sql, o.usage if s.sample == 0 else None) for s in o.samples]
        else:
            again[o.id] = [(o.pred_sql, o.usage)]
    unread = not_from_cache(submitted, {o.id: o.usage for o in data.outcomes})
    if unread:
        listed = unread[:MAX_LISTED]
        if len(unread) > MAX_LISTED:
            listed.append(f"and {len(unread) - MAX_LISTED} more")
        return Replay(
            "failed",
            f"{len(unread)} answer(s) were not replayed from a reply in the shipped cache",
            reasons=[f"offline replay with {adapter}: {d}" for d in listed],
            mismatches=len(unread),
        )
    if protocol.samples > 1:  # usage is per question: compare only the SQL of every sample
        submitted = {k: [(sql, None) for sql, _ in v] for k, v in submitted.items()}
        again = {k: [(sql, None) for sql, _ in v] for k, v in again.items()}
    diffs, tokens_equal = compare_replay(submitted, again)
    if diffs:
        listed = diffs[:MAX_LISTED]
        if len(diffs) > MAX_LISTED:
            listed.append(f"and {len(diffs) - MAX_LISTED} more")
        return Replay(
            "differs",
            f"{len(diffs)} answer(s) differ from what {adapter} regenerates from the cache",
            reasons=[f"offline replay with {adapter}: {d}" for d in listed],
            mismatches=len(diffs),
        )
    reported = all(_tokens(usage) is not None for v in submitted.values() for _, usage in v[:1])
    checked = tokens_equal and reported and protocol.samples == 1
    detail = f"{adapter} regenerated every submitted answer from the shipped cache"
    if not tokens_equal:
        detail += "; the reported token counts differ from the replayed ones"
    return Replay("confirmed", detail, tokens_checked=checked, tokens_differ=not tokens_equal)
