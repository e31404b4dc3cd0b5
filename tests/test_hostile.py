"""A hostile system under test, run through the real harness: its score must not move, nothing it
does may persist, and the run must finish in bounded time.

Each test names the class of attack it stands for (issue 21's list). The tests run the plugin as
users do (subprocesses, a real embedded PostgreSQL), serially and with ``-n 2``: one scenario
(tests/inner.py) makes, for each, the timing cheat's run and its tampered journal's resume.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from inner import Scenario, in_parallel, shared

FAST = ["--heron-scale=tiny", "--heron-states=1", "-p", "no:cacheprovider"]
WORKERS = {"n0": [], "n2": ["-n", "2"]}

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
# under EXPLAIN ANALYZE timing this trick made VES 208.8 and the Grade 121.8. h002 is answered
# right, or wrong when HOSTILE_H002=wrong (the resumed run of the journal test).
TIMING_CHEAT = """
import os


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
        if os.environ.get("HOSTILE_H002") == "wrong":
            return "SELECT 2 AS x"
        return "SELECT 1 AS x UNION ALL SELECT 3 ORDER BY 1"
"""


def _flow(scenario: Scenario, key: str) -> dict[str, pytest.RunResult]:
    """The cheat's run (both answers right), its journal tampered with, then the run resumed
    with h002 answered wrong (a tampered record asked again scores False; one trusted as
    written would stay right)."""
    workers = WORKERS[key]
    folder = scenario.path / "questions"
    out = scenario.path / f"{key}.json"
    args = ["--heron-adapter=cheat:Cheat", f"--heron-questions={folder}"]
    args.append(f"--heron-output={out}")
    runs = {key: scenario.run(*args, *FAST, *workers)}
    (scenario.path / f"{key}-first.json").write_bytes(out.read_bytes())
    journal = out.with_name(out.name + ".jsonl")
    lines = journal.read_text().splitlines()
    runs[f"{key}-journal"] = pytest.RunResult(0, lines, [], 0.0)
    tampered = [lines[0]]
    for line in lines[1:]:
        record = json.loads(line)
        if record["id"] == "h002":
            record["correct"] = "no"  # truthy: the old reader counted it as right
        tampered.append(json.dumps(record))
    tampered.append('{"id": "h001", "correct": true, "surprise": 1}')  # not an outcome
    journal.write_text("\n".join(tampered) + "\n")
    runs[f"{key}-resumed"] = scenario.run(
        *args, "--heron-resume", *FAST, *workers, env={"HOSTILE_H002": "wrong"}
    )
    return runs


def _build(scenario: Scenario) -> dict[str, pytest.RunResult]:
    """The flow for -n 0 and for -n 2, side by side."""
    scenario.write("questions/set.yaml", TIMED)
    scenario.write("cheat.py", TIMING_CHEAT)
    return in_parallel({key: lambda key=key: _flow(scenario, key) for key in WORKERS})


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Scenario, dict[str, pytest.RunResult]]:
    return shared(tmp_path_factory, "hostile-timing", _build)


def _results(path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(path.read_text())
    return doc


@pytest.mark.parametrize("key", WORKERS)
def test_timing_cannot_be_told_apart_from_scoring(
    runs: tuple[Scenario, dict[str, pytest.RunResult]], key: str
) -> None:
    """Class 3: VES, R-VES and the Grade gamed by the SQL alone."""
    from pytest_heron.scoring.score import VES_FACTOR_CAP

    scenario, _ = runs
    doc = _results(scenario.path / f"{key}-first.json")
    by_id = {q["id"]: q for q in doc["questions"]}
    # Since issue 40 the scoring role may not read pg_stat_activity nor call pg_backend_pid(),
    # and the volatility check names them: the cheat cannot even run, let alone be timed.
    h001 = by_id["h001"]
    assert h001["correct"] is False and h001["ves"] is None, h001
    assert h001["error"].startswith("permission denied for "), h001
    assert h001["reason"].startswith("volatile result: "), h001
    assert "pg_stat_activity" in h001["reason"] and "pg_backend_pid()" in h001["reason"]
    assert by_id["h002"]["correct"]
    assert by_id["h002"]["ves"] is None or by_id["h002"]["ves"] <= VES_FACTOR_CAP
    assert doc["metrics"]["grade"] <= 100.0


@pytest.mark.parametrize("key", WORKERS)
def test_a_tampered_journal_is_not_trusted(
    runs: tuple[Scenario, dict[str, pytest.RunResult]], key: str
) -> None:
    """Class 9: a journal record whose ``correct`` is not a boolean, or that is not an outcome at
    all, is asked again on resume instead of being counted."""
    scenario, results = runs
    records = [json.loads(line) for line in results[f"{key}-journal"].outlines[1:]]
    assert {r["id"]: r["correct"] for r in records} == {"h001": False, "h002": True}
    resumed = results[f"{key}-resumed"]
    resumed.stdout.fnmatch_lines(["*journal: 2 record(s) were not valid outcomes*h001 h002*"])
    doc = _results(scenario.path / f"{key}.json")
    # trusted as written, the tampered h002 ("no", truthy) would count as right: 50.0
    assert {q["id"]: q["correct"] for q in doc["questions"]} == {"h001": False, "h002": False}
    assert doc["metrics"]["ex_multistate"] == 0.0
