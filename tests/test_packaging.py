"""A light core: what a plain ``pip install pytest-heron`` brings into a user's pytest session,
and that the core works without the optional packages (each extra's own error is tested with
its adapter or back end)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

PYPROJECT = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())
OPTIONAL = ("openai", "testcontainers", "docker", "faker", "pandas", "bm25s", "Stemmer")


def _name(requirement: str) -> str:
    return re.split(r"[\s<>=!~;\[(]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def _core_closure() -> set[str]:
    """The installed distributions a core install pulls in (requirements without extras)."""
    seen: set[str] = set()
    todo = ["pytest-heron"]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue  # an environment marker excluded it here
        todo.extend(_name(r) for r in requires if "extra ==" not in r)
    return seen


def test_the_core_dependencies_leave_out_what_only_some_users_need() -> None:
    core = {_name(r) for r in PYPROJECT["project"]["dependencies"]}
    assert not core & {"faker", "pandas", "openai", "testcontainers", "bm25s", "pystemmer"}
    extras = PYPROJECT["project"]["optional-dependencies"]
    assert [_name(r) for r in extras["llm"]] == ["openai"]
    assert [_name(r) for r in extras["docker"]] == ["testcontainers"]
    assert [_name(r) for r in extras["pools"]] == ["faker"]
    assert "pools" not in extras["test"][-1]  # Faker's pytest plugin stays out of test sessions


def test_no_core_dependency_adds_a_pytest_plugin() -> None:
    closure = _core_closure()
    assert {"pytest", "pytest-xdist", "psycopg", "numpy"} <= closure
    assert not closure & {"faker", "pandas", "openai", "testcontainers"}
    registering = {
        ep.dist.name.lower().replace("_", "-")
        for ep in metadata.entry_points(group="pytest11")
        if ep.dist is not None
    }
    assert "faker" in {_name(r) for r in _all_requirements()}  # a plugin some extra brings
    # platformdirs (4.5+) registers one fixture and imports nothing more at start-up; Faker's
    # plugin imported faker and its providers into every session
    assert registering & closure <= {"pytest-heron", "pytest-xdist", "platformdirs"}
    assert {"pytest-heron", "pytest-xdist"} <= registering & closure


def _all_requirements() -> list[str]:
    return [r for reqs in PYPROJECT["project"]["optional-dependencies"].values() for r in reqs]


CORE_ONLY = """
import json, sys

class Block:  # the optional packages cannot be imported, as after a core-only install
    def find_spec(self, fullname, path=None, target=None):
        if fullname.split(".")[0] in {blocked!r}:
            raise ImportError(f"No module named {{fullname!r}}")
        return None

sys.meta_path.insert(0, Block())

from pytest_heron.compare import compare
from pytest_heron.database.server import choose, docker_available
from pytest_heron.retrieval import rank_tables

rows = [(k % 997, 2**60 + k) for k in range(60_000)]  # the big-result path (120,000 codes)
out = {{
    "big_equal": compare(rows, rows[::-1]).equal,
    "big_unequal": compare(rows, [*rows[:-1], (0, 0)]).equal,
    "bm25": rank_tables("How many rows are in core.tenants?", "bm25", k=1),
    "docker": docker_available(),
    "auto": choose("auto", None),
    "loaded": sorted(m for m in {blocked!r} if m in sys.modules),
}}
print(json.dumps(out))
"""


def test_the_core_runs_without_the_optional_packages() -> None:
    code = CORE_ONLY.format(blocked=list(OPTIONAL))
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300
    )
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out == {
        "big_equal": True,
        "big_unequal": False,
        "bm25": ["core.tenants"],
        "docker": "the docker back end needs the docker extra: pip install 'pytest-heron[docker]' "
        "(from a clone: pip install '.[docker]')",
        "auto": "embedded",
        "loaded": [],
    }


def test_the_package_list_names_every_package_folder() -> None:
    """A plain (not editable) install ships only the listed packages: a folder left out of
    ``[tool.setuptools] packages`` installs without it and the plugin fails to import."""
    root = Path(__file__).resolve().parents[1]
    mapped = PYPROJECT["tool"]["setuptools"]["package-dir"]
    found: list[str] = []
    tops = [("pytest_heron", root / "src" / "pytest_heron")]
    tops += [(name, root / where) for name, where in sorted(mapped.items()) if name]
    for top, folder in tops:
        for init in sorted(folder.rglob("__init__.py")):
            parts = init.parent.relative_to(folder).parts
            found.append(".".join((top, *parts)))
    assert sorted(PYPROJECT["tool"]["setuptools"]["packages"]) == sorted(found)


ROOT = Path(__file__).resolve().parents[1]


def test_the_wheel_ships_the_board_protocol(tmp_path: Path) -> None:
    """A built wheel (pip's own build, as `pip install .` makes it) carries board/protocol.yaml
    as the package ``heron_board``, byte for byte: what verify-submission reads outside a clone."""
    import zipfile

    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (wheel,) = tmp_path.glob("pytest_heron-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        shipped = archive.read("heron_board/protocol.yaml")
    assert shipped == (ROOT / "board" / "protocol.yaml").read_bytes()


def _heron_outside(tmp_path: Path, *args: str, code: str = "") -> subprocess.CompletedProcess[str]:
    """``heron ARGS`` run from a folder outside the clone (``code`` runs first)."""
    program = f"import sys\n{code}\nfrom pytest_heron.cli import main\nsys.exit(main(sys.argv[1:]))"
    return subprocess.run(
        [sys.executable, "-c", program, *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_verify_submission_outside_the_clone_reads_the_installed_protocol(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()  # an empty submission: refused, after the protocol was read
    done = _heron_outside(tmp_path, "verify-submission", "sub", "--out", "v.json")
    assert "protocol: heron-board-v1 (" in done.stderr, done.stderr[-2000:]
    assert "cannot read the protocol" not in done.stderr
    wrong = _heron_outside(
        tmp_path, "verify-submission", "sub", "--protocol", "board/protocol.yaml"
    )
    assert wrong.returncode == 2 and "the board's protocol is installed at " in wrong.stderr
    # an install without the package: one line that says to pass --protocol
    bare = _heron_outside(
        tmp_path, "verify-submission", "sub", code="sys.modules['heron_board'] = None"
    )
    assert bare.returncode == 2
    (line,) = bare.stderr.strip().splitlines()
    assert "no board protocol" in line and "pass --protocol FILE" in line
