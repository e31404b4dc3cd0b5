"""The Python an adapter's process runs on: heron's own, or the tool's (``--heron-adapter-python``).

A tool with dependencies that cannot live beside heron's (another SQLAlchemy, another pydantic)
keeps them in a virtual environment of its own; the harness starts the adapter's process with
that environment's interpreter. What the process needs of heron is the wire
(:mod:`pytest_heron.systems.child`) and the types adapters use (:mod:`pytest_heron.core.types`,
:mod:`pytest_heron.core.errors`, :mod:`pytest_heron.systems.registry`): standard library only.
They reach the tool's interpreter through ``PYTHONPATH`` as a folder holding nothing but a link
to heron's package, so none of heron's dependencies come with it. The load request then carries
the working directory only, not the harness's import path.
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pytest_heron.core.errors import ConfigError

PROBE = "import json, sys; print(json.dumps([sys.prefix, sys.base_prefix, sys.exec_prefix, sys.path, list(sys.version_info[:3])]))"  # noqa: E501
PROBE_TIMEOUT_S = 30.0
MIN_VERSION = (3, 11)


@dataclass(frozen=True)
class Interpreter:
    """``executable`` and what the sandbox must show of it (its prefixes and import path).
    ``own``: heron's interpreter (``sys.executable``)."""

    executable: str
    own: bool
    prefixes: tuple[str, ...]
    path: tuple[str, ...]
    version: tuple[int, ...]

    @classmethod
    def of(cls, python: Path | None) -> Interpreter:
        """heron's own interpreter, or ``python`` asked once what it is (a usage error, before
        any work, when it cannot be run or is older than 3.11)."""
        if python is None:
            prefixes = (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)
            version = tuple(int(v) for v in sys.version_info[:3])
            return cls(sys.executable, True, prefixes, tuple(sys.path), version)
        where = f"--heron-adapter-python {python}"
        try:
            done = subprocess.run(
                [str(python), "-I", "-c", PROBE],
                capture_output=True,
                text=True,
                timeout=PROBE_TIMEOUT_S,
                check=False,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            raise ConfigError(f"{where}: cannot be run ({exc})") from None
        try:
            prefix, base, exec_prefix, path, version = json.loads(done.stdout)
        except (ValueError, TypeError):
            tail = " ".join(done.stderr.split())[-300:]
            raise ConfigError(f"{where}: is not a Python that answers ({tail})") from None
        if tuple(version[:2]) < MIN_VERSION:
            shown = ".".join(str(v) for v in version)
            raise ConfigError(f"{where}: Python {shown}; the adapter's process needs 3.11+")
        return cls(
            str(python),
            False,
            (str(prefix), str(base), str(exec_prefix)),
            tuple(str(p) for p in path),
            tuple(int(v) for v in version),
        )

    def environment(self, environ: Mapping[str, str]) -> dict[str, str] | None:
        """The process's environment: None (inherited) for heron's own interpreter; for the
        tool's, ``environ`` with the wire folder first on ``PYTHONPATH``."""
        if self.own:
            return None
        env = dict(environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [wire_folder(), env.get("PYTHONPATH")]))
        return env

    def sys_path(self) -> list[str]:
        """What the load request puts on the process's import path: the harness's for heron's
        own interpreter (as before), only the working directory for the tool's."""
        if self.own:
            return [p for p in sys.path if p]
        return [os.getcwd()]


@functools.cache
def wire_folder() -> str:
    """A folder that holds only a link to heron's package (made once per process, removed at
    exit)."""
    import pytest_heron

    folder = tempfile.mkdtemp(prefix="heron-wire-")
    os.chmod(folder, 0o755)
    os.symlink(Path(pytest_heron.__file__).resolve().parent, os.path.join(folder, "pytest_heron"))
    atexit.register(shutil.rmtree, folder, True)
    return folder
