"""A vendor's install as examples/vendor and docs/vendor-kit.md write it: ``python -m build``
makes an sdist and a wheel that ``twine check`` accepts, the wheel installs into a fresh venv
outside the clone, and there the vendor example runs its tests and the gate, and ``heron
verify-submission`` reads the board protocol the wheel ships."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENDOR = ROOT / "examples" / "vendor"


def _run(
    args: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 900
) -> str:
    done = subprocess.run(
        args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, f"{args}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout + done.stderr


def test_the_built_wheel_installs_in_a_fresh_venv_and_runs_the_vendor_example(
    tmp_path: Path,
) -> None:
    dist = tmp_path / "dist"
    _run([sys.executable, "-m", "build", "--outdir", str(dist), str(ROOT)], tmp_path)
    (sdist,) = dist.glob("pytest_heron-*.tar.gz")
    (wheel,) = dist.glob("pytest_heron-*.whl")
    checked = _run(
        [sys.executable, "-m", "twine", "check", "--strict", str(sdist), str(wheel)], tmp_path
    )
    assert checked.count("PASSED") == 2, checked
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    # what the commands read: the board protocol, the questions and schema, the runner's files
    assert {"heron_board/protocol.yaml", "heron_data/questions/q001.yaml"} <= names
    assert any(n.startswith("pytest_heron/browser/assets/") for n in names)
    with tarfile.open(sdist) as archive:
        assert any(n.endswith("/board/protocol.yaml") for n in archive.getnames())

    # a fresh venv, outside the clone; the test session's cache (its server and tiny state)
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], tmp_path)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = os.pathsep.join([str(venv / "bin"), env.get("PATH", "")])
    _run([str(venv / "bin" / "pip"), "install", "-q", str(wheel)], tmp_path, env)
    project = tmp_path / "acme"
    shutil.copytree(VENDOR, project)
    out = _run([str(venv / "bin" / "pytest"), "tests", "-p", "no:cacheprovider"], project, env)
    assert "4 passed" in out, out[-3000:]
    gate = _run(
        [
            str(venv / "bin" / "pytest"),
            "--heron-adapter=acme_sql.adapter:AcmeSql",
            "--heron-min-ex=2",
            *("-m", "shape_single", "-p", "no:cacheprovider"),
        ],
        project,
        env,
    )
    assert "heron gate: passed" in gate and "--heron-min-ex=2: multi-state EX" in gate, gate[-3000:]

    # verify-submission outside the clone reads the protocol the wheel installed
    (project / "sub").mkdir()
    done = subprocess.run(
        [str(venv / "bin" / "heron"), "verify-submission", "sub", "--out", "v.json"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    installed = next((venv / "lib").glob("python3*/site-packages/heron_board/protocol.yaml"))
    assert f"protocol: heron-board-v1 ({installed})" in done.stderr, done.stderr[-2000:]
    assert done.returncode == 1 and "submission.yaml: missing" in done.stderr
