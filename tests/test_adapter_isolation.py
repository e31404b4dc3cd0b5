"""The adapter's process cannot read the harness's files (issue 29, finding 8).

A snooping adapter looks for the embedded server's admin secret (beside the socket folder its
DSN names, and in ``$HERON_CACHE_DIR``) and for the question folder (named in the command line
of every process above it, read from ``/proc``), and reports what it found as its conditions.
Run through the real harness as root, it must find nothing, still reach the database through
its DSN and still score gold. Where isolation is off, the conditions say so and the board
protocol refuses the run.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_heron.board.protocol import parse_protocol
from pytest_heron.core.paths import cache_dir
from pytest_heron.systems import jail

pytest_plugins = ["pytester"]

QUESTIONS = """\
- id: v001
  question: Which numbers from one to three are odd, in order?
  gold_sql: SELECT x FROM (VALUES (1), (2), (3)) AS t(x) WHERE x % 2 = 1 ORDER BY x
  gold_tables: []
  shape: single
  retrieval: named
- id: v002
  question: Pair each letter with its number.
  gold_sql: SELECT * FROM (VALUES ('a', 1), ('b', 2)) AS t(letter, n)
  gold_tables: []
  shape: join
  retrieval: lexical_gap
"""

SNOOP = """
import glob
import os

import psycopg
from psycopg.conninfo import conninfo_to_dict

GOLD = {  # the adapter's own copy: it answers right, so the run shows it still works
    "v001": "SELECT x FROM (VALUES (1), (2), (3)) AS t(x) WHERE x % 2 = 1 ORDER BY x",
    "v002": "SELECT * FROM (VALUES ('a', 1), ('b', 2)) AS t(letter, n)",
}


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


class Snoop:
    name = "snoop"
    version = "1"

    def conditions(self, ctx):
        found = {"uid": os.getuid(), "home": os.environ.get("HOME", "")}
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
        pass

    def generate(self, q):
        return GOLD[q.id]
"""


@pytest.fixture
def open_folder(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A folder every user may read (pytester's are root's alone): the adapter's code, and a
    question folder a mode check alone would not protect."""
    folder = Path(tempfile.mkdtemp(prefix="heron-isolation-test-"))
    folder.chmod(0o755)
    (folder / "snoop.py").write_text(textwrap.dedent(SNOOP))
    questions = folder / "questions"
    questions.mkdir(mode=0o755)
    (questions / "set.yaml").write_text(QUESTIONS)
    for path in (folder / "snoop.py", questions / "set.yaml"):
        path.chmod(0o644)
    monkeypatch.setenv("PYTHONPATH", str(folder))
    monkeypatch.setenv(jail.ENV, "auto")
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.skipif(not jail.possible(), reason="the jail needs root on Linux (CI runs as root)")
@pytest.mark.parametrize("workers", ["0", "2"], ids=["n0", "n2"])
def test_a_jailed_adapter_reads_neither_the_secret_nor_the_questions(
    pytester: pytest.Pytester, open_folder: Path, workers: str
) -> None:
    out = pytester.path / "out.json"
    llm = pytester.path / "llm"
    result = pytester.runpytest_subprocess(
        "--heron-adapter=snoop:Snoop",
        f"--heron-questions={open_folder / 'questions'}",
        f"--heron-output={out}",
        f"--heron-cache={llm}",
        "--heron-scale=tiny",
        "--heron-states=1",
        "-n",
        workers,
        "-p",
        "no:cacheprovider",
        timeout=600,
    )
    text = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.OK, text
    doc: dict[str, Any] = json.loads(out.read_text())
    conditions = doc["conditions"]
    assert conditions["adapter_isolation"] == jail.USER
    found: dict[str, Any] = conditions["adapter_conditions"]
    # it ran as another user, with a home of its own, and its DSN is its way in
    assert found["uid"] != 0 and found["uid"] == jail.ensure_user().pw_uid
    assert found["home"] == str(jail.private_root() / "home")
    assert found["db"].startswith("READ 'heron_adapter_"), found["db"]
    # the LLM response cache folder is the one folder of the harness it writes
    assert found["llm"].startswith("READ "), found["llm"]
    assert (llm / "llm-cache.sqlite3").is_file()
    # it knew where to look ...
    assert found["folders"] == str(open_folder / "questions")
    assert any(key.startswith("secret") and "pg16.secret" in key for key in found), found
    # ... and got nothing: every attempt at a file of the harness was denied
    attempts = {k: v for k, v in found.items() if k.split()[0] in ("secret", "list", "read")}
    assert attempts and all(v.startswith("denied") for v in attempts.values()), attempts
    assert found["environ"].startswith("denied")
    secret = (cache_dir() / "pg16.secret").read_text().strip()
    whole = out.read_text() + text
    assert secret not in whole and "Pair each letter" not in json.dumps(found)
    # and it still answers: gold on every question
    assert all(q["correct"] for q in doc["questions"]), doc["questions"]
    assert not list(jail.private_root().iterdir())  # outside its namespace: an empty folder


