"""The first hour of a tool builder and of a vendor's CI (issue 32): a gate whose exit status
means "regressed or not", benchmark runs in the clone left alone by the test suite's settings,
and every early mistake as one line that names the fix.

Each scenario is one pytester session on three trivial questions at ``tiny`` with one state.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

QUESTIONS = """\
- id: g001
  question: Which numbers from one to three are odd, in order?
  gold_sql: SELECT x FROM (VALUES (1), (2), (3)) AS t(x) WHERE x % 2 = 1 ORDER BY x
  gold_tables: []
  shape: single
  retrieval: named
- id: g002
  question: What is two plus two?
  gold_sql: SELECT 2 + 2 AS four
  gold_tables: []
  shape: single
  retrieval: named
- id: g003
  question: Which numbers from one to four are even, in order?
  gold_sql: SELECT x FROM (VALUES (1), (2), (3), (4)) AS t(x) WHERE x % 2 = 0 ORDER BY x
  gold_tables: []
  shape: single
  retrieval: named
"""
RIGHT = {
    "g001": "SELECT x FROM (VALUES (1), (3)) AS t(x) ORDER BY x",
    "g002": "SELECT 4",
    "g003": "SELECT x FROM (VALUES (2), (4)) AS t(x) ORDER BY x",
}
FAST = ("--heron-scale=tiny", "--heron-states=1", "-p", "no:cacheprovider", "-p", "no:randomly")


def _project(pytester: pytest.Pytester) -> Path:
    folder = pytester.mkdir("q")
    (folder / "set.yaml").write_text(QUESTIONS)
    (pytester.path / "pytest.ini").write_text("[pytest]\n")
    return folder


def _predictions(pytester: pytest.Pytester, name: str, wrong: set[str]) -> str:
    lines = [
        json.dumps({"id": qid, "sql": "SELECT 0" if qid in wrong else sql})
        for qid, sql in RIGHT.items()
    ]
    (pytester.path / name).write_text("\n".join(lines) + "\n")
    return name


def _run(pytester: pytest.Pytester, folder: Path, preds: str, *extra: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(
        "--heron-adapter=file",
        f"--heron-predictions={preds}",
        f"--heron-questions={folder}",
        *FAST,
        *extra,
    )


def test_a_gated_run_below_100_passes_and_a_regression_fails(pytester: pytest.Pytester) -> None:
    """With a gate, wrong answers are xfailed and the gate alone sets the exit status: a tool at
    67 % passes --heron-min-ex=50 (exit 0) and saves a baseline; the same tool a question worse
    fails --heron-compare-fail=ex:2 (exit 1), and no line of that output says it passed."""
    folder = _project(pytester)
    good = _run(
        pytester,
        folder,
        _predictions(pytester, "good.jsonl", {"g002"}),
        "--heron-min-ex=50",
        "--heron-save=baseline",
    )
    assert good.ret == 0, good.stdout.str()
    good.assert_outcomes(passed=2, xfailed=1)
    out = good.stdout.str()
    assert "--heron-min-ex=50: multi-state EX 66.7% -> passed" in out
    assert "heron gate: passed (wrong answers are counted as xfailed); exit status 0" in out
    assert (pytester.path / ".heron" / "runs" / "0001_baseline.json").is_file()

    worse = _run(
        pytester,
        folder,
        _predictions(pytester, "worse.jsonl", {"g002", "g003"}),
        "--heron-compare-fail=ex:2",
    )
    assert worse.ret == 1
    worse.assert_outcomes(passed=1, xfailed=2)
    text = worse.stdout.str()
    assert "regressed" in text  # the comparison names what got worse
    gate = [line for line in text.splitlines() if line.startswith(("heron gate", "--heron-"))]
    assert any("heron gate: FAILED" in line and "exit status 1" in line for line in gate), text
    assert not any("passed" in line for line in gate), gate
    last = text.strip().splitlines()[-1]
    assert "1 heron gate failed" in last, last


def test_a_subset_is_marked_on_the_headline_and_in_the_results_file(
    pytester: pytest.Pytester,
) -> None:
    folder = _project(pytester)
    result = _run(
        pytester,
        folder,
        _predictions(pytester, "all.jsonl", set()),
        "-k",
        "g001",
        "--heron-output=out.json",
    )
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=1, deselected=2)
    result.stdout.fnmatch_lines(["*[[]subset: 1 of 3, not comparable[]] multi-state EX@1*"])
    conditions = json.loads((pytester.path / "out.json").read_text())["conditions"]
    assert conditions["subset_of"] == 3 and conditions["n_questions"] == 1


def test_mistakes_are_one_line_before_any_work(pytester: pytest.Pytester) -> None:
    """An unreachable --heron-dsn, a raising pytest_heron_make_adapter hook and cli without a
    command each stop the run with one usage line (exit status 4) that names the fix."""
    folder = _project(pytester)
    (pytester.path / "conftest.py").write_text(
        "def pytest_heron_make_adapter(config, name):\n"
        "    if name == 'broken':\n"
        "        raise RuntimeError('no licence key')\n"
    )
    cases = {
        ("--heron-adapter=gold", "--heron-dsn=postgresql://nobody@127.0.0.1:9/postgres"): (
            "--heron-dsn: cannot connect to 127.0.0.1:9 as nobody"
        ),
        ("--heron-adapter=broken",): (
            "the pytest_heron_make_adapter hook in conftest.py:3 raised RuntimeError: "
            "no licence key"
        ),
        ("--heron-adapter=cli",): "--heron-adapter=cli needs the command to run",
    }
    for args, expected in cases.items():
        result = pytester.runpytest_subprocess(*args, f"--heron-questions={folder}", *FAST)
        err = result.stderr.str()
        assert result.ret == pytest.ExitCode.USAGE_ERROR, (args, err)
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) == 1 and expected in lines[0], (args, err)
        assert "INTERNALERROR" not in err + result.stdout.str()


def test_the_suite_settings_leave_a_benchmark_run_in_the_clone_alone(
    pytester: pytest.Pytester,
) -> None:
    """tests/conftest.py points the cache at the test suite's folder only for the test suite:
    a run with --heron-adapter and no test paths keeps HERON_CACHE_DIR."""
    from conftest import benchmark_only

    pytester.makeini("[pytest]\ntestpaths = tests\n")
    pytester.mkdir("tests")
    bench = pytester.parseconfig("--heron-adapter=gold")
    assert benchmark_only(bench)
    suite = pytester.parseconfig("tests")
    assert not benchmark_only(suite)
    both = pytester.parseconfig("--heron-adapter=gold", "tests")
    assert not benchmark_only(both)


def test_ctrl_c_says_how_to_resume(pytester: pytest.Pytester) -> None:
    """An interrupted run with --heron-output says that --heron-resume continues it."""
    import os
    import signal
    import subprocess
    import sys
    import time

    folder = _project(pytester)
    log = pytester.path / "out.log"
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONFAULTHANDLER": "1"}
    with log.open("w") as sink:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "pytest",
                "--heron-adapter=cli",
                "--heron-cli-cmd=sleep 60",
                "--heron-output=o.json",
                f"--heron-questions={folder}",
                *FAST,
            ],
            cwd=pytester.path,
            stdout=sink,
            stderr=subprocess.STDOUT,
            env=env,
            # A test process started in the background (`nohup ... &`, some CI runners) has
            # SIGINT ignored, which its children inherit, and a Python that starts with SIGINT
            # ignored never raises KeyboardInterrupt: give the run a terminal's Ctrl-C.
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        deadline = time.monotonic() + 300
        while "collected" not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.5)
        time.sleep(3)  # inside the first question's 60-second command
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            # Seen once in a full run on a loaded machine: show where the run hangs (the
            # fault handler prints every thread's stack on SIGABRT) instead of a bare timeout.
            proc.send_signal(signal.SIGABRT)
            proc.wait(timeout=60)
            pytest.fail("no exit 120 s after Ctrl-C:\n" + log.read_text()[-6000:])
    out = log.read_text()
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, out[-3000:]
    assert "journaled beside" in out and "with --heron-resume to continue" in out, out[-3000:]
    assert "Traceback" not in out.split("KeyboardInterrupt", 1)[-1]
