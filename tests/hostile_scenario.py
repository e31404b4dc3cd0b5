"""One hostile adapter, run through the real plugin five times: unisolated, in the bubblewrap
sandbox and in the fallback jail, with ``-n 0`` and ``-n 2`` (the jail with ``-n 0`` only).
tests/test_isolation.py, tests/test_adapter_isolation.py and the volatile-result check assert on
these runs (the ``hostile_runs`` fixture in tests/conftest.py runs them once per test run, see
tests/inner.py).

The runs' working directory is a vendor's git repository (:func:`vendor_repository`): a private
question set in its history, an earlier report and an earlier results file, each with a mark.
Every question meets another attack, in this order (``-n 0`` asks them in order, so the honest
last question is asked by a fresh process after every death and kill):

- ``prepare`` patches the scorer's comparator to "always equal" (it must not reach the scorer)
  and starts a double-forked ``setsid`` daemon that leaves a note in the LLM cache folder (no
  process of a sandboxed adapter may outlive the run);
- ``conditions``, in the sandbox, walks the whole file system it can see and reads every file
  for the marks; where it runs as another user (sandbox or jail) it snoops for the embedded
  server's admin secret, the question folder named in its ancestors' command lines and the
  harness's environment; it also checks that the LLM cache folder works and that its DSN
  reaches the database;
- v001 answers wrong, v002 reads ``q.gold_sql`` (not there), v003 ``os._exit``, v004
  ``sys.exit``, v005 ``KeyboardInterrupt``, v006 holds the GIL past ``--heron-timeout``, v007
  returns gold's rows through ``random()`` (a volatile result: wrong), v008 answers honestly.

The question folder and the adapter's code live in a folder every user may read (pytest's
folders are root's alone), so only the isolation, not a file mode, keeps the questions from it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import textwrap
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from inner import TWO_QUESTIONS, Scenario, in_parallel
from pytest_heron.systems import jail
from sandbox_probe import marked

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


SKIP = ("/proc", "/sys", "/dev", "/usr")


def walk():
    # every path this process can see, but the system's and the interpreter's own folders
    # (and heron's code, which is public); and which readable files hold one of the marks
    import pytest_heron
    import heron_data

    skip = {*SKIP, sys.prefix, sys.base_prefix, os.path.realpath(sys.base_prefix)}
    skip |= {os.path.dirname(pytest_heron.__file__), os.path.dirname(heron_data.__file__)}
    marks = [m for m in os.environ.get("HERON_HOSTILE_MARKS", "").split(",") if m]
    seen, hits = [], []
    for top, folders, files in os.walk("/"):
        folders[:] = sorted(f for f in folders if os.path.join(top, f) not in skip)
        for name in sorted(files):
            path = os.path.join(top, name)
            seen.append(path)
            try:
                if os.path.getsize(path) < 1 << 20:
                    text = open(path, "rb").read()
                    hits += [path for m in marks if m.encode() in text]
            except OSError:
                pass
    return seen, hits


def daemon(folder, mark):
    # a double-forked setsid daemon that leaves a note in the LLM cache folder
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.makedirs(folder, exist_ok=True)
            note = os.path.join(folder, f"daemon-{mark}-{os.getpid()}")
            with open(note, "w") as f:
                f.write("started")
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(900)", mark])
        os._exit(0)
    os.wait()


class Hostile:
    name = "hostile"
    version = "1"

    def conditions(self, ctx):
        found = {"uid": os.getuid(), "home": os.environ.get("HOME", "")}
        if os.getuid() == 0:
            return found  # not isolated: the harness's own user, nothing to find out
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
        if os.environ.get("HERON_HOSTILE_WALK"):  # last: the LLM cache file exists by now
            seen, hits = walk()
            found["seen"] = "\\n".join(seen)
            found["hits"] = "\\n".join(hits)
        return found

    def prepare(self, ctx):
        pytest_heron.compare.compare = always_equal  # the scorer's comparator...
        pytest_heron.scoring.score.compare.compare = always_equal  # ...wherever it is read
        daemon(os.path.dirname(ctx.llm.cache_path), os.environ["HERON_HOSTILE_DAEMON"])

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

RUNS = {  # key: (HERON_ADAPTER_ISOLATION, -n)
    "plain-n0": ("none", "0"),
    "plain-n2": ("none", "2"),
    "sandbox-n0": ("bubblewrap", "0"),
    "sandbox-n2": ("bubblewrap", "2"),
    "jailed-n0": ("jail", "0"),  # the fallback jail, where bubblewrap is missing
}
HANG_GUARD_S = 600  # a run that hangs is given up (a guard, not a timing assert)
PRIVATE_MARK = "private-question-d41c7"  # in the vendor repository's private question set


def run_keys() -> list[str]:
    """The runs made here: the fallback jail's only where it is possible (root on Linux); the
    sandbox's always (a missing bubblewrap fails them, naming the package)."""
    return [k for k, (how, _) in RUNS.items() if how != "jail" or jail.possible()]


