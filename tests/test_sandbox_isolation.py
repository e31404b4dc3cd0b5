"""The adapter's bubblewrap sandbox (systems/bubblewrap.py): no run reaches another, nothing an
adapter starts outlives it, with the harness root and not root.

tests/sandbox_probe.py opens two adapters' processes at once; each is told the other's host
pids and tries to signal, trace and read them; one starts a double-forked ``setsid`` daemon.
Run as the suite's user (root in CI) and as a user that is not root. The same probe without
isolation is the control: there the attempts succeed and the daemon survives, so the checks
can fail.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from pytest_heron.systems import bubblewrap, jail

PROBE = Path(__file__).with_name("sandbox_probe.py")
ROOT = Path(__file__).parents[1]
NOBODY = 65534
GUARD_S = 300  # a probe that hangs is given up (a guard, not a timing assert)


def _need_bwrap() -> None:
    found = bubblewrap.probe()
    assert found.usable, f"the sandbox tests need a working bubblewrap: {found.problem}"


def _passable(path: Path) -> bool:
    return all(os.stat(p).st_mode & 0o001 for p in [*reversed(path.parents), path])


def _unprivileged_command(*args: str) -> tuple[list[str], dict[str, str], str]:
    """How to start the probe as a user that is not root, and which way was taken: the suite's
    own user when it is not root; else ``setpriv`` to ``nobody`` with the system's Python of
    this minor version (when the checkout is readable to others); else a user namespace of its
    own (``unshare --user``: no capability over the host, as an unprivileged user has none)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERON_")}
    if os.geteuid() != 0:
        return [sys.executable, *args], env, "the suite's user"
    system = Path(f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}")
    site = Path(sysconfig.get_paths()["purelib"])
    setpriv = shutil.which("setpriv")
    if setpriv and system.exists() and _passable(site) and _passable(ROOT / "src"):
        env.update(
            HOME="/tmp",
            PYTHONPATH=os.pathsep.join([str(site), str(ROOT / "src"), str(ROOT)]),
        )
        command = [setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
        return [*command, str(system), *args], env, "nobody (setpriv)"
    unshare = shutil.which("unshare")
    assert unshare, "needs setpriv or unshare (util-linux)"
    command = [unshare, "--user", f"--map-user={NOBODY}", f"--map-group={NOBODY}"]
    return [*command, sys.executable, *args], env, "a user namespace (unshare)"


def _probe(command: list[str], env: dict[str, str], out: Path, isolation: str) -> Any:
    done = subprocess.run(
        [*command, str(out), isolation],
        env=env,
        capture_output=True,
        text=True,
        timeout=GUARD_S,
        cwd=out.parent,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(out.read_text())


def _sealed_off(report: dict[str, Any]) -> None:
    """What every sandboxed probe must show."""
    assert report["isolation"] == [jail.NAMESPACE, jail.NAMESPACE]
    assert all(s.startswith("bubblewrap ") for s in report["sandbox"]), report["sandbox"]
    a, b = report["pids"]
    assert a and b and not set(a) & set(b)
    for seen, targets in ((report["a_on_b"], b), (report["b_on_a"], a)):
        # its own PID namespace: bwrap's reaper and the adapter's process, nothing else
        assert seen["own"] == [1, 2], seen["own"]
        for pid in targets:
            tried = seen[str(pid)]
            assert set(tried) == {"signal", "ptrace", "mem", "environ"}
            assert "ok" not in tried.values(), (pid, tried)
    assert report["daemon_started"], report  # the daemon ran (the mark was seen) ...
    assert report["daemon_left"] == []  # ... and ended with its sandbox


def test_no_run_reaches_another_and_no_daemon_outlives_it(tmp_path: Path) -> None:
    _need_bwrap()
    report = _probe([sys.executable, str(PROBE)], dict(os.environ), tmp_path / "s.json", "auto")
    assert report["uid"] == os.geteuid()
    _sealed_off(report)


def test_a_harness_that_is_not_root_isolates_its_adapters_too() -> None:
    _need_bwrap()
    folder = Path(tempfile.mkdtemp(prefix="heron-unprivileged-"))  # pytest's is root's alone
    try:
        folder.chmod(0o777)  # the unprivileged probe writes its report here
        command, env, how = _unprivileged_command(str(PROBE))
        report = _probe(command, env, folder / "unprivileged.json", "auto")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    assert report["uid"] != 0, how
    _sealed_off(report)


WHO = """
import os


class Who:
    name = "who"

    def prepare(self, ctx):
        pass

    def conditions(self, ctx):
        return {"uid": os.getuid(), "root": ",".join(sorted(os.listdir("/")))}

    def generate(self, q):
        return "SELECT 1 AS one"
"""
ONE = """\
- id: w001
  question: What is one?
  gold_sql: SELECT 1 AS one
  gold_tables: []
  shape: single
  retrieval: named
"""


def test_a_run_by_a_harness_that_is_not_root_is_isolated() -> None:
    """The whole plugin, run by a user that is not root (its own embedded server and ``tiny``
    state in a cache folder of its own): the conditions name the sandbox."""
    _need_bwrap()
    folder = Path(tempfile.mkdtemp(prefix="heron-unprivileged-run-"))
    try:
        (folder / "who_adapter.py").write_text(WHO)
        (folder / "questions").mkdir()
        (folder / "questions" / "set.yaml").write_text(ONE)
        command, env, how = _unprivileged_command(
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:randomly",
            "--heron-adapter=who_adapter:Who",
            f"--heron-questions={folder / 'questions'}",
            f"--heron-output={folder / 'out.json'}",
            "--heron-scale=tiny",
            "--heron-states=1",
        )
        for path in [folder, *folder.rglob("*")]:  # the run's own folders, not world-writable
            path.chmod(0o755 if path.is_dir() else 0o644)
            if how.startswith("nobody"):
                os.chown(path, NOBODY, NOBODY)
        env.update(
            HERON_CACHE_DIR=str(folder / "cache"),
            TMPDIR=str(folder),  # the embedded server's lock file is made there
            HOME=str(folder),
            PYTHONPATH=os.pathsep.join(filter(None, [str(folder), env.get("PYTHONPATH")])),
        )
        env.pop("PYTEST_ADDOPTS", None)
        done = subprocess.run(
            command, env=env, capture_output=True, text=True, timeout=GUARD_S, cwd=folder
        )
        assert done.returncode == 0, (how, done.stdout[-3000:], done.stderr[-3000:])
        doc = json.loads((folder / "out.json").read_text())
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    conditions = doc["conditions"]
    assert conditions["adapter_isolation"] == jail.NAMESPACE, how
    assert conditions["adapter_sandbox"].startswith("bubblewrap "), conditions
    seen = conditions["adapter_conditions"]
    assert seen["uid"] == bubblewrap.UID and "heron-unprivileged-run" not in seen["root"]
    assert [q["correct"] for q in doc["questions"]] == [True]


def test_without_isolation_the_same_probe_reaches_and_the_daemon_survives(
    tmp_path: Path,
) -> None:
    """The control: the checks above can fail."""
    report = _probe([sys.executable, str(PROBE)], dict(os.environ), tmp_path / "n.json", "none")
    assert report["isolation"] == [jail.NONE, jail.NONE]
    a, b = report["pids"]
    assert report["a_on_b"][str(b[0])]["signal"] == "ok"
    assert report["b_on_a"][str(a[0])]["signal"] == "ok"
    assert len(report["a_on_b"]["own"]) > 2  # the host's processes
    assert report["daemon_started"] and report["daemon_left"] == report["daemon_started"]


def test_the_network_can_be_cut_and_an_offline_run_on_a_socket_cuts_it(tmp_path: Path) -> None:
    """``--heron-adapter-network``: shared, the adapter reaches a listener on the host's
    loopback; none, a network namespace of its own has no way there."""
    _need_bwrap()
    import socket

    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        done = subprocess.run(
            [sys.executable, str(PROBE), str(tmp_path / "net.json"), "network", str(port)],
            capture_output=True,
            text=True,
            timeout=GUARD_S,
            env=dict(os.environ, HERON_ADAPTER_ISOLATION="bubblewrap"),
        )
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads((tmp_path / "net.json").read_text())
    assert report["shared"] == [
        "bubblewrap 0.8.0, network shared".replace("0.8.0", str(bubblewrap.probe().version)),
        "connected",
    ]
    assert report["none"][0].endswith("network none")
    assert report["none"][1].startswith("refused "), report
    # auto: an offline run that reaches its database by the socket needs no network
    found = bubblewrap.probe()
    offline = bubblewrap.Sandbox(found, "x:Y", protected=[], shared=None, offline=True)
    online = bubblewrap.Sandbox(found, "x:Y", protected=[], shared=None, offline=False)
    try:
        assert offline.network == "shared"  # no socket known yet: a TCP DSN needs the network
        sock = tmp_path / ".s.PGSQL.5432"
        with socket.socket(socket.AF_UNIX) as server:
            server.bind(str(sock))
            for box in (offline, online):
                box.expose(f"host={tmp_path} port=5432 dbname=d")
        assert offline.network == "none" and online.network == "shared"
        assert "--unshare-net" in offline.command(1) and "--unshare-net" not in online.command(1)
    finally:
        offline.close()
        online.close()


def test_the_sandbox_plan_is_pure_logic(tmp_path: Path) -> None:
    cwd = tmp_path / "vendor"
    private = cwd / "private"
    site = tmp_path / "venv" / "site-packages"
    candidates = [str(cwd), str(tmp_path), str(site), str(site / "pkg"), str(private / "x")]
    # not the working directory or above it, nothing inside a protected path, no relative
    # path, and a path inside a kept one is carried by that one
    shown = bubblewrap.whole_paths([*candidates, "rel", "/"], cwd=cwd, protected=[private])
    assert shown == [str(site)]
    # a folder that holds a protected path is not shown whole either
    hidden = site / "pkg" / "questions"
    shown = bubblewrap.whole_paths(candidates, cwd=cwd, protected=[hidden])
    assert shown == [str(private / "x")]
    args = bubblewrap.namespace_args("0.8.0", network="none")
    for flag in ("--unshare-user", "--unshare-pid", "--die-with-parent", "--new-session"):
        assert flag in args
    assert "--disable-userns" in args and "--unshare-net" in args
    older = bubblewrap.namespace_args("0.6.1", network="shared")
    assert "--disable-userns" not in older and "--unshare-net" not in older
    env = bubblewrap.child_environment(
        {"PGPASSWORD": "p", "HERON_DSN": "d", "HERON_CACHE_DIR": "/c", "PATH": "/bin", "K": "v"}
    )
    assert env["PATH"] == "/bin" and env["K"] == "v" and env["HOME"] == bubblewrap.HOME
    assert not {"PGPASSWORD", "HERON_DSN", "HERON_CACHE_DIR"} & set(env)
    # a sealed split's key never reaches an adapter, whatever variable holds it
    keyed = bubblewrap.child_environment(
        {"HERON_SEALED_KEY": "AGE-SECRET-KEY-1ABC", "MY_SPLIT": " age-secret-key-1xyz", "A": "b"}
    )
    assert "HERON_SEALED_KEY" not in keyed and "MY_SPLIT" not in keyed and keyed["A"] == "b"
    from pytest_heron.systems import jail as fallback

    assert "MY_SPLIT" not in fallback.child_environment({"MY_SPLIT": "AGE-SECRET-KEY-1Q"}, "/h")


PARTS = st.lists(st.sampled_from(["a", "b", "c"]), min_size=0, max_size=4)


@given(
    candidates=st.lists(PARTS, max_size=8),
    cwd=PARTS,
    protected=st.lists(PARTS, max_size=3),
)
def test_no_path_shown_whole_reaches_the_working_directory_or_a_protected_path(
    candidates: list[list[str]], cwd: list[str], protected: list[list[str]]
) -> None:
    def path(parts: list[str]) -> Path:
        return Path("/", *parts)

    here, kept = path(cwd), [path(p) for p in protected]
    shown = [
        Path(p)
        for p in bubblewrap.whole_paths(
            [str(path(c)) for c in candidates], cwd=here, protected=kept
        )
    ]
    for folder in shown:
        assert not (here == folder or folder in here.parents)  # not cwd, nor above it
        for p in kept:
            assert not (p == folder or folder in p.parents or p in folder.parents)
    # each shown folder is one of the candidates, and none lies inside another
    assert all(str(f) in {str(path(c)) for c in candidates} for f in shown)
    assert not any(a != b and a in b.parents for a in shown for b in shown)
