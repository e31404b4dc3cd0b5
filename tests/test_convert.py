"""``heron convert bird|spider``: the field's prediction files become heron's predictions
format, which ``--heron-adapter=file`` scores."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_heron.core.errors import ConfigError
from pytest_heron.dataset import load_questions
from pytest_heron.systems.convert import BIRD_TAIL, from_bird, from_spider

IDS = [f"q{i:03d}" for i in range(1, 8)]
SQL = st.text(st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp")), max_size=40).map(
    str.strip
)


@given(st.dictionaries(st.integers(0, len(IDS) - 1), SQL), st.booleans())
def test_bird_positions_map_to_the_ids_in_order(predicted: dict[int, str], tail: bool) -> None:
    data = {str(i): sql + (f"{BIRD_TAIL}heron" if tail else "") for i, sql in predicted.items()}
    got = from_bird(data, IDS, "p.json")
    assert got == [{"id": IDS[i], "sql": predicted[i]} for i in sorted(predicted)]


@given(st.lists(SQL.filter(lambda s: "\t" not in s), min_size=len(IDS), max_size=len(IDS)))
def test_spider_lines_map_to_the_ids_in_order(lines: list[str]) -> None:
    text = "\n".join(f"{sql}\tconcert_singer" if i % 2 else sql for i, sql in enumerate(lines))
    got = from_spider(text + "\n", IDS, "pred.txt")
    assert got == [{"id": q, "sql": sql} for q, sql in zip(IDS, lines, strict=True)]


def test_wrong_files_are_refused_with_every_problem() -> None:
    with pytest.raises(ConfigError, match=r"3 problem\(s\): key '7': position past the last"):
        from_bird({"7": "x", "q999": "y", "0": 5}, IDS, "p.json")
    with pytest.raises(ConfigError, match="expected one JSON object"):
        from_bird(["SELECT 1"], IDS, "p.json")
    with pytest.raises(ConfigError, match="q001 is predicted twice"):
        from_bird({"0": "SELECT 1", "q001": "SELECT 2"}, IDS, "p.json")
    with pytest.raises(ConfigError, match=r"2 line\(s\), but the question set has 7 questions"):
        from_spider("SELECT 1\nSELECT 2\n", IDS, "pred.txt")


def test_a_converted_bird_file_is_scored(pytester: pytest.Pytester) -> None:
    """heron convert (the command) on a BIRD file answering two questions, one with gold's
    SQL: the run on those two scores one right and one wrong."""
    questions = load_questions()
    ids = [q.id for q in questions]
    bird = {"0": f"{questions[0].gold_sql}{BIRD_TAIL}heron", "1": "SELECT 1"}
    (pytester.path / "predict_dev.json").write_text(json.dumps(bird))
    done = subprocess.run(
        [
            *(sys.executable, "-m", "pytest_heron.cli", "convert", "bird", "predict_dev.json"),
            *("--out", "predictions.jsonl"),
        ],
        cwd=pytester.path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "2 of 100 questions predicted; position 0 is q001" in done.stderr
    lines = [json.loads(x) for x in (pytester.path / "predictions.jsonl").read_text().splitlines()]
    assert [x["id"] for x in lines] == ids[:2]
    run = pytester.runpytest_subprocess(
        "--heron-adapter=file", "--heron-predictions=predictions.jsonl", "--heron-scale=tiny",
        "--heron-states=1", "-k", f"{ids[0]} or {ids[1]}", "-p", "no:cacheprovider",
    )  # fmt: skip
    run.assert_outcomes(passed=1, failed=1, deselected=98)


def test_a_spider_file_of_the_wrong_length_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "pred.txt").write_text("SELECT 1\n")
    done = subprocess.run(
        [sys.executable, "-m", "pytest_heron.cli", "convert", "spider", str(tmp_path / "pred.txt")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and done.stdout == ""
    (line,) = done.stderr.strip().splitlines()
    assert "1 line(s), but the question set has 100 questions" in line
