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
import os
import platform
import re
import subprocess
from pathlib import Path
from typing import Any

from pytest_heron.core.errors import ConfigError
from pytest_heron.core.safe_text import one_line
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


def find_run(folder: Path, spec: str | None, option: str = "--heron-compare") -> Path | None:
    """The saved run ``spec`` names: None or ``""`` the newest (None when there is none); a
    number (``3`` or ``0003``) or a name (the part after ``NNNN_``; the newest of that name);
    else a path to a results file. ConfigError (naming ``option``) when a given ``spec``
    matches nothing."""
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
    if given.is_file() or (os.path.lexists(given) and not given.is_dir()):
        return given.absolute()  # a FIFO, device or socket: the bounded reader refuses it
    listed = ", ".join(p.name for _n, _m, p in runs[-5:]) or "none yet"
    given_as = f"{option}={spec}" if option.startswith("--") else f"{option} {spec}"
    raise ConfigError(
        f"{given_as}: no saved run of that number or name in {folder} and no such "
        f"file (the newest: {listed}; `heron runs` lists them; save one with --heron-save)"
    )


def locate_run(folder: Path, spec: str, option: str) -> Path:
    """A results file at the path ``spec``, else the saved run ``spec`` numbers or names
    (:func:`find_run`); ConfigError naming ``option`` when it is neither."""
    given = Path(spec).expanduser()
    present = given.is_file() or (os.path.lexists(given) and not given.is_dir())
    found = given if present else find_run(folder, spec, option)
    if found is None:  # only an empty spec: the newest, and there is none
        raise ConfigError(f"{option}: no saved runs in {folder} (save one with --heron-save)")
    return found


def run_rows(folder: Path) -> list[dict[str, Any]]:
    """One row per saved run, oldest first, as ``heron runs`` lists them: number, name, when,
    commit, adapter, scale and seeds, multi-state EX, path; a file that cannot be read as a
    saved run keeps its number, name and path, with the reason in ``error``."""
    rows = []
    for number, name, path in saved_runs(folder):
        row: dict[str, Any] = {"number": number, "name": name, "path": str(path)}
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
            stamp = doc.get("saved") or {}
            conditions = doc["conditions"]
            commit = stamp.get("commit") or None
            row.update(
                saved_at=stamp.get("saved_at"),
                commit=None if commit is None else commit.get("id"),
                dirty=None if commit is None else commit.get("dirty"),
                adapter=conditions.get("adapter"),
                scale=conditions.get("scale"),
                seeds=conditions.get("seeds"),
                ex_multistate=doc["metrics"].get("ex_multistate"),
                questions=len(doc.get("questions") or ()),
            )
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            row["error"] = f"{type(exc).__name__}: {exc}"[:200]
        rows.append(row)
    return rows


def run_lines(rows: list[dict[str, Any]], folder: Path) -> list[str]:
    """``heron runs``'s table: a header and one aligned line per row of :func:`run_rows` (of
    ``folder``), or one line saying there is none yet."""
    if not rows:
        return [f"no saved runs in {folder} (save one with pytest --heron-save)"]
    header = ("#", "name", "saved", "commit", "adapter", "scale", "seeds", "EX", "file")
    table = [header]
    for row in rows:
        if "error" in row:
            cells = [f"{row['number']:04d}", row["name"], "", "", "", "", "", ""]
            table.append((*cells, f"{row['path']} (unreadable: {row['error']})"))
            continue
        commit = (row["commit"] or "")[:10] + ("+" if row["dirty"] else "")
        ex = row["ex_multistate"]
        table.append(
            (
                f"{row['number']:04d}",
                row["name"],
                str(row["saved_at"] or ""),
                commit or "-",
                str(row["adapter"] or ""),
                str(row["scale"] or ""),
                ",".join(str(s) for s in row["seeds"] or ()),
                "n/a" if ex is None else f"{ex:.1f}%",
                row["path"],
            )
        )
    widths = [max(len(one_line(cells[i])) for cells in table) for i in range(len(header))]
    return [
        "  ".join(one_line(c).ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()
        for cells in table
    ]


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
