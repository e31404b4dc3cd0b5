"""The ``heron`` command's verbs on results: ``heron compare`` and ``heron runs`` (argparse
stays in pytest_heron.cli; these take plain values, print, and return the exit status)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from pytest_heron.results.comparison import compare_runs
from pytest_heron.results.document import read_results
from pytest_heron.results.saved import locate_run, run_lines, run_rows, runs_folder


def compare_command(
    a: str, b: str, rootdir: Path, *, as_json: bool, strict: bool, max_drop: float | None
) -> int:
    """Two runs side by side, paired question by question (each a results file, or a saved
    run's number or name under ``rootdir``'s .heron/runs/). Exit status: 0, or 1 when B's
    multi-state EX is more than ``max_drop`` points below A's, or 2 when the runs' conditions
    differ and ``strict`` is given (or a file cannot be read: the caller's HeronError)."""
    folder = runs_folder(rootdir)
    paths = [locate_run(folder, spec, "heron compare") for spec in (a, b)]
    first, second = (read_results(path) for path in paths)
    comparison = compare_runs(first, second, str(paths[0]), str(paths[1]))
    out = [json.dumps(comparison.to_json(), indent=2)] if as_json else comparison.lines()
    print("\n".join(out))
    status, said = comparison.verdict(strict, max_drop)
    for line in said:
        print(line, file=sys.stderr)
    return status


def runs_command(rootdir: Path, *, as_json: bool) -> int:
    """The saved runs under ``rootdir``'s .heron/runs/, oldest first (as pytest-benchmark's
    ``list``): the numbers ``--heron-compare=N`` and ``heron compare N M`` take."""
    folder = runs_folder(rootdir)
    rows = run_rows(folder)
    print(json.dumps(rows, indent=2) if as_json else "\n".join(run_lines(rows, folder)))
    return 0
