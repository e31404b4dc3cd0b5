"""Inner pytest sessions for scenario fixtures of any scope.

``pytester`` is function-scoped, so a scenario that several tests assert on (one gold run, one
hostile adapter run, one resume...) cannot be built with it once per test run. :class:`Scenario`
is the small part of it those fixtures need: a folder of its own, files written into it, and
``python -m pytest`` run there as a subprocess, giving back a :class:`pytest.RunResult` (so
``assert_outcomes`` and ``stdout.fnmatch_lines`` work as with pytester).

Inner sessions are lean: :data:`LEAN_ENV` turns off setuptools plugin autoloading and loads only
the heron plugin and xdist's (for ``-n``), so a plugin brought in by an optional extra (langchain's,
for one) costs nothing per session. ``tests/conftest.py`` puts the same variables into the
environment of every test that uses ``pytester``.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

LEAN_ENV = {
    "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
    "PYTEST_PLUGINS": "pytest_heron.plugin,xdist.plugin",
}


class Scenario:
    """A folder where inner pytest sessions run (as ``pytester`` would run them)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.mkdir(parents=True, exist_ok=True)

    def write(self, name: str, text: str) -> Path:
        target = self.path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        return target

    def run(
        self, *args: str, timeout: float = 1200, env: Mapping[str, str] | None = None
    ) -> pytest.RunResult:
        """``python -m pytest *args`` in the folder, with the folder on PYTHONPATH (so adapters
        written there import, in the adapter's child process too); ``env`` adds variables
        (a PYTHONPATH there comes after the folder)."""
        env = dict(os.environ, **LEAN_ENV, **(env or {}))
        env.pop("PYTEST_ADDOPTS", None)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(self.path), env.get("PYTHONPATH")]))
        basetemp = self.path.with_name(f"{self.path.name}-basetemp-{time.monotonic_ns()}")
        start = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "pytest", f"--basetemp={basetemp}", *args],
            cwd=self.path,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        return pytest.RunResult(
            done.returncode,
            done.stdout.splitlines(),
            done.stderr.splitlines(),
            time.monotonic() - start,
        )


def shared(
    factory: pytest.TempPathFactory,
    name: str,
    build: Callable[[Scenario], dict[str, pytest.RunResult]],
) -> tuple[Scenario, dict[str, pytest.RunResult]]:
    """Run a scenario's inner sessions once per test run, even under xdist.

    The first process to ask builds it in a folder all xdist workers share (the parent of each
    worker's basetemp) while holding a file lock; later ones, in any worker, wait for the lock
    and read what it recorded (exit status and output of each session; the files it wrote stay
    in the folder). Tests must only read the folder, never change it."""
    root = factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # .../pytest-N/popen-gwK -> .../pytest-N, the same for every worker
    folder = root / f"scenario-{name}"
    record = root / f"scenario-{name}.json"
    with open(root / f"scenario-{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if not record.exists():
                runs = build(Scenario(folder))
                saved = {
                    key: [int(r.ret), r.outlines, r.errlines, r.duration] for key, r in runs.items()
                }
                record.write_text(json.dumps(saved))
            loaded = json.loads(record.read_text())
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    results = {key: pytest.RunResult(*value) for key, value in loaded.items()}
    return Scenario(folder), results


def in_parallel(jobs: Mapping[str, Callable[[], dict[str, pytest.RunResult]]]) -> dict[str, Any]:
    """Run independent parts of a scenario two at a time, merging what they return. The worker
    waiting for a scenario's lock has nothing else to do meanwhile, so two inner sessions at
    once keep both cores of the machine busy."""
    from concurrent.futures import ThreadPoolExecutor

    merged: dict[str, pytest.RunResult] = {}
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {name: pool.submit(job) for name, job in jobs.items()}
        for name in jobs:  # in the jobs' order, whatever finished first
            merged.update(futures[name].result())
    return merged


TWO_QUESTIONS = """\
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
"""A private question set's first two questions (an ordered and an unordered result, no
table), which the scenario files extend with the questions each needs."""
