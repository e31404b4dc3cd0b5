"""The generated data is pinned: tiny/42 must hash exactly as recorded, under the recorded data
version; and the data version follows the data, not the generator's source text."""

from __future__ import annotations

import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

import pytest_heron
from pytest_heron.database.checksum import outside_objects, table_checksums, total_line
from pytest_heron.generate import load_bundle

GOLDEN = Path(__file__).parent / "golden" / "tiny_42.tsv"
VERSIONS = Path(__file__).parent / "golden" / "versions.tsv"


def _versions() -> dict[str, tuple[str, str]]:
    out: dict[str, tuple[str, str]] = {}
    for line in VERSIONS.read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            version, _generator, rows, total = line.split("\t")
            assert version not in out, f"{VERSIONS}: data version {version} is listed twice"
            out[version] = (rows, total)
    return out


@pytest.fixture(scope="module")
def checksums(tiny_state: Any) -> list[tuple[str, int, str]]:
    schemas = [m.name for m in load_bundle().modules]
    return list(table_checksums(tiny_state.admin_dsn, schemas))


def test_tiny_42_matches_the_golden_checksums(checksums: list[tuple[str, int, str]]) -> None:
    got = [f"{n}\t{r}\t{h}" for n, r, h in [*checksums, total_line(checksums)]]
    want = GOLDEN.read_text().splitlines()
    changed = sorted(set(got) ^ set(want))
    assert got == want, (
        "the generated data changed (tables: "
        + ", ".join(sorted({line.split("\t")[0] for line in changed}))
        + "). If that is intended, bump GENERATOR_VERSION in src/pytest_heron/generate/spec.py, "
        "run `python scripts/update_golden.py`, commit tests/golden/ and add a DECISIONS.md "
        "entry saying what changed and why."
    )


def test_a_seeded_state_has_nothing_outside_its_tables(tiny_state: Any) -> None:
    """``heron checksum`` adds a line for every object a seeded state should not have; a state
    as heron seeds it has none, so its total is the pinned one (tests/test_cli.py adds some)."""
    schemas = [m.name for m in load_bundle().modules]
    assert outside_objects(tiny_state.admin_dsn, schemas) == []


def test_the_data_version_is_recorded_with_these_bytes(
    checksums: list[tuple[str, int, str]],
) -> None:
    version = load_bundle().data_version
    _, rows, total = total_line(checksums)
    known = _versions()
    assert version in known, (
        f"data version {version} is not in {VERSIONS.name}: the version changed without a "
        "golden update. Run `python scripts/update_golden.py` and commit tests/golden/."
    )
    assert known[version] == (str(rows), total), (
        f"data version {version} was recorded with other bytes: the data changed without a "
        "version bump (bump GENERATOR_VERSION in src/pytest_heron/generate/spec.py)"
    )


def _data_version_of(package_root: Path) -> str:
    code = (
        "import pytest_heron.generate as g\n"
        "print(g.__file__)\n"
        "print(g.load_bundle().data_version)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(package_root), "PATH": "/usr/bin:/bin"},
        cwd=package_root,
    )
    where, version = done.stdout.split()
    assert Path(where).is_relative_to(package_root), f"imported {where}, not the copy"
    return version


def test_a_formatting_only_change_in_generate_keeps_the_data_version(tmp_path: Path) -> None:
    src = Path(pytest_heron.__file__).parent
    data = Path(resources.files("heron_data"))  # type: ignore[arg-type]
    shutil.copytree(src, tmp_path / "pytest_heron", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(data, tmp_path / "heron_data", ignore=shutil.ignore_patterns("__pycache__"))
    before = _data_version_of(tmp_path)
    assert before == load_bundle().data_version
    for module in sorted((tmp_path / "pytest_heron" / "generate").glob("*.py")):
        text = module.read_text(encoding="utf-8")
        module.write_text("# a comment a refactor added\n\n" + text + "\n\n# the end\n")
    assert _data_version_of(tmp_path) == before
    # ... while a change to the data definition does change it
    scales = tmp_path / "heron_data" / "scales.yaml"
    scales.write_text(scales.read_text(encoding="utf-8") + "\n# changed\n", encoding="utf-8")
    assert _data_version_of(tmp_path) != before
