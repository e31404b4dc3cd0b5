"""The runner's data: PGlite, vendored and verified, and the tiny state as compressed COPY files.

Loaded into PGlite's Node build, the files must give exactly the per-table checksums that
``heron checksum --scale tiny --seed 42`` prints for the seeded PostgreSQL state.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import tarfile
from pathlib import Path
from typing import Any

import pytest

from node_js import JS_DIR, node
from pytest_heron import cli
from pytest_heron.browser import build_runner, data, vendor
from pytest_heron.core.errors import HeronError
from pytest_heron.core.paths import cache_dir
from pytest_heron.database.checksum import table_checksums, total_line
from pytest_heron.generate import load_bundle
from pytest_heron.systems import agent


@pytest.fixture(scope="module")
def pglite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """PGlite's files, unpacked from the verified tarball (``npm pack`` on first use)."""
    tgz = vendor.fetch_pglite(cache_dir() / "browser")
    out = tmp_path_factory.mktemp("pglite")
    with tarfile.open(tgz, "r:gz") as tar:
        tar.extractall(out, filter="data")
    return out / "package"


@pytest.fixture(scope="module")
def state_dir(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    out = tmp_path_factory.mktemp("state")
    return out, data.write_state(out, "tiny", 42)


def test_pglite_holds_byte_for_byte_the_seeded_state(
    tiny_state: Any, pglite: Path, state_dir: tuple[Path, dict[str, Any]]
) -> None:
    folder, manifest = state_dir
    done = subprocess.run(
        [node(), str(JS_DIR / "state_checksums.mjs"), str(folder), str(pglite / "dist/index.js")],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    in_browser = [line.split("\t") for line in done.stdout.splitlines()]
    schemas = [m.name for m in load_bundle().modules]
    seeded = list(table_checksums(tiny_state.admin_dsn, schemas))
    expected = [[n, str(r), s] for n, r, s in [*seeded, total_line(seeded)]]
    assert len(in_browser) == 212
    assert in_browser == expected
    assert manifest["rows"] == int(in_browser[-1][1])


def _tree(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def test_the_runner_build_is_deterministic(tmp_path: Path) -> None:
    """``heron runner`` twice: the same files with the same bytes (the state, PGlite, the page)."""
    first, second = tmp_path / "a", tmp_path / "b"
    assert cli.main(["runner", "--out", str(first)]) == 0
    build_runner(second)
    tree = _tree(first)
    assert tree == _tree(second)
    assert {"runner.html", "benchmark.json", "pglite/postgres.wasm", "state/state.json"} <= set(
        tree
    )
    assert [n for n in tree if n.startswith("libpg-query/")] == [
        "libpg-query/LICENSE",
        "libpg-query/libpg-query.js",
        "libpg-query/libpg-query.wasm",
    ]
    assert len([n for n in tree if n.startswith("state/data/")]) == 211
    bench = json.loads((first / "benchmark.json").read_text(encoding="utf-8"))
    assert bench["board_eligible"] is False
    assert bench["agent"]["tools"] == agent.TOOLS
    assert bench["agent"]["max_calls"] == agent.MAX_AGENT_CALLS == 20
    assert len(bench["questions"]) == 100


def test_a_tarball_that_is_not_the_pinned_one_is_refused(tmp_path: Path) -> None:
    fake = tmp_path / vendor.TARBALL
    fake.write_bytes(b"not pglite")
    with pytest.raises(HeronError, match="not the pinned"):
        vendor.fetch_pglite(tmp_path)
    assert not fake.exists()


def test_only_the_files_the_page_loads_are_vendored(pglite: Path, tmp_path: Path) -> None:
    names = vendor.vendor_pglite(vendor.fetch_pglite(cache_dir() / "browser"), tmp_path)
    assert {"index.js", "postgres.wasm", "postgres.data", "LICENSE"} <= set(names)
    assert all(
        n in {"index.js", "postgres.wasm", "postgres.data", "LICENSE"} or n.startswith("chunk-")
        for n in names
    )
    assert (tmp_path / "postgres.wasm").read_bytes() == (pglite / "dist/postgres.wasm").read_bytes()


def test_the_guard_s_parser_is_vendored_from_its_pinned_tarball(tmp_path: Path) -> None:
    """libpg-query: only its Emscripten module, the WebAssembly and the licence are copied."""
    package = vendor.LIBPG_QUERY
    tgz = vendor.fetch(package, cache_dir() / "browser")
    assert vendor.integrity(tgz) == package.integrity
    names = vendor.unpack(package, tgz, tmp_path)
    assert names == ["LICENSE", "libpg-query.js", "libpg-query.wasm"]
    assert (tmp_path / "libpg-query.wasm").read_bytes()[:4] == b"\0asm"
    assert "MIT License" in (tmp_path / "LICENSE").read_text(encoding="utf-8")
