"""The verifier's offline replay of a shipped LLM cache (issue 15, item 4).

A real ``raw-llm`` run at tiny scale, on three built-in questions under a one-state test protocol,
answers from the scripted endpoint (tests/chat_stub.py) and records its LLM cache; ``heron
submit --cache`` ships it; ``heron verify-submission`` replays the installed ``raw-llm`` offline
from the shipped cache. The honest folder is accepted with its tokens checked; a folder whose SQL
was edited after the run, one whose token counts were lowered, and one whose cache carries a
trigger are rejected for exactly that.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from chat_stub import ChatStub, completion
from inner import Scenario, shared
from pytest_heron.board.replay import check_cache, compare_replay
from pytest_heron.board.submission import CACHE, DIGEST, PREDICTIONS, content_names, folder_digest
from pytest_heron.database.server import Server
from pytest_heron.dataset.questions import builtin_dir

SUBSET = ["q001", "q002", "q003"]
HIDDEN = 900001  # the hidden seed test_submissions.py builds too: one extra state per cache
PROTOCOL = """\
name: heron-test-replay
model: gpt-4o-mini
temperature: 0
scale: tiny
seeds: [42]
states: 1
samples: 1
tolerance: 2
prices: builtin
"""


def _answer(body: dict[str, Any]) -> dict[str, Any]:
    """SELECT the question's length: a different, deterministic SQL per question."""
    text = json.dumps(body["messages"][-1]["content"])
    return completion(
        f"```sql\nSELECT {len(text)} AS n;\n```", prompt_tokens=len(text), completion_tokens=7
    )


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, timeout=1800, cwd=cwd
    )


def _redigest(folder: Path) -> None:
    (folder / DIGEST).write_text(folder_digest(folder, content_names(folder)) + "\n")


