"""What ``heron site`` reads: results files (runs) and a board folder, all checked.

Both come from elsewhere, so every field used is read through
:class:`~pytest_heron.core.records.RecordReader` (results files through
:meth:`~pytest_heron.results.document.Results.from_json`) and a bad one is one
:class:`~pytest_heron.core.errors.ResultsFileError` naming the file and the field. The board's
per-question verdicts are read from the ``verdict.json`` its rows point at, only when that file
lies inside the folder that holds the board (a row cannot make the site read anything else).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_heron.core.errors import ResultsFileError
from pytest_heron.core.outside import read_json
from pytest_heron.core.records import RecordReader
from pytest_heron.results import Results, read_results

BOARD_FILE = "leaderboard.json"
_SLUG = re.compile(r"[^a-z0-9_.-]+")


@dataclass(frozen=True)
class Run:
    """One results file on the site: ``slug`` names its page (``runs/<slug>.html``)."""

    slug: str
    source: str
    results: Results

    @property
    def label(self) -> str:
        c = self.results.conditions
        model = f" · {c.model}" if c.model else ""
        return f"{self.slug} ({c.adapter}{model})"


@dataclass(frozen=True)
class BoardRow:
    name: str
    tool: str
    tool_version: str | None
    approach: str | None
    reference: bool
    rank: int | None
    grade: float | None
    ex_multistate: float | None
    ci95: tuple[float, float] | None
    ex1: float | None
    ex_hidden_seed: float | None
    ves: float | None
    soft_f1: float | None
    set_recall: float | None
    tokens_per_q: float | None
    cost_usd: float | None
    errors: int | None
    mcnemar_p: float | None
    correct: dict[str, bool] | None  # per question, multi-state; None: its verdict was not found
    tier: str | None = None  # how the row was checked (board/tiers.py); None: a board before it


@dataclass(frozen=True)
class Rejected:
    name: str
    tool: str | None
    reasons: tuple[str, ...]
    claimed: dict[str, float | None]
    reproduced: dict[str, float | None]


@dataclass(frozen=True)
class Board:
    source: str
    rows: tuple[BoardRow, ...]
    rejected: tuple[Rejected, ...]
    unverified: tuple[tuple[str, str], ...]


def _pair(r: RecordReader, name: str) -> tuple[float, float] | None:
    value = r.data.get(name)
    if value is None:
        return None
    if not (
        isinstance(value, list)
        and len(value) == 2
        and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)
    ):
        raise r.bad(name, "a pair of numbers or null")
    return float(value[0]), float(value[1])


def _figures(r: RecordReader, name: str) -> dict[str, float | None]:
    value = r.data.get(name) or {}
    inner = RecordReader(value, f"{r.where}, field {name!r}")
    return {str(k): inner.opt_number(str(k)) for k in sorted(inner.data)}


def _verdict_correct(board_dir: Path, pointer: str | None, where: str) -> dict[str, bool] | None:
    if not pointer:
        return None
    relative = pointer.partition("#")[0]
    root = board_dir.resolve().parent
    path = (root / relative).resolve()
    if not path.is_relative_to(root) or path.suffix != ".json":
        raise ResultsFileError(
            f"{where}, field 'breakdown': {pointer!r} points outside {root}; expected a "
            "verdict.json beside the board"
        )
    if not path.is_file():
        return None
    data = read_json(path)
    return RecordReader(data, str(path)).verdicts("correct")


def read_board(folder: Path) -> Board:
    """The board in ``folder`` (its ``leaderboard.json``), checked."""
    path = folder / BOARD_FILE
    data = read_json(path)
    top = RecordReader(data, str(path))
    rows_raw, rejected_raw = top.data.get("rows"), top.data.get("rejected") or []
    unverified_raw = top.data.get("unverified") or []
    for name, value in (("rows", rows_raw), ("rejected", rejected_raw)):
        if not isinstance(value, list):
            raise top.bad(name, "a list")
    if not isinstance(unverified_raw, list):
        raise top.bad("unverified", "a list")
    assert isinstance(rows_raw, list) and isinstance(rejected_raw, list)
    rows = []
    for i, raw in enumerate(rows_raw):
        r = RecordReader(raw, f"{path}, rows[{i}]")
        errors = r.data.get("errors")
        rank = r.data.get("rank")
        rows.append(
            BoardRow(
                name=r.text("name"),
                tool=r.opt_text("tool") or r.text("name"),
                tool_version=r.opt_text("tool_version"),
                approach=r.opt_text("approach"),
                reference=r.flag("reference", default=False),
                rank=None if rank is None else r.integer("rank", low=1),
                grade=r.opt_number("grade"),
                ex_multistate=r.opt_number("ex_multistate"),
                ci95=_pair(r, "ex_multistate_ci95"),
                ex1=r.opt_number("ex1"),
                ex_hidden_seed=r.opt_number("ex_hidden_seed"),
                ves=r.opt_number("ves"),
                soft_f1=r.opt_number("soft_f1"),
                set_recall=r.opt_number("set_recall"),
                tokens_per_q=r.opt_number("tokens_per_q"),
                cost_usd=r.opt_number("cost_usd"),
                errors=None if errors is None else r.integer("errors"),
                mcnemar_p=r.opt_number("mcnemar_p"),
                correct=_verdict_correct(folder, r.opt_text("breakdown"), r.where),
                tier=r.opt_text("tier"),
            )
        )
    rejected = []
    for i, raw in enumerate(rejected_raw):
        r = RecordReader(raw, f"{path}, rejected[{i}]")
        rejected.append(
            Rejected(
                name=r.text("name"),
                tool=r.opt_text("tool"),
                reasons=r.texts("reasons"),
                claimed=_figures(r, "claimed"),
                reproduced=_figures(r, "reproduced"),
            )
        )
    unverified = []
    for i, raw in enumerate(unverified_raw):
        r = RecordReader(raw, f"{path}, unverified[{i}]")
        unverified.append((r.text("name"), r.text("why", default="")))
    return Board(published_name(path), tuple(rows), tuple(rejected), tuple(unverified))


def run_files(paths: Sequence[Path]) -> list[Path]:
    """The results files named by ``--runs``: a file as given; a folder's ``*.json`` files and
    its report folders' ``results.json``, in name order."""
    found: list[Path] = []
    for p in paths:
        if p.is_dir():
            inside = sorted(
                [q for q in p.glob("*.json") if q.is_file()]
                + [q for q in p.glob("*/results.json") if q.is_file()]
            )
            if not inside:
                raise ResultsFileError(f"{p}: no results file (*.json) in this folder")
            found += inside
        elif p.is_file():
            found.append(p)
        else:
            raise ResultsFileError(f"{p}: no such results file or folder")
    return found


