"""PGlite, vendored into the runner at build time from the npm registry (never from a CDN).

The package is fetched once with ``npm pack`` into the heron cache folder, checked against the
integrity hash pinned here (taken from ``npm view @electric-sql/pglite@0.2.17 dist.integrity``),
and the files the page needs are copied out of it.
"""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path
from typing import Final

from pytest_heron.core.errors import HeronError

PGLITE_PACKAGE: Final = "@electric-sql/pglite"
PGLITE_VERSION: Final = "0.2.17"
"""The newest PGlite of the 0.2 line, the one built on PostgreSQL 16."""
PGLITE_INTEGRITY: Final = (
    "sha512-"
    "qEpKRT2oUaWDH6tjRxLHjdzMqRUGYDnGZlKrnL4dJ77JVMcP2Hpo3NYnOSPKdZdeec57B6QPprCUFg0picx5Pw=="
)
TARBALL: Final = "electric-sql-pglite-0.2.17.tgz"


def _wanted(name: str) -> bool:
    """The files of the package the page loads: the ES modules, the WebAssembly, the licence."""
    if name == "package/LICENSE":
        return True
    if not name.startswith("package/dist/") or "/" in name[len("package/dist/") :]:
        return False
    base = name.rsplit("/", 1)[1]
    return base in {"postgres.wasm", "postgres.data", "index.js"} or (
        base.startswith("chunk-") and base.endswith(".js")
    )


def integrity(path: Path) -> str:
    """The npm integrity string (``sha512-`` and the base64 digest) of a file."""
    digest = hashlib.sha512(path.read_bytes()).digest()
    return "sha512-" + base64.b64encode(digest).decode()


def fetch_pglite(cache: Path) -> Path:
    """The verified PGlite tarball in ``cache`` (fetched with ``npm pack`` when missing)."""
    cache.mkdir(parents=True, exist_ok=True)
    tgz = cache / TARBALL
    if not tgz.exists():
        npm = shutil.which("npm")
        if npm is None:
            raise HeronError(
                f"building the runner needs npm to fetch {PGLITE_PACKAGE}@{PGLITE_VERSION}"
                f" (or put {TARBALL} into {cache}); install Node.js 20+ with npm"
            )
        # packed into a folder of this process's own, then moved: two builds at once (xdist
        # workers) never see each other's half-written tarball
        with tempfile.TemporaryDirectory(dir=cache) as scratch:
            spec = f"{PGLITE_PACKAGE}@{PGLITE_VERSION}"
            done = subprocess.run(
                [npm, "pack", spec, "--pack-destination", scratch],
                capture_output=True,
                text=True,
                timeout=600,
            )
            packed = Path(scratch) / TARBALL
            if done.returncode != 0 or not packed.exists():
                raise HeronError(f"npm pack {spec} failed: {done.stderr.strip()[-500:]}")
            os.replace(packed, tgz)
    found = integrity(tgz)
    if found != PGLITE_INTEGRITY:
        tgz.unlink()
        raise HeronError(
            f"{TARBALL} has integrity {found}, not the pinned {PGLITE_INTEGRITY}; it was removed"
        )
    return tgz


def vendor_pglite(tgz: Path, out: Path) -> list[str]:
    """Copy the page's PGlite files out of the tarball into ``out``; returns their names."""
    out.mkdir(parents=True, exist_ok=True)
    names = []
    with tarfile.open(tgz, "r:gz") as tar:
        for member in sorted(tar.getmembers(), key=lambda m: m.name):
            if not member.isfile() or not _wanted(member.name):
                continue
            source = tar.extractfile(member)
            assert source is not None
            base = member.name.rsplit("/", 1)[1]
            (out / base).write_bytes(source.read())
            names.append(base)
    return names
