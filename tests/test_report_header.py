"""The report header's line and the hook that adds fields to the results file, in one run at
``-n 2`` (the header is the controller's; the fields are added once, after the last question)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from inner import TWO_QUESTIONS
from pytest_heron.generate import load_bundle

pytest_plugins = ["pytester"]

CONFTEST = """
def pytest_heron_results_fields(config, results):
    return {"ci_job": "build-17", "answered": len(results.outcomes)}


class Other:
    def pytest_heron_results_fields(self, config, results):
        return {"runner": "self-hosted", "ok": True}


def pytest_configure(config):
    config.pluginmanager.register(Other(), "other-fields")
"""


def test_the_header_names_the_plan_and_plugins_add_results_fields(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(CONFTEST)
    folder = pytester.path / "questions"
    folder.mkdir()
    (folder / "set.yaml").write_text(TWO_QUESTIONS)
    out = pytester.path / "out.json"
    result = pytester.runpytest_subprocess(
        "--heron-adapter=gold",
        f"--heron-questions={folder}",
        f"--heron-output={out}",
        "--heron-scale=tiny",
        "--heron-states=1",
        "-n",
        "2",
        "-p",
        "no:cacheprovider",
        timeout=600,
    )
    text = result.stdout.str()
    assert result.ret == pytest.ExitCode.OK, text + result.stderr.str()
    header = [line for line in result.stdout.lines if line.startswith("heron: adapter=")]
    assert header == [
        f"heron: adapter=gold isolation=not-needed scale=tiny seeds=42 states=1 backend=auto "
        f"layout=standard data version {load_bundle().data_version}, 2 questions ({folder})"
    ], text
    assert text.index("heron: adapter=") < text.index("passed")  # before the run, once
    doc: dict[str, Any] = json.loads(out.read_text())
    assert doc["extra"] == {
        "answered": 2,
        "ci_job": "build-17",
        "ok": True,
        "runner": "self-hosted",
    }
    assert list(doc) == ["version", "conditions", "metrics", "breakdown", "questions", "extra"]


def test_a_results_field_that_is_not_a_scalar_or_given_twice_is_refused() -> None:
    """In-process: the checks the plugin applies to what the hooks return."""
    from pytest_heron.core.errors import ConfigError
    from pytest_heron.run.controller import _scalar_fields

    assert _scalar_fields({"a": 1, "b": None, "c": "x", "d": 1.5, "e": False}) == {
        "a": 1,
        "b": None,
        "c": "x",
        "d": 1.5,
        "e": False,
    }
    with pytest.raises(ConfigError, match=r"field 'nested' = \{'x': 1\}"):
        _scalar_fields({"nested": {"x": 1}})
    with pytest.raises(ConfigError, match="a field is a name"):
        _scalar_fields({3: "x"})
