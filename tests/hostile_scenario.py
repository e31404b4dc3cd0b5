"""One hostile adapter, run through the real plugin four times (issues 21 and 29): with and
without the adapter jail, each with ``-n 0`` and ``-n 2``. tests/test_isolation.py,
tests/test_adapter_isolation.py and the volatile-result check assert on these runs (the
``hostile_runs`` fixture in tests/conftest.py runs them once per test run, see tests/inner.py).

Every question meets another attack, in this order (``-n 0`` asks them in order, so the honest
last question is asked by a fresh process after every death and kill):

- ``prepare`` patches the scorer's comparator to "always equal" (it must not reach the scorer)
  and records the process's pid (no adapter process may outlive the run);
- ``conditions`` snoops, where it runs as another user (the jail): the embedded server's admin
  secret, the question folder named in its ancestors' command lines, the harness's environment;
  it also checks that the LLM cache folder works and that its DSN reaches the database;
- v001 answers wrong, v002 reads ``q.gold_sql`` (not there), v003 ``os._exit``, v004
  ``sys.exit``, v005 ``KeyboardInterrupt``, v006 holds the GIL past ``--heron-timeout``, v007
  returns gold's rows through ``random()`` (a volatile result: wrong), v008 answers honestly.

The question folder and the adapter's code live in a folder every user may read (pytest's
folders are root's alone), so only the jail, not a file mode, keeps the questions from it.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import textwrap
from pathlib import Path
from typing import Any

import pytest

from inner import TWO_QUESTIONS, Scenario, in_parallel
from pytest_heron.systems import jail

QUESTIONS = (
    TWO_QUESTIONS
    + """\
- id: v003
  question: Which numbers from one to four are even?
  gold_sql: SELECT x FROM (VALUES (1), (2), (3), (4)) AS t(x) WHERE x % 2 = 0 ORDER BY x
  gold_tables: []
  shape: single
  retrieval: named
- id: v004
  question: What is two plus two?
  gold_sql: SELECT 2 + 2 AS four
  gold_tables: []
  shape: single
  retrieval: named
- id: v005
  question: What is three times three?
  gold_sql: SELECT 3 * 3 AS nine
  gold_tables: []
  shape: single
  retrieval: named
- id: v006
  question: What is ten minus one?
  gold_sql: SELECT 10 - 1 AS nine
  gold_tables: []
  shape: single
  retrieval: named
- id: v007
  question: Which numbers from one to five are odd, in order?
  gold_sql: SELECT x FROM (VALUES (1), (2), (3), (4), (5)) AS t(x) WHERE x % 2 = 1 ORDER BY x
  gold_tables: []
  shape: single
  retrieval: named
- id: v008
  question: Nothing at all.
  gold_sql: SELECT 1 WHERE false
  gold_tables: []
  shape: single
  retrieval: one_hop
"""
)
IDS = [f"v00{i}" for i in range(1, 9)]
SECRET_QUESTION = "Pair each letter"  # text of the question file the snoop must not read

ADAPTER = """
import glob
import os
import sys

import psycopg
from psycopg.conninfo import conninfo_to_dict

import pytest_heron.compare
import pytest_heron.scoring.score

PIDS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pids", "pids.txt")
ODD = "SELECT x FROM (VALUES (1), (2), (3), (4), (5)) AS t(x) WHERE x % 2 = 1"


class Equal:
    equal = True
    reason = None


def always_equal(*args, **kwargs):
    return Equal()


def attempt(read):
    try:
        return "READ " + repr(read())[:2000]
    except Exception as exc:
        return "denied " + type(exc).__name__


def ancestors():
    pid = os.getppid()
    while pid > 1:
        yield pid
        stat = open(f"/proc/{pid}/stat").read()
        pid = int(stat.rsplit(")", 1)[1].split()[1])


def question_folders():
    found = []
    for pid in ancestors():
        for arg in open(f"/proc/{pid}/cmdline", "rb").read().split(b"\\0"):
            text = arg.decode(errors="replace")
            if text.startswith("--heron-questions="):
                found.append(text.split("=", 1)[1])
    return sorted(set(found))


def secrets(dsn):
    places = []
    cache = os.environ.get("HERON_CACHE_DIR")
    if cache:
        places += [os.path.join(cache, "pg16.secret"), *glob.glob(os.path.join(cache, "*"))]
    host = conninfo_to_dict(dsn).get("host") or ""
    if host.startswith("/"):
        places += [host.rstrip("/") + ".secret", *glob.glob(os.path.join(host, "*"))]
    return sorted(set(places))


def cache_works(path):
    import sqlite3

    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE IF NOT EXISTS t (x int)")
    conn.execute("INSERT INTO t VALUES (1)")
    conn.commit()
    return conn.execute("SELECT count(*) FROM t").fetchone()[0]


