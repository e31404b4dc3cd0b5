"""Fixed costs a user pays: time to the first question of a warm benchmark session, and the
``heron`` command's help and usage errors, against ``python -c "import pytest"`` in the same run.

A warm session is ``pytest --heron-adapter=gold --heron-scale=tiny -k q001`` whose state is
already seeded (the script runs it once first, untimed, to make sure). A small probe plugin
(``-p``, written to a temporary folder) records when each stage ends, measured from just before
the process is started:

- ``plugins``: interpreter, pytest and every installed plugin imported (the first
  pytest_configure);
- ``configure``: the benchmark's run set up (questions, data bundle, adapter process);
- ``states``: server attached, states found valid, every gold query planned (sessionstart);
- ``collect``: the question items collected;
- ``first_question``: the first question's call phase reported (adapter asked, prediction run,
  compared), that is, the first answer the user sees.

Each measurement is the median of ``--repeat`` runs. Prints the breakdown, then
``first_question_s=``, ``heron_help_s=``, ``heron_usage_error_s=`` and ratios against
``import_pytest_s``.

    python bench/startup.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

PROBE = """
import json, os, time
_T = {}
_OUT = os.environ["HERON_STARTUP_PROBE"]

def _mark(name):
    _T.setdefault(name, time.time())

import pytest

class _First:
    @pytest.hookimpl(tryfirst=True)
    def pytest_configure(self, config):
        _mark("plugins")

class _Last:
    @pytest.hookimpl(trylast=True)
    def pytest_configure(self, config):
        _mark("configure")

def pytest_addoption(parser, pluginmanager):
    pluginmanager.register(_First(), "startup-probe-first")
    pluginmanager.register(_Last(), "startup-probe-last")

@pytest.hookimpl(trylast=True)
def pytest_sessionstart(session):
    _mark("states")

def pytest_collection_finish(session):
    _mark("collect")

def pytest_runtest_logreport(report):
    if report.when == "call":
        _mark("first_question")
        import sys
        _T["generator_loaded"] = "pytest_heron.generate.columns" in sys.modules
        with open(_OUT, "w") as f:
            json.dump(_T, f)
"""

STAGES = ("plugins", "configure", "states", "collect", "first_question")


def _name(dist: str) -> str:
    return re.sub(r"[-_.]+", "-", dist).lower()


def _base_install() -> set[str]:
    """The distributions ``pip install pytest-heron`` brings (no extras), by normalised name."""
    found: set[str] = set()
    todo = ["pytest-heron"]
    while todo:
        name = _name(todo.pop())
        if name in found:
            continue
        found.add(name)
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        for line in requires:
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return found


def _foreign_plugins() -> list[str]:
    """``-p no:NAME`` for every pytest plugin installed here that the base install lacks (this
    venv has the test and every adapter extra: hypothesis, langsmith via langchain, anyio)."""
    base = _base_install()
    blocked = []
    for ep in sorted(metadata.entry_points(group="pytest11"), key=lambda e: e.name):
        dist = ep.dist.name if ep.dist is not None else ""
        if _name(dist) not in base:
            blocked += ["-p", f"no:{ep.name}"]
    return blocked


def _timed(
    cmd: list[str], env: dict[str, str], cwd: Path
) -> tuple[float, subprocess.CompletedProcess[str]]:
    started = time.perf_counter()
    done = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    return time.perf_counter() - started, done


def _session(
    env: dict[str, str], cwd: Path, probe_out: Path, extra: list[str], warm: bool = True
) -> dict[str, float]:
    """One warm session's stage end times, in seconds from just before the process started."""
    probe_out.unlink(missing_ok=True)
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "heron_startup_probe",
        "-p",
        "no:cacheprovider",
        "--heron-adapter=gold",
        "--heron-scale=tiny",
        "-k",
        "q001",
        "-q",
        *extra,
    ]
    started = time.time()
    wall, done = _timed(cmd, env, cwd)
    if done.returncode != 0 or not probe_out.exists():
        sys.exit(f"the session failed ({done.returncode}):\n{done.stdout[-3000:]}{done.stderr}")
    marks = json.loads(probe_out.read_text())
    out = {name: marks[name] - started for name in STAGES}
    out["generator_loaded"] = float(warm and marks["generator_loaded"])
    out["exit"] = wall
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="heron-startup-"))
    (work / "heron_startup_probe.py").write_text(PROBE)
    probe_out = work / "marks.json"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(work), os.environ.get("PYTHONPATH")])),
        "HERON_STARTUP_PROBE": str(probe_out),
        "HERON_AUTO_DOCKER": "0",  # the embedded server, as on a machine without Docker
    }
    # Python's default, as a user has it: compiled modules (and pytest's rewritten plugin
    # modules) are cached in __pycache__ after the first run.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    foreign = _foreign_plugins()
    heron = [sys.executable, "-m", "pytest_heron.cli"]
    if Path(sys.executable).with_name("heron").exists():
        heron = [str(Path(sys.executable).with_name("heron"))]

    _session(env, work, probe_out, [], warm=False)  # the tiny state is seeded if it was not
    reference: list[float] = []
    sessions: list[dict[str, float]] = []
    installed: list[dict[str, float]] = []
    helps: list[float] = []
    usages: list[float] = []
    for _ in range(args.repeat):  # interleaved, so a load change hits every measurement alike
        reference.append(_timed([sys.executable, "-c", "import pytest"], env, work)[0])
        sessions.append(_session(env, work, probe_out, foreign))
        installed.append(_session(env, work, probe_out, []))
        helps.append(_timed([*heron, "--help"], env, work)[0])
        wall, done = _timed([*heron, "seed", "--scale", "nope"], env, work)
        if done.returncode == 0:
            sys.exit(f"`heron seed --scale nope` did not fail:\n{done.stdout}")
        usages.append(wall)

    ref = statistics.median(reference)
    stage = {name: statistics.median(s[name] for s in sessions) for name in (*STAGES, "exit")}
    print(f"cpus={os.cpu_count()} load_average={os.getloadavg()[0]:.2f} repeat={args.repeat}")
    print(f"import_pytest_s={ref:.3f}")
    print(f"plugins left out (not in the base install): {' '.join(foreign[1::2]) or 'none'}")
    print("session breakdown (median seconds, stage ends / stage length):")
    previous = 0.0
    for name in (*STAGES, "exit"):
        print(f"  {name:<15} {stage[name]:6.3f}  +{stage[name] - previous:6.3f}")
        previous = stage[name]
    first = stage["first_question"]
    with_all = statistics.median(s["first_question"] for s in installed)
    print(f"first_question_s_every_plugin_here={with_all:.3f} ratio={with_all / ref:.2f}")
    help_s, usage_s = statistics.median(helps), statistics.median(usages)
    runs = " ".join(f"{s['first_question']:.2f}" for s in sessions)
    print(f"first_question_runs={runs}")
    loaded = sum(s["generator_loaded"] for s in [*sessions, *installed])
    print(f"warm sessions that imported the generator: {loaded:.0f} of {2 * args.repeat}")
    print(f"heron_help_s={help_s:.3f} ratio={help_s / ref:.2f}")
    print(f"heron_usage_error_s={usage_s:.3f} ratio={usage_s / ref:.2f}")
    print(f"first_question_ratio={first / ref:.2f}")
    print(f"first_question_s={first:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
