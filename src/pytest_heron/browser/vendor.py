"""npm packages vendored into the runner at build time from the npm registry (never a CDN).

Each package is fetched once with ``npm pack`` into the heron cache folder, checked against the
integrity hash pinned here (taken from ``npm view <name>@<version> dist.integrity``), and only
the files the page loads are copied out of it, with the package's licence:

- PGlite 0.2.17 (PostgreSQL 16 in WebAssembly): the database, run in the page's worker;
- libpg-query 16.7.3 (libpg_query 16-5.2.0, PostgreSQL 16's own parser in WebAssembly): the
  statement guard's parser (assets/guard.js), the one pglast gives the Python guard. Only its
  Emscripten module (``wasm/libpg-query.js``, a classic script) and ``libpg-query.wasm`` are
  taken; the package's ES wrapper imports ``@pgsql/types``, which a browser cannot resolve.
"""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from pytest_heron.core.errors import HeronError


@dataclass(frozen=True)
class NpmPackage:
    name: str
    version: str
    integrity: str
    """The npm integrity string of the tarball (``sha512-`` and the base64 digest)."""
    tarball: str
    """The file name ``npm pack`` gives it."""
    folder: str
    """The runner folder its files are copied into."""
    wanted: Callable[[str], bool]
    """Whether a member of the tarball (``package/...``) is copied."""

    @property
    def spec(self) -> str:
        return f"{self.name}@{self.version}"


def _pglite_file(name: str) -> bool:
    """The ES modules, the WebAssembly and the data file of PGlite's dist/, and the licence."""
    if name == "package/LICENSE":
        return True
    if not name.startswith("package/dist/") or "/" in name[len("package/dist/") :]:
        return False
    base = name.rsplit("/", 1)[1]
    return base in {"postgres.wasm", "postgres.data", "index.js"} or (
        base.startswith("chunk-") and base.endswith(".js")
    )


def _libpg_query_file(name: str) -> bool:
    return name in {
        "package/LICENSE",
        "package/wasm/libpg-query.js",
        "package/wasm/libpg-query.wasm",
    }


PGLITE: Final = NpmPackage(
    name="@electric-sql/pglite",
    version="0.2.17",  # the newest PGlite of the 0.2 line, the one built on PostgreSQL 16
    integrity="sha512-"
    "qEpKRT2oUaWDH6tjRxLHjdzMqRUGYDnGZlKrnL4dJ77JVMcP2Hpo3NYnOSPKdZdeec57B6QPprCUFg0picx5Pw==",
    tarball="electric-sql-pglite-0.2.17.tgz",
    folder="pglite",
    wanted=_pglite_file,
)
LIBPG_QUERY: Final = NpmPackage(
    name="libpg-query",
    version="16.7.3",  # the newest of the PostgreSQL 16 line (its x-publish pgVersion is 16)
    integrity="sha512-"
    "GNn2O61I7KytLjGCC/YwCblqozlvl3grmf0ImUSz9oCe3z5lGvvvApyZr8NYQha/Qpep83mbl/Gfqge8iEE0eg==",
    tarball="libpg-query-16.7.3.tgz",
    folder="libpg-query",
    wanted=_libpg_query_file,
)
PACKAGES: Final = (PGLITE, LIBPG_QUERY)

PGLITE_PACKAGE: Final = PGLITE.name
PGLITE_VERSION: Final = PGLITE.version
PGLITE_INTEGRITY: Final = PGLITE.integrity
TARBALL: Final = PGLITE.tarball


def integrity(path: Path) -> str:
    """The npm integrity string (``sha512-`` and the base64 digest) of a file."""
    digest = hashlib.sha512(path.read_bytes()).digest()
    return "sha512-" + base64.b64encode(digest).decode()


def fetch(package: NpmPackage, cache: Path) -> Path:
    """The verified tarball of ``package`` in ``cache`` (fetched with ``npm pack`` when
    missing); a tarball that is not the pinned one is removed and refused."""
    cache.mkdir(parents=True, exist_ok=True)
    tgz = cache / package.tarball
    if not tgz.exists():
        npm = shutil.which("npm")
        if npm is None:
            raise HeronError(
                f"building the runner needs npm to fetch {package.spec}"
                f" (or put {package.tarball} into {cache}); install Node.js 20+ with npm"
            )
        # packed into a folder of this process's own, then moved: two builds at once (xdist
        # workers) never see each other's half-written tarball
        with tempfile.TemporaryDirectory(dir=cache) as scratch:
            done = subprocess.run(
                [npm, "pack", package.spec, "--pack-destination", scratch],
                capture_output=True,
                text=True,
                timeout=600,
            )
            packed = Path(scratch) / package.tarball
            if done.returncode != 0 or not packed.exists():
                raise HeronError(f"npm pack {package.spec} failed: {done.stderr.strip()[-500:]}")
            os.replace(packed, tgz)
    found = integrity(tgz)
    if found != package.integrity:
        tgz.unlink()
        raise HeronError(
            f"{package.tarball} has integrity {found}, not the pinned {package.integrity};"
            " it was removed"
        )
    return tgz


def unpack(package: NpmPackage, tgz: Path, out: Path) -> list[str]:
    """Copy the page's files of ``package`` out of its tarball into ``out`` (flat); returns
    their names."""
    out.mkdir(parents=True, exist_ok=True)
    names = []
    with tarfile.open(tgz, "r:gz") as tar:
        for member in sorted(tar.getmembers(), key=lambda m: m.name):
            if not member.isfile() or not package.wanted(member.name):
                continue
            source = tar.extractfile(member)
            assert source is not None
            base = member.name.rsplit("/", 1)[1]
            (out / base).write_bytes(source.read())
            names.append(base)
    return names


def fetch_pglite(cache: Path) -> Path:
    """The verified PGlite tarball in ``cache`` (see :func:`fetch`)."""
    return fetch(PGLITE, cache)


def vendor_pglite(tgz: Path, out: Path) -> list[str]:
    """Copy the page's PGlite files out of the tarball into ``out``; returns their names."""
    return unpack(PGLITE, tgz, out)
