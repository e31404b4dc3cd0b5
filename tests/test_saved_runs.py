"""--heron-save keeps runs under .heron/runs/, --heron-compare pairs this run with a saved one,
--heron-compare-fail gates a drop (as pytest-benchmark's --benchmark-compare-fail does)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from inner import TWO_QUESTIONS
from pytest_heron.cli import main
from pytest_heron.core.errors import ConfigError
from pytest_heron.options import _optional_value
from pytest_heron.results.comparison import parse_fail

pytest_plugins = ["pytester"]

PRIVATE = (
    TWO_QUESTIONS
    + """\
- id: v003
  question: Nothing at all.
  gold_sql: SELECT 1 WHERE false
  gold_tables: []
  shape: single
  retrieval: one_hop
  empty_probe: true
"""
)
RIGHT = {
    "v001": "SELECT x FROM (VALUES (1), (3)) AS t(x) ORDER BY x",
    "v002": "SELECT * FROM (VALUES ('b', 2), ('a', 1)) AS t(l, n)",
    "v003": "SELECT 1 WHERE false",
}
FAST = ["--heron-scale=tiny", "--heron-states=1", "-p", "no:cacheprovider"]


def _setup(pytester: pytest.Pytester) -> list[str]:
    folder = pytester.mkdir("private")
    (folder / "set.yaml").write_text(PRIVATE)
    for name, wrong in (("right", ()), ("worse", ("v001",))):
        lines = [
            json.dumps({"id": q, "sql": "SELECT 0" if q in wrong else sql})
            for q, sql in RIGHT.items()
        ]
        (pytester.path / f"{name}.jsonl").write_text("\n".join(lines) + "\n")
    return ["--heron-adapter=file", f"--heron-questions={folder}", "--heron-min-ex=0", *FAST]


def _git(path: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=path, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def test_save_then_compare_and_gate_a_drop(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    common = _setup(pytester)
    _git(pytester.path, "init", "-q")
    _git(
        pytester.path,
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@t",
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "base",
    )
    commit = _git(pytester.path, "rev-parse", "HEAD")

    base = pytester.runpytest_subprocess(
        *common, "--heron-predictions=right.jsonl", "--heron-save=base"
    )
    assert base.ret == 0
    saved = pytester.path / ".heron" / "runs" / "0001_base.json"
    base.stdout.fnmatch_lines([f"run saved as {saved}"])
    stamp = json.loads(saved.read_text())["saved"]
    assert stamp["name"] == "base" and stamp["number"] == 1
    assert stamp["commit"]["id"] == commit and stamp["commit"]["dirty"] is False
    assert stamp["host"] and "cores" in stamp["machine"]

    worse = pytester.runpytest_subprocess(
        *common,
        "--heron-predictions=worse.jsonl",
        "--heron-save",
        "--heron-compare",
        "--heron-compare-fail=ex:2",
    )
    assert worse.ret == pytest.ExitCode.TESTS_FAILED  # --heron-min-ex=0 alone would pass
    worse.stdout.fnmatch_lines(
        [
            "*heron compare: .heron/runs/0001_base.json (A) against this run (B)*",
            "multi-state EX@1 *100.0% *66.7%",
            "regressed (A right, B wrong): 1 v001",
            "fixed (B right, A wrong): 0",
            "--heron-compare-fail: multi-state EX@1 fell 33.3 points (100.0 -> 66.7), more than "
            "ex:2 -> FAILED",
        ]
    )
    second = pytester.path / ".heron" / "runs" / f"0002_file_{commit[:10]}.json"
    assert second.is_file()

    # by number, with a limit the drop stays under: the session passes and says so
    lenient = pytester.runpytest_subprocess(
        *common,
        "--heron-predictions=worse.jsonl",
        "--heron-compare=1",
        "--heron-compare-fail=ex:40,soft_f1:100",
    )
    assert lenient.ret == 0
    lenient.stdout.fnmatch_lines(
        [
            "*heron compare: .heron/runs/0001_base.json (A) against this run (B)*",  # not 0002
            "regressed (A right, B wrong): 1 v001",
            "--heron-compare-fail=ex:40,soft_f1:100: passed",
        ]
    )
    # the newest saved run is the worse one: no drop
    newest = pytester.runpytest_subprocess(
        *common, "--heron-predictions=worse.jsonl", "--heron-compare-fail=ex:0"
    )
    assert newest.ret == 0
    newest.stdout.fnmatch_lines([f"*heron compare: .heron/runs/{second.name} (A)*"])
    # heron compare reads saved runs as any results file
    assert main(["compare", str(saved), str(second), "--max-drop", "2"]) == 1
    _list_and_compare_by_number(pytester.path, saved, second, commit, capsys)


def _list_and_compare_by_number(
    root: Path, saved: Path, second: Path, commit: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """heron runs lists the two saved runs; heron compare takes their numbers, prints JSON,
    and keeps its columns apart when a run's name is longer than the column."""
    capsys.readouterr()
    assert main(["runs", "--rootdir", str(root)]) == 0
    header, *listed = capsys.readouterr().out.splitlines()
    assert header.split() == [
        "#",
        "name",
        "saved",
        "commit",
        "adapter",
        "scale",
        "seeds",
        "EX",
        "file",
    ]
    assert [line.split()[:2] for line in listed] == [["0001", "base"], ["0002", second.stem[5:]]]
    assert [line.split()[3:8] for line in listed] == [
        [commit[:10], "file", "tiny", "42", "100.0%"],
        [commit[:10], "file", "tiny", "42", "66.7%"],
    ]
    assert len({line.index(".heron") for line in listed}) == 1  # aligned
    assert main(["runs", "--rootdir", str(root), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["number"] for r in rows] == [1, 2]
    assert [r["ex_multistate"] for r in rows] == [100.0, pytest.approx(200 / 3)]

    assert main(["compare", "1", "2", "--rootdir", str(root), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["a"]["file"] == str(saved) and doc["b"]["file"] == str(second)
    assert doc["regressed"] == ["v001"] and doc["fixed"] == [] and doc["both_right"] == 2
    assert doc["drop"]["ex"] == pytest.approx(100 - 200 / 3, abs=1e-3)

    long = root / ("a-results-file-whose-name-is-longer-than-the-table-column" + ".json")
    long.write_text(second.read_text())
    assert main(["compare", "base", str(long), "--rootdir", str(root)]) == 0
    table = capsys.readouterr().out.split("\n\n", 1)[0].splitlines()
    file_row = next(line for line in table if line.startswith("file"))
    assert f"{long.name}" in file_row and f"{saved}  " in file_row  # two spaces at least
    columns = {line.index("66.7%") for line in table if "66.7%" in line}
    assert columns == {file_row.index(str(long))}, table  # B's column starts at one place

    with pytest.raises(SystemExit):  # argparse: a missing run is a usage error below
        main(["compare"])
    assert main(["compare", "7", "2", "--rootdir", str(root)]) == 2
    assert "heron compare 7: no saved run of that number" in capsys.readouterr().err


@given(st.integers(1, 10**6), st.sampled_from(["", "0", "000"]))
def test_a_number_given_to_heron_compare_is_a_saved_run_never_on(number: int, pad: str) -> None:
    text = f"{pad}{number}"
    assert _optional_value("heron-compare", text, numbered=True) == text
    assert _optional_value("heron-save", "1") == ""  # a flag's ini spelling, elsewhere


def test_compare_gate_under_xdist(pytester: pytest.Pytester) -> None:
    common = _setup(pytester)
    assert (
        pytester.runpytest_subprocess(
            *common, "--heron-predictions=right.jsonl", "--heron-save=base", "-n", "2"
        ).ret
        == 0
    )
    worse = pytester.runpytest_subprocess(
        *common, "--heron-predictions=worse.jsonl", "--heron-compare-fail=ex:2", "-n", "2"
    )
    assert worse.ret == pytest.ExitCode.TESTS_FAILED
    worse.stdout.fnmatch_lines(["regressed (A right, B wrong): 1 v001", "*fell 33.3 points*FAILED"])
    saved = json.loads((pytester.path / ".heron/runs/0001_base.json").read_text())
    assert saved["saved"]["commit"] is None  # not a git repository


def test_a_missing_baseline(pytester: pytest.Pytester) -> None:
    common = _setup(pytester)
    none_yet = pytester.runpytest_subprocess(
        *common, "--heron-predictions=right.jsonl", "--heron-compare"
    )
    assert none_yet.ret == 0
    none_yet.stdout.fnmatch_lines(["--heron-compare: no saved run to compare with yet*"])
    named = pytester.runpytest(  # in-process: a usage error, found before any server starts
        *common, "--heron-predictions=right.jsonl", "--heron-compare=nightly"
    )
    assert named.ret == pytest.ExitCode.USAGE_ERROR
    assert "--heron-compare=nightly: no saved run of that number or name" in named.stderr.str()


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("ex", "expected KEY:POINTS"),
        ("speed:2", "expected KEY:POINTS"),
        ("ex:-1", "ex: expected a number of points >= 0"),
        ("ex:nan", "ex: expected a number of points >= 0"),
        ("ex:two", "ex: expected a number of points >= 0"),
    ],
)
def test_bad_compare_fail_values(text: str, error: str) -> None:
    with pytest.raises(ConfigError, match=error):
        parse_fail(text)


def test_compare_fail_values() -> None:
    assert parse_fail("ex:2,grade:0.5") == {"ex": 2.0, "grade": 0.5}


def test_bad_save_name_is_a_usage_error(pytester: pytest.Pytester) -> None:
    common: list[Any] = _setup(pytester)
    bad = pytester.runpytest(  # in-process: a usage error, found before any server starts
        *common, "--heron-predictions=right.jsonl", "--heron-save=../escape"
    )
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    assert "a run name is 1-64 letters" in bad.stderr.str()
