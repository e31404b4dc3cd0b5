"""Rewrite the index at the top of ``DECISIONS.md`` from its own headings: one row per decision
(date, title, status), so a newcomer finds the decision behind a file in a minute.

A decision's status is ``amended`` when its text says it was amended (``Amended``), else ``in
force``. ``tests/test_decisions_index.py`` checks that the index on the page is what this
script writes. Run: ``python scripts/decisions_index.py``.
"""

from __future__ import annotations

import re
from pathlib import Path

PAGE = Path(__file__).resolve().parents[1] / "DECISIONS.md"
START = "<!-- index: written by scripts/decisions_index.py -->"
END = "<!-- end of the index -->"
HEADING = re.compile(r"^## (\d{4}-\d{2}-\d{2})(?: \(([^)]*)\))?\s*(?:—|:|-)?\s*(.*)$")


def decisions(text: str) -> list[tuple[str, str, str]]:
    """(date, title, status) of every ``## `` heading, in the page's order."""
    body = text.split(END, 1)[-1]
    out: list[tuple[str, str, str]] = []
    sections = re.split(r"^(?=## )", body, flags=re.M)
    for section in sections:
        first, _, rest = section.partition("\n")
        match = HEADING.match(first)
        if match is None:
            continue
        date, when, title = match.groups()
        date = f"{date} ({when})" if when else date
        status = "amended" if re.search(r"\bAmended\b", rest) else "in force"
        out.append((date, title.strip(), status))
    return out


def index(text: str) -> str:
    rows = [f"| {d} | {t.replace('|', '/')} | {s} |" for d, t, s in decisions(text)]
    return "\n".join([START, "", "| date | decision | status |", "|---|---|---|", *rows, "", END])


def rewritten(text: str) -> str:
    """The page with its index made anew (placed after the opening paragraph the first time)."""
    block = index(text)
    if START in text:
        before, rest = text.split(START, 1)
        return before + block + rest.split(END, 1)[1]
    head, sep, rest = text.partition("\n## ")
    return head.rstrip("\n") + "\n\n" + block + "\n" + sep + rest


if __name__ == "__main__":
    PAGE.write_text(rewritten(PAGE.read_text(encoding="utf-8")), encoding="utf-8")
    print(f"wrote the index of {PAGE}")