def test_without_the_jail_the_conditions_say_so_and_the_board_refuses(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from pytest_heron.systems.isolation import open_system

    monkeypatch.setenv(jail.ENV, "none")
    system = open_system("gold", timeout_s=5.0)
    assert system.isolation == jail.NOT_NEEDED
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "plain_adapter.py").write_text(
        "class A:\n    name = 'a'\n    def prepare(self, ctx): pass\n"
        "    def generate(self, q): return 'SELECT 1'\n"
    )
    system = open_system("plain_adapter:A", timeout_s=20.0)
    try:
        assert system.isolation == jail.NONE
    finally:
        system.close()
    board = Path(__file__).parents[1] / "board" / "protocol.yaml"
    protocol = parse_protocol(board.read_text(), str(board))
    refused = protocol.isolation_problem(jail.NONE)
    assert refused is not None and "not isolated" in refused
    assert protocol.isolation_problem(None) is not None  # an older results file: unknown
    assert protocol.isolation_problem(jail.USER) is None
    assert protocol.isolation_problem(jail.NOT_NEEDED) is None


def test_a_wrong_isolation_setting_or_protocol_value_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pytest_heron.core.errors import ConfigError

    monkeypatch.setenv(jail.ENV, "off")
    with pytest.raises(ConfigError, match="HERON_ADAPTER_ISOLATION"):
        jail.wanted()
    text = (Path(__file__).parents[1] / "board" / "protocol.yaml").read_text()
    with pytest.raises(ConfigError, match="adapter_isolation"):
        parse_protocol(text.replace("[user, not-needed]", "[root]"), "p.yaml")


def test_the_jail_plan_is_pure_logic(tmp_path: Path) -> None:
    closed = tmp_path / "closed"
    inner = closed / "a" / "python"
    inner.mkdir(parents=True)
    closed.chmod(0o700)
    (tmp_path).chmod(0o755)
    # the outermost folder others cannot pass is where the rebuild starts
    top = jail.blocked_at(str(inner))
    assert top is not None and Path(top) in (closed, *closed.parents)
    plan = jail.reveal_plan([str(inner), str(inner / "lib")])
    assert plan == {top: [str(inner)]}  # a path under another is carried by that one's bind
    assert jail.blocked_at("/") is None
    assert jail.socket_of("host=/x/pg16 port=5433 dbname=d") == ("/x/pg16/.s.PGSQL.5433", "5433")
    assert jail.socket_of("host=127.0.0.1 dbname=d") is None
    env = jail.child_environment(
        {"PGPASSWORD": "p", "HERON_DSN": "postgresql://a:b@h/d", "PATH": "/bin", "HOME": "/root"},
        "/j/home",
    )
    assert env["PATH"] == "/bin" and env["HOME"] == "/j/home" and env["TMPDIR"] == "/j/home"
    assert "PGPASSWORD" not in env and "HERON_DSN" not in env


def test_a_protocol_run_whose_adapter_is_not_isolated_stops_before_any_work(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(jail.ENV, "none")
    pytester.makepyfile(
        plain_adapter=(
            "class A:\n    name = 'a'\n    def prepare(self, ctx): pass\n"
            "    def generate(self, q): return 'SELECT 1'\n"
        )
    )
    protocol = pytester.path / "protocol.yaml"
    protocol.write_text(
        "name: t\nmodel: m\ntemperature: 0\nscale: tiny\nseeds: [42]\nstates: 1\nsamples: 1\n"
        "tolerance: 2\nadapter_isolation: [user, not-needed]\n"
    )
    result = pytester.runpytest(
        "--heron-adapter=plain_adapter:A",
        f"--heron-protocol={protocol}",
        "--heron-scale=tiny",
        "--heron-states=1",
        "--heron-model=m",
        "-p",
        "no:cacheprovider",
    )
    text = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, text
    assert "adapter_isolation" in text and "'none'" in text, text
    assert "backend:" not in text  # refused before a server was started


@pytest.mark.skipif(
    not jail.possible() or shutil.which("setpriv") is None, reason="needs root and setpriv"
)
def test_root_without_cap_sys_admin_is_not_jailed() -> None:
    """A Docker container's root has no CAP_SYS_ADMIN: no namespace, so no jail (and the
    conditions say ``none``) rather than a run that fails at the first adapter."""
    import subprocess
    import sys

    probe = "from pytest_heron.systems import jail; print(jail.possible())"
    done = subprocess.run(
        [
            *("setpriv", "--bounding-set=-sys_admin", "--inh-caps=-sys_admin"),
            *(sys.executable, "-c", probe),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip() == "False"


def test_the_default_llm_cache_moves_out_of_the_heron_cache_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The jailed adapter shares the LLM cache's folder, so it is no longer the folder of the
    server's secret; a cache an earlier heron left there is moved, with its WAL."""
    from pytest_heron.systems.llm.cache import CACHE_FILE, default_cache_path

    monkeypatch.setenv("HERON_CACHE_DIR", str(tmp_path))
    (tmp_path / CACHE_FILE).write_bytes(b"db")
    (tmp_path / f"{CACHE_FILE}-wal").write_bytes(b"wal")
    path = default_cache_path()
    assert path == tmp_path / "llm" / CACHE_FILE
    assert path.read_bytes() == b"db" and path.with_name(f"{CACHE_FILE}-wal").read_bytes() == b"wal"
    assert not (tmp_path / CACHE_FILE).exists()
    assert default_cache_path(tmp_path / "mine") == tmp_path / "mine" / CACHE_FILE
