"""Where pytest-heron keeps its files."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """Where pytest-heron keeps its embedded server data: ``$HERON_CACHE_DIR`` or the user cache."""
    env = os.environ.get("HERON_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("pytest-heron"))
