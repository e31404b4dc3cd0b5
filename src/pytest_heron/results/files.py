"""Writing files so a reader never sees half of one."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from pytest_heron.core.errors import ConfigError


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that readers see the old file or the new one, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    os.chmod(tmp, 0o644)  # mkstemp makes the file private; results are meant to be shared
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def check_writable(path: Path, option: str, *, folder: bool = False) -> None:
    """Fail before the run, not after it, when ``path`` cannot be written: a directory where a
    file is meant (or the reverse), or a parent that cannot be created or written."""
    if folder and path.exists() and not path.is_dir():
        raise ConfigError(f"{option}: {path} is a file; it must be a folder (or not exist yet)")
    if not folder and path.is_dir():
        raise ConfigError(f"{option}: {path} is a folder; give a file name such as results.json")
    parent = path if folder else path.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=parent, prefix=".heron-write-check-"):
            pass
    except OSError as exc:
        raise ConfigError(
            f"{option}: cannot write in {parent} ({exc.strerror or type(exc).__name__})"
        ) from None
