"""A hostile system under test, run through the real harness: its score must not move, nothing it
does may persist, and the run must finish in bounded time.

Each test names the class of attack it stands for (issue 21's list). The tests run the plugin as
users do (pytester subprocesses, a real embedded PostgreSQL), serially and with ``-n 2``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest_plugins = ["pytester"]

FAST = ["--heron-scale=tiny", "--heron-states=1", "-p", "no:cacheprovider"]
WORKERS = [pytest.param([], id="n0"), pytest.param(["-n", "2"], id="n2")]

TIMED = """\
- id: h001
  question: How many numbers are there from one to two million?
  gold_sql: SELECT count(*) AS n FROM generate_series(1, 2000000) AS g
  gold_tables: []
  shape: single
  retrieval: named
- id: h002
  question: Which numbers from one to three are odd, in order?
  gold_sql: SELECT x FROM (VALUES (1), (2), (3)) AS t(x) WHERE x % 2 = 1 ORDER BY x
  gold_tables: []
  shape: single
  retrieval: named
"""

# Skips its work whenever it is not the statement being scored, as told by its own query text
# (current_query() is revoked from readers now; pg_stat_activity shows a session its own query):
# under EXPLAIN ANALYZE timing this trick made VES 208.8 and the Grade 121.8.
TIMING_CHEAT = """
class Cheat:
    name = "cheat"
    version = "1"

    def prepare(self, ctx):
        pass

    def generate(self, q):
        if q.id == "h001":
            return (
                "SELECT * FROM (SELECT count(*) AS n FROM generate_series(1, 2000000) AS g) t "
                "WHERE (SELECT query NOT LIKE 'EXPLAIN%' FROM pg_stat_activity "
                "WHERE pid = pg_backend_pid())"
            )
        return "SELECT 1 AS x UNION ALL SELECT 3 ORDER BY 1"
"""


def _setup(pytester: pytest.Pytester, questions: str, **modules: str) -> Path:
    folder = pytester.mkdir("questions")
    (folder / "set.yaml").write_text(questions)
    for name, source in modules.items():
        (pytester.path / f"{name}.py").write_text(source)
    return folder


def _results(path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(path.read_text())
    return doc


@pytest.mark.parametrize("workers", WORKERS)
def test_timing_cannot_be_told_apart_from_scoring(
    pytester: pytest.Pytester, workers: list[str]
) -> None:
    """Class 3: VES, R-VES and the Grade gamed by the SQL alone."""
    from pytest_heron.scoring.score import VES_FACTOR_CAP

    folder = _setup(pytester, TIMED, cheat=TIMING_CHEAT)
    pytester.runpytest_subprocess(
        "--heron-adapter=cheat:Cheat",
        f"--heron-questions={folder}",
        "--heron-output=o.json",
        *FAST,
        *workers,
    )
    doc = _results(pytester.path / "o.json")
    by_id = {q["id"]: q for q in doc["questions"]}
    assert by_id["h001"]["correct"] and by_id["h002"]["correct"]
    # the wrapped query does gold's work every time it is timed: no speed-up to speak of
    assert by_id["h001"]["ves"] is not None and by_id["h001"]["ves"] < 1.5 <= VES_FACTOR_CAP
    assert doc["metrics"]["grade"] <= 100.0


WRONG_ON_V1 = """
class Wrong:
    name = "wrong"
    version = "1"

    def prepare(self, ctx):
        pass

    def generate(self, q):
        if q.id == "h002":
            return "SELECT 2 AS x"
        return "SELECT count(*) AS n FROM generate_series(1, 2000000) AS g"
"""


@pytest.mark.parametrize("workers", WORKERS)
def test_a_tampered_journal_is_not_trusted(pytester: pytest.Pytester, workers: list[str]) -> None:
    """Class 9: a journal record whose ``correct`` is not a boolean, or that is not an outcome at
    all, is asked again on resume instead of being counted."""
    folder = _setup(pytester, TIMED, wrong=WRONG_ON_V1)
    args = ["--heron-adapter=wrong:Wrong", f"--heron-questions={folder}", "--heron-output=o.json"]
    pytester.runpytest_subprocess(*args, *FAST, *workers)
    journal = pytester.path / "o.json.jsonl"
    lines = journal.read_text().splitlines()
    records = [json.loads(line) for line in lines[1:]]
    assert {r["id"]: r["correct"] for r in records} == {"h001": True, "h002": False}
    tampered = [lines[0]]
    for r in records:
        if r["id"] == "h002":
            r["correct"] = "no"  # truthy: the old reader counted it as right
        tampered.append(json.dumps(r))
    tampered.append('{"id": "h001", "correct": true, "surprise": 1}')  # not an outcome
    journal.write_text("\n".join(tampered) + "\n")
    resumed = pytester.runpytest_subprocess(*args, "--heron-resume", *FAST, *workers)
    resumed.stdout.fnmatch_lines(["*journal: 2 record(s) were not valid outcomes*h001 h002*"])
    doc = _results(pytester.path / "o.json")
    assert {q["id"]: q["correct"] for q in doc["questions"]} == {"h001": True, "h002": False}
    assert doc["metrics"]["ex_multistate"] == 50.0