def slug_for(path: Path, taken: set[str]) -> str:
    """A page name for a results file: its stem (its folder's name for ``results.json``),
    lower-cased to ``[a-z0-9_.-]``, made unique with ``-2``, ``-3``, ...

    >>> slug_for(Path("runs/Gold Run.json"), set()), slug_for(Path("a/results.json"), {"a"})
    ('gold-run', 'a-2')
    """
    stem = path.parent.name if path.name == "results.json" and path.parent.name else path.stem
    base = _SLUG.sub("-", stem.lower()).strip("-.") or "run"
    slug, i = base, 2
    while slug in taken:
        slug, i = f"{base}-{i}", i + 1
    taken.add(slug)
    return slug


def published_name(path: Path) -> str:
    """How a published page names an input file: its folder's name and its own
    (``board/leaderboard.json``), never the machine's absolute path.

    >>> published_name(Path("/home/me/clone/board/leaderboard.json"))
    'board/leaderboard.json'
    """
    return f"{path.parent.name}/{path.name}" if path.parent.name else path.name


def read_runs(paths: Sequence[Path]) -> list[Run]:
    """Every results file named by ``--runs``, checked (the first bad one is the error)."""
    taken: set[str] = set()
    runs = []
    for path in run_files(paths):
        runs.append(Run(slug_for(path, taken), published_name(path), read_results(path)))
    return runs


def as_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)
