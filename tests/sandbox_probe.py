"""Two adapters' processes at once, each trying to reach the other's, and a daemon each leaves
behind: ``python sandbox_probe.py OUT.json ISOLATION``. tests/test_sandbox_isolation.py runs it
as the suite's user (root in CI) and, through ``setpriv``, as a user that is not root; it prints
nothing and writes what it found to OUT.json.

The adapter (:data:`PROBER`) gets its orders as the question's English (JSON): ``attack`` the
host pids it is given (``kill(pid, 0)``, ``PTRACE_ATTACH``, ``/proc/PID/mem`` and ``environ``)
or start a double-forked ``setsid`` daemon whose command line carries a mark. The harness side
finds each system's processes on the host by walking ``/proc`` from its process.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

PROBER = r"""
import ctypes
import errno
import json
import os
import sys
import time

PTRACE_ATTACH, PTRACE_DETACH = 16, 17


def attempt(call):
    try:
        call()
        return "ok"
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc.errno))


def ptrace(pid):
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.ptrace(PTRACE_ATTACH, pid, None, None) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    os.waitpid(pid, 0x40000000)  # __WALL: the tracee's stop, before it can be let go
    libc.ptrace(PTRACE_DETACH, pid, None, None)


def read(path):
    with open(path, "rb") as f:
        f.read(1)


def daemon(mark):
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(600)", mark])
        os._exit(0)
    time.sleep(0.2)


class Prober:
    name = "prober"

    def prepare(self, ctx):
        pass

    def generate(self, q):
        order = json.loads(q.question)
        if "connect" in order:
            import socket

            try:
                socket.create_connection(("127.0.0.1", order["connect"]), timeout=5).close()
                return "connected"
            except OSError as exc:
                return "refused " + type(exc).__name__
        if "daemon" in order:
            daemon(order["daemon"])
            return "SELECT 1"
        found = {"own": sorted(int(p) for p in os.listdir("/proc") if p.isdigit())}
        for pid in order["attack"]:
            found[str(pid)] = {
                "signal": attempt(lambda: os.kill(pid, 0)),
                "ptrace": attempt(lambda: ptrace(pid)),
                "mem": attempt(lambda: read(f"/proc/{pid}/mem")),
                "environ": attempt(lambda: read(f"/proc/{pid}/environ")),
            }
        return json.dumps(found)
"""


def _children() -> dict[int, list[int]]:
    """Every process's children, from the host's ``/proc``."""
    tree: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_text()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        tree.setdefault(parent, []).append(int(name))
    return tree


def descendants(pid: int) -> list[int]:
    """``pid`` and every process below it."""
    tree, found, todo = _children(), [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo += tree.get(current, [])
    return sorted(found)


def marked(mark: str) -> list[int]:
    """The host pids whose command line carries ``mark`` (zombies are not counted)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{name}/cmdline").read_bytes()
            state = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if mark.encode() in cmdline and state != "Z":
            found.append(int(name))
    return sorted(found)


def _gone(mark: str, guard_s: float = 20.0) -> list[int]:
    """The marked processes still there after ``guard_s`` at most (a guard, not a timing)."""
    end = time.monotonic() + guard_s
    while (left := marked(mark)) and time.monotonic() < end:
        time.sleep(0.1)
    return left


def _prober() -> tuple[Any, Any]:
    """The prober adapter written to a folder of its own (the working directory from now on)
    and a context to prepare it with; ``(context, open_system)``."""
    folder = Path(tempfile.mkdtemp(prefix="heron-probe-"))
    (folder / "prober_adapter.py").write_text(PROBER)
    sys.path.insert(0, str(folder))
    os.chdir(folder)
    from pytest_heron.core.types import BenchmarkContext
    from pytest_heron.systems.answerers import open_system

    ctx = BenchmarkContext(
        dsn="", dialect="postgres", scale="tiny", seed=42, schema_ddl="", tables=()
    )
    return ctx, open_system


def _order(order: dict[str, Any]) -> Any:
    """A question whose English is the prober's order."""
    from pytest_heron.dataset import GoldQuestion

    return GoldQuestion(
        id="p1",
        question=json.dumps(order),
        gold_sql="SELECT 1",
        gold_tables=(),
        shape="single",
        retrieval="named",
    )


def network(out: str, port: int) -> None:
    """What an adapter sees of a TCP listener on the host's loopback, with the network shared
    and cut (``--heron-adapter-network``)."""
    ctx, open_system = _prober()
    report = {}
    for mode in ("shared", "none"):
        system = open_system("prober_adapter:Prober", timeout_s=60.0, network=mode)
        try:
            system.ready(ctx)
            report[mode] = [system.sandbox, str(system.ask(_order({"connect": port}), 60.0, None))]
        finally:
            system.close()
    Path(out).write_text(json.dumps(report))


def main(out: str, isolation: str) -> None:
    os.environ["HERON_ADAPTER_ISOLATION"] = isolation
    ctx, open_system = _prober()

    def ask(system: Any, order: dict[str, Any]) -> Any:
        answer = str(system.ask(_order(order), 60.0, None))
        return json.loads(answer) if "attack" in order else answer

    report: dict[str, Any] = {"uid": os.geteuid()}
    systems = [open_system("prober_adapter:Prober", timeout_s=60.0) for _ in "ab"]
    try:
        for system in systems:
            system.ready(ctx)
        report["isolation"] = [s.isolation for s in systems]
        report["sandbox"] = [s.sandbox for s in systems]
        pids = [descendants(s._proc.pid) for s in systems]
        report["pids"] = pids
        report["a_on_b"] = ask(systems[0], {"attack": pids[1]})
        report["b_on_a"] = ask(systems[1], {"attack": pids[0]})
        mark = f"heron-probe-daemon-{uuid.uuid4().hex}"
        ask(systems[0], {"daemon": mark})
        report["daemon_started"] = marked(mark)
    finally:
        for system in systems:
            system.close()
    # without isolation the daemon is expected to stay: a short look is enough there
    report["daemon_left"] = _gone(mark, 20.0 if isolation != "none" else 1.0)
    for pid in report["daemon_left"]:  # without a sandbox it outlives the run: clean up
        os.kill(pid, 9)
    Path(out).write_text(json.dumps(report))


if __name__ == "__main__":
    if sys.argv[2] == "network":
        network(sys.argv[1], int(sys.argv[3]))
    else:
        main(sys.argv[1], sys.argv[2])