@pytest.fixture(scope="session")
def submissions(server: Server, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The run, its four submissions and their verdicts, made once per test run: the first
    xdist worker to ask builds them, another reads them (tests/inner.py's ``shared``)."""
    scenario, _ = shared(tmp_path_factory, "replay", _build)
    return scenario.path / "submissions"


def _build(scenario: Scenario) -> dict[str, pytest.RunResult]:
    folder = scenario.path
    questions = folder / "questions"
    questions.mkdir()
    for qid in SUBSET:
        (questions / f"{qid}.yaml").write_text(
            builtin_dir().joinpath(f"{qid}.yaml").read_text(encoding="utf-8"), encoding="utf-8"
        )
    (folder / "protocol.yaml").write_text(PROTOCOL, encoding="utf-8")
    with ChatStub(_answer, models=["gpt-4o-mini"]) as stub:
        done = _run(
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-q",
            "--heron-adapter=raw-llm",
            "--heron-scale=tiny",
            "--heron-states=1",
            "--heron-model=gpt-4o-mini",
            f"--heron-endpoint={stub.url}",
            f"--heron-cache={folder / 'llm'}",
            f"--heron-protocol={folder / 'protocol.yaml'}",
            f"--heron-questions={questions}",
            f"--heron-output={folder / 'results.json'}",
            cwd=folder,
        )
        assert len(stub.requests) == len(SUBSET), done.stdout[-3000:] + done.stderr[-3000:]
    assert done.returncode in (0, 1), done.stdout[-3000:] + done.stderr[-3000:]
    out = folder / "submissions"
    for name in ("honest", "edited-sql", "fewer-tokens", "trigger-cache"):
        made = _run(
            "-m",
            "pytest_heron.cli",
            "submit",
            str(folder / "results.json"),
            "--name",
            name,
            "--cache",
            str(folder / "llm" / "llm-cache.sqlite3"),
            "--out",
            str(out),
            "--approach",
            "asks the stub",
            "--contact",
            "tests@example.invalid",
            "--link",
            "https://example.invalid/replay",
            cwd=folder,
        )
        assert made.returncode == 0, made.stderr

    def edit(name: str, change: str) -> None:
        path = out / name / PREDICTIONS
        lines = [json.loads(line) for line in path.read_text().splitlines()]
        if change == "sql":
            lines[1]["pred_sql"] = lines[1]["pred_sql"] + " "
        else:
            for line in lines:
                line["usage"]["prompt_tokens"] = 1
        path.write_text("".join(json.dumps(line) + "\n" for line in lines))
        _redigest(out / name)

    edit("edited-sql", "sql")
    edit("fewer-tokens", "tokens")
    with sqlite3.connect(out / "trigger-cache" / CACHE) as conn:
        conn.execute("CREATE TRIGGER t AFTER INSERT ON responses BEGIN DELETE FROM responses; END")
    conn.close()
    _redigest(out / "trigger-cache")
    for sub in sorted(p for p in out.iterdir() if p.is_dir()):
        done = _run(
            "-m",
            "pytest_heron.cli",
            "verify-submission",
            str(sub),
            "--protocol",
            str(folder / "protocol.yaml"),
            "--questions",
            str(questions),
            "--hidden-seed",
            str(HIDDEN),
            cwd=folder,
        )
        assert done.returncode in (0, 1), done.stderr[-3000:]
    return {}


def _verdict(out: Path, name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((out / name / "verdict.json").read_text())
    return data


def test_the_shipped_cache_is_only_the_runs_replies(submissions: Path) -> None:
    with sqlite3.connect(submissions / "honest" / CACHE) as conn:
        rows = conn.execute("SELECT question, created FROM responses ORDER BY question").fetchall()
        mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
    conn.close()
    assert [r[0] for r in rows] == SUBSET
    assert {r[1] for r in rows} == {0}  # no timestamps: the same replies give the same bytes
    assert mode == "delete"
    assert not (submissions / "honest" / f"{CACHE}-wal").exists()


def test_an_honest_submission_replays_and_its_tokens_count_as_checked(
    submissions: Path,
) -> None:
    verdict = _verdict(submissions, "honest")
    assert verdict["accepted"], verdict["reasons"]
    assert verdict["replay"]["status"] == "confirmed"
    assert verdict["replay"]["tokens_checked"] is True
    assert verdict["metrics"]["tokens_prompt"]["status"] == "checked by the offline replay"
    assert verdict["metrics"]["cost_usd"]["status"] == "checked by the offline replay"


def test_sql_edited_after_the_run_is_caught_by_the_replay(submissions: Path) -> None:
    verdict = _verdict(submissions, "edited-sql")
    assert not verdict["accepted"]
    assert verdict["replay"]["status"] == "differs"
    assert verdict["replay"]["mismatches"] == 1
    assert any(
        r.startswith("offline replay with raw-llm: q002 sample 0") for r in verdict["reasons"]
    ), verdict["reasons"]


def test_lowered_token_counts_are_caught_by_the_replay(submissions: Path) -> None:
    verdict = _verdict(submissions, "fewer-tokens")
    assert not verdict["accepted"]
    assert verdict["replay"]["status"] == "confirmed"
    assert verdict["replay"]["tokens_checked"] is False
    assert (
        "the reported token counts differ from those the shipped cache replays"
        in (verdict["reasons"])
    )


def test_a_cache_with_a_trigger_is_refused_before_it_is_used(submissions: Path) -> None:
    verdict = _verdict(submissions, "trigger-cache")
    assert not verdict["accepted"]
    assert verdict["replay"]["status"] == "failed"
    assert any("trigger t" in r and "expected exactly" in r for r in verdict["reasons"])
    # the submission's own file is untouched: the trigger is still there
    with sqlite3.connect(submissions / "trigger-cache" / CACHE) as conn:
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='trigger'")]
    conn.close()
    assert names == ["t"]


def test_check_cache_names_what_is_wrong(tmp_path: Path) -> None:
    bad = tmp_path / "bad.sqlite3"
    with sqlite3.connect(bad) as conn:
        conn.execute(
            "CREATE TABLE responses (key TEXT, endpoint TEXT, PRIMARY KEY (key, endpoint))"
        )
        conn.execute("INSERT INTO responses VALUES ('k', 'x')")
    conn.close()
    assert check_cache(bad) == [
        f"{CACHE}: table 'responses' has columns ('key', 'endpoint'), expected "
        "('key', 'endpoint', 'reply', 'model', 'question', 'created')"
    ]
    (tmp_path / "junk").write_bytes(b"SQLite format 3\x00" + b"\xff" * 200)
    assert check_cache(tmp_path / "junk")  # not a database: a problem, never an exception


def test_compare_replay_counts_sample_mismatches() -> None:
    diffs, same_tokens = compare_replay(
        {"q1": [("A", {"prompt_tokens": 1, "completion_tokens": 2})], "q2": [("B", None)]},
        {"q1": [("A", {"prompt_tokens": 1, "completion_tokens": 3})], "q2": []},
    )
    assert diffs == ["q2: 1 submitted sample(s), 0 replayed"]
    assert same_tokens is False