def sandboxed(key: str) -> bool:
    return RUNS[key][0] == "bubblewrap"


def _open_folder() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="heron-hostile-test-"))
    folder.chmod(0o755)
    (folder / "hostile_adapter.py").write_text(textwrap.dedent(ADAPTER))
    (folder / "questions").mkdir(mode=0o755)
    (folder / "questions" / "set.yaml").write_text(QUESTIONS)
    for path in (folder / "hostile_adapter.py", folder / "questions" / "set.yaml"):
        path.chmod(0o644)
    return folder


def vendor_repository(scenario: Scenario) -> list[str]:
    """The runs' working directory made a vendor's git repository: a private question set in
    its history (and in ``.git/objects`` only: the work tree no longer has it), an earlier
    report's ``questions.csv`` and an earlier results file. The marks planted in each."""
    marks = [PRIVATE_MARK, "earlier-report-gold-8e21", "earlier-results-gold-5b90"]
    root = scenario.path
    (root / "private.yaml").write_text(f"# {marks[0]}\n{QUESTIONS}")
    git = ["git", "-c", "user.name=v", "-c", "user.email=v@example.com", "-C", str(root)]
    for step in (["init", "-q"], ["add", "private.yaml"], ["commit", "-qm", "private set"]):
        subprocess.run([*git, *step], check=True, capture_output=True)
    (root / "private.yaml").unlink()
    (root / "old-report").mkdir()
    (root / "old-report" / "questions.csv").write_text(f"id,gold_sql\nv001,SELECT '{marks[1]}'\n")
    (root / "old-results.json").write_text(json.dumps({"reason": marks[2]}))
    return marks


def _left(mark: str, guard_s: float) -> list[int]:
    end = time.monotonic() + guard_s
    while (left := marked(mark)) and time.monotonic() < end:
        time.sleep(0.1)
    return left


def _run(scenario: Scenario, key: str, marks: list[str]) -> dict[str, pytest.RunResult]:
    """One run, then what only this moment can tell: the daemons its adapter started (from
    the notes they left in the LLM cache folder) and which of them still run after it."""
    how, workers = RUNS[key]
    folder = _open_folder()
    mark = f"heron-hostile-daemon-{key}-{uuid.uuid4().hex[:12]}"
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
                jail.ENV: how,
                "HERON_HOSTILE_DAEMON": mark,
                "HERON_HOSTILE_MARKS": ",".join(marks),
                "HERON_HOSTILE_WALK": "1" if sandboxed(key) else "",
                "PYTHONPATH": os.pathsep.join(
                    filter(None, [str(folder), os.environ.get("PYTHONPATH")])
                ),
            },
        )
        notes = sorted(p.name for p in (scenario.path / f"llm-{key}").glob("daemon-*"))
        left = _left(mark, 20.0 if sandboxed(key) else 1.0)
        for pid in left:  # outside a sandbox the daemons outlive the run: clean up
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        private = sorted(str(p) for p in jail.private_root().iterdir()) if how == "jail" else []
        return {
            key: run,
            f"{key}-daemons": pytest.RunResult(0, notes, [str(p) for p in left], 0.0),
            f"{key}-where": pytest.RunResult(0, [str(folder)], private, 0.0),
        }
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def build(scenario: Scenario) -> dict[str, pytest.RunResult]:
    """Every run of :func:`keys`, two at a time, in the vendor repository."""
    marks = vendor_repository(scenario)
    runs = in_parallel({key: lambda key=key: _run(scenario, key, marks) for key in run_keys()})
    runs["marks"] = pytest.RunResult(0, marks, [], 0.0)
    return runs


def results(scenario: Scenario, key: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((scenario.path / f"{key}.json").read_text())
    return doc
