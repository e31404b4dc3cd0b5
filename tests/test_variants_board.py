"""The verifier's variant check, end to end with the deterministic stub endpoint.

One raw-llm run against a stub that answers every question right makes a submission; the
verifier then runs the submitted system on unseen variants at its hidden seed twice: against the
same honest stub (variant EX as high as public EX: accepted), and against a stub that memorised
the public answers (it answers each variant with its parent's public gold: variant EX near 0,
rejected). Without an endpoint the verdict says the check was not run.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest

from chat_stub import ChatStub, completion
from pytest_heron.database.server import Server
from pytest_heron.dataset import load_questions
from pytest_heron.dataset.params import PLACEHOLDER, Value, render
from pytest_heron.dataset.questions import GoldQuestion, builtin_dir

SUBSET = ["q001", "q017", "q038", "q015"]
HIDDEN = 44  # a state the test cache has; not one of the protocol's seeds
PROTOCOL = """\
name: heron-test-variants
model: gpt-4o-mini
temperature: 0
scale: tiny
seeds: [42]
states: 1
samples: 1
tolerance: 2
prices: builtin
variant_max_gap: 10
max_gold_share_unreplayed: 1.0  # the stub answers with gold's SQL; the gold share has its tests
"""


def _pattern(q: GoldQuestion) -> re.Pattern[str]:
    """A regex matching the question's English for any parameter values."""
    out, seen, pos = [], set(), 0
    for m in PLACEHOLDER.finditer(q.template_question):
        out.append(re.escape(q.template_question[pos : m.start()]))
        name = m.group(1)
        out.append(f"(?P={name})" if name in seen else f"(?P<{name}>.+?)")
        seen.add(name)
        pos = m.end()
    out.append(re.escape(q.template_question[pos:]))
    return re.compile("".join(out), re.DOTALL)


def _typed(q: GoldQuestion, found: dict[str, str]) -> dict[str, Value]:
    values: dict[str, Value] = {}
    for p in q.parameters:
        raw = found[p.name]
        if isinstance(p.default, int):
            values[p.name] = int(raw)
        elif isinstance(p.default, dt.date):
            values[p.name] = dt.date.fromisoformat(raw)
        else:
            values[p.name] = raw
    return values


def _responder(questions: list[GoldQuestion], *, memorised: bool) -> Callable[..., Any]:
    """Honest: reads the values back out of the English and writes the right gold. Memorised:
    recognises the question and answers with the public gold, whatever the values."""
    patterns = [(q, _pattern(q)) for q in questions]

    def answer(body: dict[str, Any]) -> dict[str, Any]:
        text = " ".join(str(m.get("content") or "") for m in body["messages"])
        for q, pattern in sorted(patterns, key=lambda p: -len(p[0].template_question)):
            m = pattern.search(text)
            if m is None:
                continue
            sql = (
                q.gold_sql
                if memorised
                else render(q.template_sql, _typed(q, m.groupdict()), sql=True)
            )
            return completion(f"```sql\n{sql}\n```", prompt_tokens=10, completion_tokens=5)
        return completion("```sql\nSELECT 1\n```")

    return answer


@pytest.fixture(scope="module")
def board(server: Server, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("variants-board")
    qdir = folder / "questions"
    qdir.mkdir()
    for qid in SUBSET:
        (qdir / f"{qid}.yaml").write_text(
            builtin_dir().joinpath(f"{qid}.yaml").read_text(encoding="utf-8"), encoding="utf-8"
        )
    (folder / "protocol.yaml").write_text(PROTOCOL, encoding="utf-8")
    questions = load_questions(qdir)
    honest = ChatStub(_responder(questions, memorised=False), models=["gpt-4o-mini"])
    memoriser = ChatStub(_responder(questions, memorised=True), models=["gpt-4o-mini"])
    with honest, memoriser:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-p",
                "no:cacheprovider",
                "-q",
                "--heron-adapter=raw-llm",
                "--heron-scale=tiny",
                "--heron-states=1",
                "--heron-model=gpt-4o-mini",
                f"--heron-endpoint={honest.url}",
                f"--heron-cache={folder / 'llm'}",
                f"--heron-protocol={folder / 'protocol.yaml'}",
                f"--heron-questions={qdir}",
                f"--heron-output={folder / 'results.json'}",
            ],
            capture_output=True,
            text=True,
            timeout=1800,
            cwd=folder,
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        made = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest_heron.cli",
                "submit",
                str(folder / "results.json"),
                "--name",
                "stub-system",
                "--out",
                str(folder / "submissions"),
                "--approach",
                "asks the stub",
                "--contact",
                "tests@example.invalid",
                "--link",
                "https://example.invalid/variants",
            ],
            capture_output=True,
            text=True,
            timeout=600,
            cwd=folder,
        )
        assert made.returncode == 0, made.stderr
        sub = folder / "submissions" / "stub-system"
        out = {}
        for name, endpoint in (
            ("honest", honest.url),
            ("memoriser", memoriser.url),
            ("none", None),
        ):
            extra = [] if endpoint is None else ["--variant-endpoint", endpoint]
            checked = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pytest_heron.cli",
                    "verify-submission",
                    str(sub),
                    "--protocol",
                    str(folder / "protocol.yaml"),
                    "--questions",
                    str(qdir),
                    "--hidden-seed",
                    str(HIDDEN),
                    "--no-replay",
                    "--out",
                    str(folder / f"{name}.json"),
                    *extra,
                ],
                capture_output=True,
                text=True,
                timeout=1800,
                cwd=folder,
            )
            assert checked.returncode in (0, 1), checked.stderr[-3000:]
            out[name] = json.loads((folder / f"{name}.json").read_text())
    return out


def test_an_honest_system_scores_alike_on_public_questions_and_unseen_variants(
    board: dict[str, Any],
) -> None:
    v = board["honest"]
    assert v["variants"]["status"] == "run" and v["variants"]["seed"] == HIDDEN
    assert v["variants"]["public_ex"] == 100.0 and v["variants"]["variant_ex"] == 100.0
    assert v["accepted"], v["reasons"]


def test_a_memorising_system_is_caught_by_the_variants(board: dict[str, Any]) -> None:
    v = board["memoriser"]
    assert v["variants"]["public_ex"] == 100.0  # the same submission: its public SQL is right
    assert v["variants"]["variant_ex"] is not None and v["variants"]["variant_ex"] <= 10.0
    assert not v["accepted"]
    assert any("unseen variants" in r for r in v["reasons"])


def test_without_an_endpoint_the_verdict_says_the_check_was_not_run(
    board: dict[str, Any],
) -> None:
    v = board["none"]
    assert v["variants"]["status"] == "not run" and "no endpoint" in v["variants"]["detail"]
    assert v["variants"]["variant_ex"] is None
    assert v["accepted"], v["reasons"]
