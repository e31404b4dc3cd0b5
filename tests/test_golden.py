"""The generated data is pinned: tiny/42 must hash exactly as recorded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pytest_heron.database.checksum import table_checksums, total_line
from pytest_heron.generate import load_bundle

GOLDEN = Path(__file__).parent / "golden" / "tiny_42.tsv"


def test_tiny_42_matches_the_golden_checksums(tiny_state: Any) -> None:
    schemas = [m.name for m in load_bundle().modules]
    lines = list(table_checksums(tiny_state.admin_dsn, schemas))
    got = [f"{n}\t{r}\t{h}" for n, r, h in [*lines, total_line(lines)]]
    want = GOLDEN.read_text().splitlines()
    changed = sorted(set(got) ^ set(want))
    assert got == want, (
        "the generated data changed (tables: "
        + ", ".join(sorted({line.split("\t")[0] for line in changed}))
        + "). If that is intended, run `python scripts/update_golden.py`, commit the new "
        "tests/golden/tiny_42.tsv and add a DECISIONS.md entry saying what changed and why."
    )
