"""An adapter named by its file's path (``--heron-adapter=./my_adapter.py:MyTool``) is loaded
from that file, in the adapter's own process and in the pytest process alike; a path that is no
Python file is a usage error of one line, never a bare TypeError."""

from __future__ import annotations

import pytest

from test_plugin import FAST, GOLD, IN_PROCESS, _private

pytest_plugins = ["pytester"]

TOOL = (
    GOLD
    + """
from helpers import answer  # a module beside the file: its folder is on the import path


class MyTool:
    name = "my-tool"
    def prepare(self, ctx): pass
    def generate(self, q):
        return answer(GOLD, q.id)
"""
)
HELPERS = "def answer(gold, qid):\n    return gold[qid]\n"


@pytest.mark.parametrize("isolation", ["own process", IN_PROCESS])
def test_an_adapter_named_by_its_file_path_runs(pytester: pytest.Pytester, isolation: str) -> None:
    private = _private(pytester)
    tools = pytester.mkdir("tools")
    (tools / "my_adapter.py").write_text(TOOL)
    (tools / "helpers.py").write_text(HELPERS)
    extra = [IN_PROCESS] if isolation == IN_PROCESS else []
    done = pytester.runpytest_subprocess(
        "--heron-adapter=./tools/my_adapter.py:MyTool",
        f"--heron-questions={private}",
        *extra,
        *FAST,
    )
    assert done.ret == 0, done.stdout.str() + done.stderr.str()
    done.assert_outcomes(passed=3)
    done.stdout.fnmatch_lines(["adapter=./tools/my_adapter.py:MyTool *"])


@pytest.mark.parametrize(
    ("adapter", "said"),
    [
        (
            "./nowhere.py:MyTool",
            "no Python file */nowhere.py (a path is FILE.py:Class, relative to",
        ),
        ("./tools/my_adapter.py:Missing", "*has no attribute 'Missing'*"),
        (".relative:MyTool", "*cannot import module '.relative'*"),
    ],
)
def test_a_path_that_names_no_adapter_is_one_line(
    pytester: pytest.Pytester, adapter: str, said: str
) -> None:
    private = _private(pytester)
    tools = pytester.mkdir("tools")
    (tools / "my_adapter.py").write_text(TOOL)
    (tools / "helpers.py").write_text(HELPERS)
    done = pytester.runpytest_subprocess(
        f"--heron-adapter={adapter}", f"--heron-questions={private}", *FAST
    )
    assert done.ret == pytest.ExitCode.USAGE_ERROR, done.stdout.str() + done.stderr.str()
    assert "TypeError" not in done.stderr.str() and "Traceback" not in done.stderr.str()
    done.stderr.fnmatch_lines([f"*{said}*"])
