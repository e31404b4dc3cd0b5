"""The run journal: every question's outcome, appended durably the moment it is known.

The journal sits beside the results file (``results.json`` -> ``results.json.jsonl``). Its first
line is a header with the run's configuration; each further line is one outcome, flushed and
fsync'ed, so an interrupted run loses at most the questions that were in flight.
``--heron-resume`` reads it back, refuses when the configuration differs, and runs only the
questions without a record.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_heron.core.errors import ConfigError, ErrorKind
from pytest_heron.core.outside import OutsideFileError, loads_json, read_text

FORMAT = 1


def journal_path(output: Path) -> Path:
    return output.with_name(output.name + ".jsonl")


def read_journal(path: Path) -> tuple[list[str], dict[str, Any]]:
    """The journal's lines and its header's configuration, checked: a journal that is missing,
    not UTF-8, or whose first line is not ``{"journal": 1, "config": {...}}`` is a ConfigError of
    one line. The run's pre-flight calls this, so a bad journal stops it before any work."""
    if not path.is_file():
        raise ConfigError(f"--heron-resume: there is no journal at {path} to resume")
    try:
        lines = read_text(path).splitlines()
        header = loads_json(lines[0], f"{path}, line 1") if lines else None
    except OutsideFileError as exc:
        raise ConfigError(f"--heron-resume: {exc}; not a pytest-heron journal") from None
    if not isinstance(header, dict) or header.get("journal") != FORMAT:
        raise ConfigError(f"--heron-resume: {path} is not a pytest-heron journal")
    config = header.get("config", {})
    if not isinstance(config, dict):
        raise ConfigError(
            f"--heron-resume: {path}: the header's 'config' is not an object; "
            "not a pytest-heron journal (run without --heron-resume to start over)"
        )
    return lines, config


class Journal:
    def __init__(self, path: Path, config: Mapping[str, Any], *, resume: bool) -> None:
        self.path = path
        self.config = dict(config)
        self.previous: dict[str, dict[str, Any]] = {}
        if resume:
            # Keep the final records only (a crashed question is run again), and rewrite the
            # file so a line cut short by the interruption does not swallow the next one.
            self.previous = {
                k: v
                for k, v in self._read().items()
                if v.get("error_kind") != ErrorKind.INFRA_CRASH
            }
            tmp = path.with_name(path.name + ".tmp")
            with tmp.open("w", encoding="utf-8") as f:
                f.write(json.dumps({"journal": FORMAT, "config": self.config}, sort_keys=True))
                f.write("\n")
                for record in self.previous.values():
                    f.write(json.dumps(record, sort_keys=True) + "\n")
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
            self._file = path.open("a", encoding="utf-8")
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._file = path.open("w", encoding="utf-8")
            self._write({"journal": FORMAT, "config": self.config})

    def _read(self) -> dict[str, dict[str, Any]]:
        lines, old = read_journal(self.path)
        diffs = [
            f"{k}: journal {old.get(k)!r}, now {self.config.get(k)!r}"
            for k in sorted(set(old) | set(self.config))
            if old.get(k) != self.config.get(k)
        ]
        if diffs:
            raise ConfigError(
                "--heron-resume: refusing, the configuration differs from the interrupted "
                "run's (" + "; ".join(diffs) + "). Run without --heron-resume to start over."
            )
        outcomes: dict[str, dict[str, Any]] = {}
        for line in lines[1:]:
            try:
                record = loads_json(line, f"{self.path}, a record")
            except OutsideFileError:
                continue  # a line cut short by the interruption (or garbage: asked again)
            if isinstance(record, dict) and "id" in record:
                outcomes[str(record["id"])] = record
        return outcomes

    def _write(self, record: Mapping[str, Any]) -> None:
        self._file.write(json.dumps(record, sort_keys=True) + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())

    def append(self, outcome: Mapping[str, Any]) -> None:
        self._write(outcome)

    def close(self) -> None:
        self._file.close()
