"""The LLM response cache: SQLite in WAL mode, keyed by a hash of everything that shapes an
answer (see :func:`cache_key`). Shared by every process of a run; part of :mod:`pytest_heron.llm`,
which re-exports these names."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

KEY_FORMAT = 1


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no whitespace: equal data gives equal text.

    >>> canonical_json({"b": 1, "a": [1.0, "x"]})
    '{"a":[1.0,"x"],"b":1}'
    """
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def cache_key(
    *,
    adapter: str,
    adapter_version: str | None,
    model: str,
    params: Mapping[str, Any],
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] | None,
    data_version: str | None,
    question_id: str,
    sample: int,
) -> str:
    """SHA-256 (hex) of the canonical JSON of everything that shapes the answer."""
    doc = {
        "format": KEY_FORMAT,
        "adapter": adapter,
        "adapter_version": adapter_version,
        "model": model,
        "params": dict(params),
        "messages": list(messages),
        "tools": list(tools) if tools else None,
        "data_version": data_version,
        "question": question_id,
        "sample": int(sample),
    }
    return hashlib.sha256(canonical_json(doc).encode("utf-8")).hexdigest()


class ResponseCache:
    """Replies keyed by :func:`cache_key`, in SQLite (WAL mode, busy timeout): several xdist
    worker processes may read and write the same file at once. One short-lived connection per
    operation, so it is safe from any thread."""

    BUSY_TIMEOUT_S = 60.0

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # Switching to WAL can report "database is locked" at once, without waiting on the busy
        # handler, while another process is creating or recovering the same file: retry it.
        give_up = time.monotonic() + self.BUSY_TIMEOUT_S
        while True:
            conn = self._connect()
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute(
                    "CREATE TABLE IF NOT EXISTS replies ("
                    " key TEXT PRIMARY KEY,"
                    " reply TEXT NOT NULL,"
                    " model TEXT NOT NULL,"
                    " question TEXT NOT NULL,"
                    " created REAL NOT NULL)"
                )
                break
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > give_up:
                    raise
                time.sleep(0.05)
            finally:
                conn.close()

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=self.BUSY_TIMEOUT_S, isolation_level=None)
        conn.execute(f"PRAGMA busy_timeout = {int(self.BUSY_TIMEOUT_S * 1000)}")
        return conn

    def get(self, key: str) -> dict[str, Any] | None:
        conn = self._connect()
        try:
            row = conn.execute("SELECT reply FROM replies WHERE key = ?", (key,)).fetchone()
        finally:
            conn.close()
        if row is None:
            return None
        value = json.loads(row[0])
        return value if isinstance(value, dict) else None

    def put(self, key: str, reply: Mapping[str, Any], *, model: str, question: str) -> None:
        conn = self._connect()
        try:
            conn.execute(
                "INSERT OR REPLACE INTO replies (key, reply, model, question, created)"
                " VALUES (?, ?, ?, ?, ?)",
                (key, canonical_json(dict(reply)), model, question, time.time()),
            )
        finally:
            conn.close()

    def __len__(self) -> int:
        conn = self._connect()
        try:
            return int(conn.execute("SELECT count(*) FROM replies").fetchone()[0])
        finally:
            conn.close()


CACHE_FILE = "llm-cache.sqlite3"  # inside --heron-cache DIR


def default_cache_path(folder: Path | None = None) -> Path:
    """The cache file in ``folder`` (``--heron-cache``), by default the heron cache folder."""
    if folder is None:
        from pytest_heron.paths import cache_dir

        folder = cache_dir()
    return folder / CACHE_FILE