class Hostile:
    name = "hostile"
    version = "1"

    def conditions(self, ctx):
        found = {"uid": os.getuid(), "home": os.environ.get("HOME", "")}
        if os.getuid() == 0:
            return found  # not jailed: the harness's own user, nothing to find out
        for i, path in enumerate(secrets(ctx.dsn)):
            found[f"secret {i} {path}"] = attempt(lambda: open(path).read())
        folders = question_folders()
        found["folders"] = ",".join(folders)
        for folder in folders:
            found[f"list {folder}"] = attempt(lambda: os.listdir(folder))
            target = os.path.join(folder, "set.yaml")
            found[f"read {target}"] = attempt(lambda: open(target).read())
        found["environ"] = attempt(lambda: open(f"/proc/{os.getppid()}/environ", "rb").read())
        found["llm"] = attempt(lambda: cache_works(ctx.llm.cache_path))
        found["db"] = attempt(
            lambda: psycopg.connect(ctx.dsn).execute("SELECT current_user").fetchone()[0]
        )
        return found

    def prepare(self, ctx):
        pytest_heron.compare.compare = always_equal  # the scorer's comparator...
        pytest_heron.scoring.score.compare.compare = always_equal  # ...wherever it is read
        with open(PIDS, "a") as f:
            f.write(f"{os.getpid()}\\n")

    def generate(self, q):
        if q.id == "v001":
            return "SELECT 41 AS x"  # wrong everywhere
        if q.id == "v002":
            return q.gold_sql  # the gold is not there to read
        if q.id == "v003":
            os._exit(0)
        if q.id == "v004":
            sys.exit(3)
        if q.id == "v005":
            raise KeyboardInterrupt
        if q.id == "v006":
            return str(sum(range(10**12)))  # C code holding the GIL: no thread can stop it
        if q.id == "v007":
            return ODD + " AND random() < 2 ORDER BY x"  # gold's rows, through random()
        return "SELECT 1 WHERE false"
"""

RUNS = {  # key: (jailed, -n)
    "plain-n0": (False, "0"),
    "plain-n2": (False, "2"),
    "jailed-n0": (True, "0"),
    "jailed-n2": (True, "2"),
}
HANG_GUARD_S = 600  # a run that hangs is given up (a guard, not a timing assert)


def keys() -> list[str]:
    """The runs made here: the jailed ones only where the jail is possible (root on Linux)."""
    return [k for k, (jailed, _) in RUNS.items() if not jailed or jail.possible()]


def _open_folder() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="heron-hostile-test-"))
    folder.chmod(0o755)
    (folder / "hostile_adapter.py").write_text(textwrap.dedent(ADAPTER))
    (folder / "questions").mkdir(mode=0o755)
    (folder / "questions" / "set.yaml").write_text(QUESTIONS)
    (folder / "pids").mkdir()
    (folder / "pids").chmod(0o777)  # the jailed adapter's user writes its pids here
    for path in (folder / "hostile_adapter.py", folder / "questions" / "set.yaml"):
        path.chmod(0o644)
    return folder


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for its reaper does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _run(scenario: Scenario, key: str) -> dict[str, pytest.RunResult]:
    """One run, then what only this moment can tell: the adapter's pids (and which still run
    right after the run) and the open folder it was given (removed afterwards)."""
    jailed, workers = RUNS[key]
    folder = _open_folder()
    try:
        run = scenario.run(
            "--heron-adapter=hostile_adapter:Hostile",
            f"--heron-questions={folder / 'questions'}",
            f"--heron-output={scenario.path / f'{key}.json'}",
            f"--heron-cache={scenario.path / f'llm-{key}'}",
            "--heron-timeout=2",
            "--heron-scale=tiny",
            "--heron-states=1",
            "-n",
            workers,
            "-p",
            "no:cacheprovider",
            timeout=HANG_GUARD_S,
            env={
                jail.ENV: "auto" if jailed else "none",
                "PYTHONPATH": os.pathsep.join(
                    filter(None, [str(folder), os.environ.get("PYTHONPATH")])
                ),
            },
        )
        pids = (folder / "pids" / "pids.txt").read_text().split()
        alive = [p for p in pids if _alive(int(p))]
        private = sorted(str(p) for p in jail.private_root().iterdir()) if jailed else []
        return {
            key: run,
            f"{key}-pids": pytest.RunResult(0, pids, alive, 0.0),
            f"{key}-where": pytest.RunResult(0, [str(folder)], private, 0.0),
        }
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def build(scenario: Scenario) -> dict[str, pytest.RunResult]:
    """Every run of :func:`keys`, two at a time."""
    return in_parallel({key: lambda key=key: _run(scenario, key) for key in keys()})


def results(scenario: Scenario, key: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((scenario.path / f"{key}.json").read_text())
    return doc
