"""``heron convert bird|spider``: the field's prediction files as heron's predictions format
(JSON lines of ``{"id": ..., "sql": ...}``, what ``--heron-adapter=file`` reads).

A tool built for BIRD or Spider writes its predictions keyed by the position of each question
in the list it was given, not by an id. Given heron's questions in heron's order (the question
set sorted by id, ``q001`` first), position ``i`` is the ``i``-th question of that list:

- **BIRD** (``predict_dev.json``): one JSON object, ``{"0": "SQL\\t----- bird -----\\tdb_id",
  ...}``; a key is a position from 0 (or a heron id itself), the ``----- bird -----`` tail is
  dropped. Positions left out are questions without a prediction.
- **Spider** (``pred.txt``): one SQL per line, line ``i`` (from 1) for question ``i``; a
  trailing ``<TAB>db_id`` (Spider's gold-file layout) is dropped. It has a line for every
  question: another number of lines is refused.

Both files come from elsewhere and are read with bounds; every problem is listed (the first ten)
before anything is written. Pure functions; the command does the reading and writing.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pytest_heron.core.errors import ConfigError
from pytest_heron.core.outside import Limits, read_json, read_text
from pytest_heron.core.safe_text import printable

FORMATS = ("bird", "spider")
BIRD_TAIL = "\t----- bird -----\t"
SPIDER_DB = re.compile(r"\t[A-Za-z_][A-Za-z0-9_]*\s*$")  # "SQL<TAB>db_id": the db_id dropped
MAX_PROBLEMS = 10
LIMITS = Limits(max_bytes=64 * 1024 * 1024, max_depth=4, max_items=100_000)


def _refuse(where: str, problems: list[str]) -> ConfigError:
    more = len(problems) - MAX_PROBLEMS
    listed = "; ".join(problems[:MAX_PROBLEMS]) + (f"; and {more} more" if more > 0 else "")
    return ConfigError(f"{where}: {len(problems)} problem(s): {listed}")


def from_bird(data: Any, ids: Sequence[str], where: str) -> list[dict[str, str]]:
    """BIRD's predictions object as heron's predictions (in ``ids`` order); ConfigError
    listing every key or value that is wrong.

    >>> bird = {"1": "SELECT 2\\t----- bird -----\\theron", "q001": "SELECT 1"}
    >>> from_bird(bird, ["q001", "q002"], "p")
    [{'id': 'q001', 'sql': 'SELECT 1'}, {'id': 'q002', 'sql': 'SELECT 2'}]
    """
    if not isinstance(data, dict):
        raise ConfigError(f'{where}: expected one JSON object {{"0": "SQL", ...}} (BIRD\'s)')
    known = set(ids)
    found: dict[str, str] = {}
    problems: list[str] = []
    for key, value in data.items():
        shown = repr(printable(str(key)[:40]))
        if key.isdigit() and key.isascii():
            if int(key) >= len(ids):
                problems.append(f"key {shown}: position past the last question ({len(ids) - 1})")
                continue
            qid = ids[int(key)]
        elif key in known:
            qid = key
        else:
            problems.append(f"key {shown}: neither a position (0-{len(ids) - 1}) nor a question id")
            continue
        if not isinstance(value, str):
            problems.append(f"key {shown}: the prediction must be a string")
            continue
        if qid in found:
            problems.append(f"key {shown}: {qid} is predicted twice")
            continue
        found[qid] = value.split(BIRD_TAIL, 1)[0].strip()
    if problems:
        raise _refuse(where, problems)
    return [{"id": q, "sql": found[q]} for q in ids if q in found]


def from_spider(text: str, ids: Sequence[str], where: str) -> list[dict[str, str]]:
    """Spider's predictions, one SQL per line, as heron's predictions; ConfigError when the
    file does not have one line per question.

    >>> from_spider("SELECT 1\\nSELECT 2\\tconcert_singer\\n", ["q001", "q002"], "p")
    [{'id': 'q001', 'sql': 'SELECT 1'}, {'id': 'q002', 'sql': 'SELECT 2'}]
    """
    lines = text.splitlines()
    if len(lines) != len(ids):
        raise ConfigError(
            f"{where}: {len(lines)} line(s), but the question set has {len(ids)} questions: "
            "Spider's format is one SQL per line, line i for the i-th question (by id)"
        )
    return [
        {"id": qid, "sql": SPIDER_DB.sub("", line).strip()}
        for qid, line in zip(ids, lines, strict=True)
    ]


def convert_command(fmt: str, path: Path, out: Path | None, ids: Sequence[str]) -> int:
    """Read ``path`` (``fmt``: bird or spider) against the question ids in heron's order and
    write heron's predictions to ``out`` (stdout when None); a line on stderr says how many."""
    where = f"heron convert {fmt} {path}"
    if fmt == "bird":
        lines = from_bird(read_json(path, where, LIMITS), ids, where)
    else:
        lines = from_spider(read_text(path, where, LIMITS), ids, where)
    text = "".join(json.dumps(line) + "\n" for line in lines)
    if out is None:
        sys.stdout.write(text)
    else:
        out.write_text(text, encoding="utf-8")
    first = f"; position 0 is {ids[0]}" if ids else ""
    print(
        f"heron convert: {len(lines)} of {len(ids)} questions predicted{first} (questions in "
        f"id order){'' if out is None else f'; written to {out}'}",
        file=sys.stderr,
    )
    return 0
