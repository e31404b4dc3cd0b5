"""Saved runs (``--heron-save``) and the run a session compares itself with
(``--heron-compare``): results files under ``.heron/runs/`` in the rootdir.

Each saved file is a results document (``heron compare`` reads it as any other) with one more
top-level key, ``saved``: the name, when, the machine (host name beside the conditions'
``machine``) and the git commit of the rootdir (id, branch, whether the tree had changes), or
null outside a git repository. Files are named ``NNNN_NAME.json``, numbered in the order they
were saved; without a name, ``NAME`` is ``<adapter>_<commit>``.
"""

from __future__ import annotations

import datetime as dt
import json
import platform
import re
import subprocess
from pathlib import Path
from typing import Any

from pytest_heron.core.errors import ConfigError
from pytest_heron.results.document import Results
from pytest_heron.results.files import write_atomic

RUNS = Path(".heron") / "runs"
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
FILE = re.compile(r"(\d{4,})_([A-Za-z0-9._-]+)\.json")
GIT_TIMEOUT_S = 10.0


def runs_folder(rootdir: Path) -> Path:
    return rootdir / RUNS


def check_name(name: str, option: str = "--heron-save") -> str:
    if not NAME.fullmatch(name):
        raise ConfigError(
            f"{option}={name!r}: a run name is 1-64 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    return name


def saved_runs(folder: Path) -> list[tuple[int, str, Path]]:
    """``(number, name, path)`` of every saved run, oldest first."""
    if not folder.is_dir():
        return []
    found = []
    for path in folder.iterdir():
        m = FILE.fullmatch(path.name)
        if m and path.is_file():
            found.append((int(m.group(1)), m.group(2), path))
    return sorted(found)


def find_run(folder: Path, spec: str | None) -> Path | None:
    """The saved run ``spec`` names: None or ``""`` the newest (None when there is none); a
    number (``3`` or ``0003``) or a name (the part after ``NNNN_``; the newest of that name);
    else a path to a results file. ConfigError when a given ``spec`` matches nothing."""
    runs = saved_runs(folder)
    if not spec:
        return runs[-1][2] if runs else None
    if spec.isdigit():
        for number, _name, path in runs:
            if number == int(spec):
                return path
    named = [path for _n, name, path in runs if name == spec]
    if named:
        return named[-1]
    given = Path(spec).expanduser()
    if given.is_file():
        return given.absolute()
    listed = ", ".join(p.name for _n, _m, p in runs[-5:]) or "none yet"
    raise ConfigError(
        f"--heron-compare={spec}: no saved run of that number or name in {folder} and no such "
        f"file (the newest: {listed}; save one with --heron-save)"
    )


def _git(rootdir: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", *args],
            cwd=rootdir,
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def commit_of(rootdir: Path) -> dict[str, Any] | None:
    """The rootdir's git commit: id, branch, and whether tracked files had changes."""
    commit = _git(rootdir, "rev-parse", "HEAD")
    if not commit:
        return None
    status = _git(rootdir, "status", "--porcelain", "--untracked-files=no")
    return {
        "id": commit,
        "branch": _git(rootdir, "rev-parse", "--abbrev-ref", "HEAD"),
        "dirty": bool(status),
    }


def save_run(rootdir: Path, results: Results, name: str | None) -> Path:
    """Write ``results`` as the next saved run under ``rootdir``; its path."""
    folder = runs_folder(rootdir)
    commit = commit_of(rootdir)
    if not name:
        adapter = re.sub(r"[^A-Za-z0-9._-]+", "-", results.conditions.adapter).strip("-.")
        name = f"{adapter or 'run'}_{commit['id'][:10] if commit else 'nocommit'}"
    runs = saved_runs(folder)
    number = runs[-1][0] + 1 if runs else 1
    path = folder / f"{number:04d}_{name}.json"
    doc = results.to_json()
    doc["saved"] = {
        "name": name,
        "number": number,
        "saved_at": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "host": platform.node(),
        "machine": results.conditions.machine,
        "commit": commit,
    }
    write_atomic(path, json.dumps(doc, indent=2) + "\n")
    return path
