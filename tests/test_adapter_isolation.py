"""The adapter's process cannot read the harness's files.

The hostile adapter of tests/hostile_scenario.py looks, in its ``conditions``, for the embedded
server's admin secret (beside the socket folder its DSN names, and in ``$HERON_CACHE_DIR``) and
for the question folder (named in the command line of every process above it, read from
``/proc``); in the bubblewrap sandbox it also walks every folder it can see. Run through the real
harness (sandboxed with ``-n 0`` and ``-n 2``; in the fallback jail as root), it must find
nothing, still reach the database through its DSN and still score its honest answer. Where
isolation is off, the conditions say so and the board protocol refuses the run.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

import hostile_scenario
from hostile_scenario import SECRET_QUESTION
from pytest_heron.board.protocol import parse_protocol
from pytest_heron.core.paths import cache_dir
from pytest_heron.systems import bubblewrap, jail

pytest_plugins = ["pytester"]


def _jailed(hostile_runs: tuple[Any, dict[str, Any]], key: str) -> tuple[dict[str, Any], str]:
    scenario, runs = hostile_runs
    result = runs[key]
    text = result.stdout.str() + result.stderr.str()
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED), text
    assert "INTERNALERROR" not in text
    out = scenario.path / f"{key}.json"
    return json.loads(out.read_text()), out.read_text() + text


ISOLATED = [k for k in hostile_scenario.run_keys() if not k.startswith("plain")]
ALLOWED = ("/etc/", f"{bubblewrap.HOME}/", "/tmp/", f"{bubblewrap.INSIDE}/")


@pytest.mark.parametrize("key", ISOLATED)
def test_an_isolated_adapter_reads_neither_the_secret_nor_the_questions(
    hostile_runs: tuple[Any, dict[str, Any]], key: str
) -> None:
    """The hostile adapter's isolated runs (tests/hostile_scenario.py): its ``conditions``
    snoop, in the sandbox (``-n 0`` and ``-n 2``) and in the fallback jail."""
    doc, whole = _jailed(hostile_runs, key)
    _, runs = hostile_runs
    (open_folder,) = runs[f"{key}-where"].outlines
    conditions = doc["conditions"]
    found: dict[str, Any] = conditions["adapter_conditions"]
    sandboxed = hostile_scenario.sandboxed(key)
    if sandboxed:  # a user namespace of its own, a home that says nothing
        assert conditions["adapter_isolation"] == jail.NAMESPACE
        assert conditions["adapter_sandbox"].startswith("bubblewrap "), conditions
        assert found["uid"] == bubblewrap.UID and found["home"] == bubblewrap.HOME
        assert found["folders"] == ""  # no ancestor's command line names the questions
        assert "HERON_CACHE_DIR" not in found["environ"]  # its own environment, if any
    else:  # the fallback jail: another system user, a private mount namespace
        assert conditions["adapter_isolation"] == jail.USER
        assert conditions["adapter_sandbox"].startswith("heron jail"), conditions
        assert found["uid"] != 0 and found["uid"] == jail.ensure_user().pw_uid
        assert found["home"] == str(jail.private_root() / "home")
        assert found["folders"] == str(Path(open_folder) / "questions")  # it knew where ...
        assert any(k.startswith("secret") and "pg16.secret" in k for k in found), found
        assert found["environ"].startswith("denied")
        assert runs[f"{key}-where"].errlines == []  # the jail's folder was empty after the run
    # its DSN is its way in
    assert found["db"].startswith("READ 'heron_adapter_"), found["db"]
    # the LLM response cache folder is the one folder of the harness it writes
    assert found["llm"].startswith("READ "), found["llm"]
    scenario, _ = hostile_runs
    assert (scenario.path / f"llm-{key}" / "llm-cache.sqlite3").is_file()
    # ... and got nothing: every attempt at a file of the harness was denied
    attempts = {k: v for k, v in found.items() if k.split()[0] in ("secret", "list", "read")}
    assert attempts and all(v.startswith("denied") for v in attempts.values()), attempts
    secret = (cache_dir() / "pg16.secret").read_text().strip()
    assert secret not in whole and SECRET_QUESTION not in json.dumps(found)
    # and it still answers: the honest question is right, through the isolation
    assert _by_id(doc)["v008"]["correct"] is True, doc["questions"]


@pytest.mark.parametrize("key", [k for k in ISOLATED if hostile_scenario.sandboxed(k)])
def test_the_sandbox_shows_only_what_it_was_given(
    hostile_runs: tuple[Any, dict[str, Any]], key: str
) -> None:
    """Run from a vendor's git repository that holds a private question set in its history, an
    earlier report and an earlier results file, the sandboxed adapter walked every folder it
    could see and read every file: nothing of the working directory, the heron cache or the
    question files is there, and none of the planted marks was found."""
    doc, _ = _jailed(hostile_runs, key)
    scenario, runs = hostile_runs
    (open_folder,) = runs[f"{key}-where"].outlines
    found = doc["conditions"]["adapter_conditions"]
    seen = found["seen"].split("\n")
    module = str(Path(open_folder).resolve() / "hostile_adapter.py")
    assert module in seen and f"{bubblewrap.INSIDE}/llm/llm-cache.sqlite3" in seen
    assert any(p.startswith(f"{bubblewrap.INSIDE}/pg/.s.PGSQL.") for p in seen), seen
    others = [p for p in seen if p != module and not p.startswith(ALLOWED)]
    assert others == [], others[:20]
    assert not [p for p in seen if "/.git/" in p or str(scenario.path) in p]
    assert not [p for p in seen if str(cache_dir()) in p or "questions" in p]
    assert found["hits"] == ""  # no file it could read holds a mark
    assert len(runs["marks"].outlines) == 3
    assert (scenario.path / ".git").is_dir()  # the repository was there to find


@pytest.mark.parametrize("workers", ["0", "2"], ids=["n0", "n2"])
def test_an_unjailed_run_says_so_in_its_conditions(
    hostile_runs: tuple[Any, dict[str, Any]], workers: str
) -> None:
    """With ``HERON_ADAPTER_ISOLATION=none`` the same adapter runs as the harness's user, and
    the results file says the adapter was not isolated (which the board protocol refuses)."""
    doc, _ = _jailed(hostile_runs, f"plain-n{workers}")
    assert doc["conditions"]["adapter_isolation"] == jail.NONE
    assert doc["conditions"]["adapter_conditions"]["uid"] == os.getuid()


def _by_id(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {q["id"]: q for q in doc["questions"]}


def test_without_the_jail_the_conditions_say_so_and_the_board_refuses(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from pytest_heron.systems.answerers import open_system

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
    assert protocol.isolation_problem(jail.NAMESPACE) is None
    assert protocol.isolation_problem(jail.NOT_NEEDED) is None
    # the fallback jail hides a list, not everything else: the board takes the sandbox only
    assert protocol.isolation_problem(jail.USER) is not None


def test_a_wrong_isolation_setting_or_protocol_value_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pytest_heron.core.errors import ConfigError

    monkeypatch.setenv(jail.ENV, "off")
    with pytest.raises(ConfigError, match="HERON_ADAPTER_ISOLATION"):
        jail.wanted()
    text = (Path(__file__).parents[1] / "board" / "protocol.yaml").read_text()
    with pytest.raises(ConfigError, match="adapter_isolation"):
        parse_protocol(text.replace("[namespace, not-needed]", "[root]"), "p.yaml")


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
