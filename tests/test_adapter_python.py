"""A tool in a virtual environment of its own, without heron's dependencies, scored through
``--heron-adapter-python`` (systems/interpreter.py): in the sandbox, at ``-n 0`` and ``-n 2``.

The tool's environment is a fresh ``venv`` (no pip, nothing installed) holding one package of the
tool's own (``toolkit_only``), which heron's environment does not have; heron's dependencies
(psycopg, sqlglot) are not importable there. The adapter answers with the package's value.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path
from typing import Any

import pytest

from pytest_heron.core.errors import ConfigError
from pytest_heron.systems.interpreter import Interpreter

pytest_plugins = ["pytester"]

QUESTIONS = """\
- id: t001
  question: What is seven?
  gold_sql: SELECT 7 AS x
  gold_tables: []
  shape: single
  retrieval: named
- id: t002
  question: What is seven, again?
  gold_sql: SELECT 7 AS seven
  gold_tables: []
  shape: single
  retrieval: named
"""
ADAPTER = """
import sys

import toolkit_only  # only in the tool's own environment
from pytest_heron import Prediction  # heron's wire and types, standard library only


def importable(name):
    try:
        __import__(name)
        return "yes"
    except ImportError:
        return "no"


class Tool:
    name = "tool-in-its-venv"
    version = "1.0"

    def prepare(self, ctx):
        pass

    def conditions(self, ctx):
        return {
            "python": sys.executable,
            "psycopg": importable("psycopg"),
            "sqlglot": importable("sqlglot"),
        }

    def generate(self, q):
        return Prediction(sql=f"SELECT {toolkit_only.VALUE} AS x")
"""
HANG_GUARD_S = 600


def _tool_env(folder: Path) -> Path:
    """A bare venv with one package of the tool's own; its interpreter."""
    venv = folder / "tool-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    package = Path(purelib) / "toolkit_only"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("VALUE = 7\n")
    return python


@pytest.fixture(scope="module")
def tool(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _tool_env(tmp_path_factory.mktemp("tool"))


@pytest.mark.parametrize("workers", ["0", "2"], ids=["n0", "n2"])
def test_a_tool_in_its_own_venv_is_scored_in_the_sandbox(
    pytester: pytest.Pytester, tool: Path, workers: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert not (Path(sysconfig.get_paths()["purelib"]) / "toolkit_only").exists()
    monkeypatch.setenv("HERON_ADAPTER_ISOLATION", "bubblewrap")
    (pytester.path / "tool_adapter.py").write_text(textwrap.dedent(ADAPTER))
    (pytester.path / "questions").mkdir()
    (pytester.path / "questions" / "set.yaml").write_text(QUESTIONS)
    out = pytester.path / "out.json"
    result = pytester.runpytest_subprocess(
        "--heron-adapter=tool_adapter:Tool",
        f"--heron-adapter-python={tool}",
        f"--heron-questions={pytester.path / 'questions'}",
        f"--heron-output={out}",
        "--heron-scale=tiny",
        "--heron-states=1",
        "-n",
        workers,
        "-p",
        "no:cacheprovider",
        timeout=HANG_GUARD_S,
    )
    text = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.OK, text
    doc: dict[str, Any] = json.loads(out.read_text())
    conditions = doc["conditions"]
    own = conditions["adapter_conditions"]
    assert own["python"] == str(tool) and own["psycopg"] == "no" and own["sqlglot"] == "no"
    assert conditions["adapter_isolation"] == "namespace"
    assert conditions["adapter_version"] == "1.0"
    assert [q["correct"] for q in doc["questions"]] == [True, True]
    assert doc["metrics"]["ex_multistate"] == 100.0


def test_an_adapter_python_that_cannot_serve_is_refused_before_any_work(tmp_path: Path) -> None:
    """Checked in-process: a missing file, a program that is not Python, an old Python."""
    with pytest.raises(ConfigError, match="cannot be run"):
        Interpreter.of(tmp_path / "missing")
    fake = tmp_path / "fake-python"
    fake.write_text("#!/bin/sh\necho nope\n")
    fake.chmod(0o755)
    with pytest.raises(ConfigError, match="is not a Python that answers"):
        Interpreter.of(fake)
    old = tmp_path / "old-python"
    old.write_text('#!/bin/sh\necho \'["/p", "/p", "/p", [], [3, 9, 2]]\'\n')
    old.chmod(0o755)
    with pytest.raises(ConfigError, match=r"Python 3\.9\.2; the adapter's process needs 3\.11"):
        Interpreter.of(old)
    own = Interpreter.of(None)
    assert own.own and own.executable == sys.executable and own.environment(os.environ) is None
    other = Interpreter.of(Path(sys.executable))
    env = other.environment({"PYTHONPATH": "/mine"})
    assert env is not None and env["PYTHONPATH"].endswith(os.pathsep + "/mine")
    wire = Path(env["PYTHONPATH"].split(os.pathsep)[0])
    assert sorted(p.name for p in wire.iterdir()) == ["pytest_heron"]  # nothing else of heron
    assert other.sys_path() == [os.getcwd()]
