"""The LLM response cache: SQLite in WAL mode, keyed by a hash of everything that shapes an
answer (see :func:`cache_key`). Shared by every process of a run; part of :mod:`pytest_heron.llm`,
which re-exports these names.

A reply is stored under two keys: the request's :func:`cache_key` and the endpoint that
answered it (its base URL, see :func:`endpoint_id`), so a run against another server never
replays the first server's answers. Offline replay without ``--heron-endpoint`` takes the
newest reply recorded for the request from any endpoint. Files written before the endpoint was
part of the key (their ``replies`` table, key format 1) are left as they are and not read:
their endpoint is unknown (see DECISIONS.md)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import sqlite3
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

KEY_FORMAT = 2  # 2: effective request parameters (max_tokens, tool_choice) in the key


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no whitespace: equal data gives equal text.

    >>> canonical_json({"b": 1, "a": [1.0, "x"]})
    '{"a":[1.0,"x"],"b":1}'
    """
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def endpoint_id(url: str | None) -> str:
    """The endpoint as the cache and the conditions name it: scheme, host, port and path, with
    no credentials, query or trailing slash; ``""`` for none.

    >>> endpoint_id("http://user:secret@127.0.0.1:8080/v1/?key=x")
    'http://127.0.0.1:8080/v1'
    >>> endpoint_id(None)
    ''
    """
    if not url:
        return ""
    from urllib.parse import urlsplit

    parts = urlsplit(url.strip())
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 literal
        host = f"[{host}]"
    port = f":{parts.port}" if parts.port else ""
    scheme = f"{parts.scheme}://" if parts.scheme else ""
    return f"{scheme}{host}{port}{parts.path.rstrip('/')}"


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
    """SHA-256 (hex) of the canonical JSON of everything in the request that shapes the answer
    (the endpoint is the cache's second key: :meth:`ResponseCache.get`)."""
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
    """Replies keyed by :func:`cache_key` and the endpoint, in SQLite (WAL mode, busy timeout):
    several xdist worker processes may read and write the same file at once. One short-lived
    connection per operation, so it is safe from any thread."""

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
                    "CREATE TABLE IF NOT EXISTS responses ("
                    " key TEXT NOT NULL,"
                    " endpoint TEXT NOT NULL,"
                    " reply TEXT NOT NULL,"
                    " model TEXT NOT NULL,"
                    " question TEXT NOT NULL,"
                    " created REAL NOT NULL,"
                    " PRIMARY KEY (key, endpoint))"
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

    def get(self, key: str, endpoint: str | None = None) -> dict[str, Any] | None:
        """The reply recorded for ``key`` from ``endpoint`` (an :func:`endpoint_id`); with
        ``endpoint`` None, the newest one from any endpoint (offline replay)."""
        conn = self._connect()
        try:
            if endpoint is None:
                row = conn.execute(
                    "SELECT reply FROM responses WHERE key = ? ORDER BY created DESC, endpoint"
                    " LIMIT 1",
                    (key,),
                ).fetchone()
            else:
                row = conn.execute(
                    "SELECT reply FROM responses WHERE key = ? AND endpoint = ?",
                    (key, endpoint),
                ).fetchone()
        finally:
            conn.close()
        if row is None:
            return None
        value = json.loads(row[0])
        return value if isinstance(value, dict) else None

    def put(
        self,
        key: str,
        reply: Mapping[str, Any],
        *,
        model: str,
        question: str,
        endpoint: str = "",
    ) -> None:
        conn = self._connect()
        try:
            conn.execute(
                "INSERT OR REPLACE INTO responses"
                " (key, endpoint, reply, model, question, created) VALUES (?, ?, ?, ?, ?, ?)",
                (key, endpoint, canonical_json(dict(reply)), model, question, time.time()),
            )
        finally:
            conn.close()

    def __len__(self) -> int:
        conn = self._connect()
        try:
            return int(conn.execute("SELECT count(*) FROM responses").fetchone()[0])
        finally:
            conn.close()


CACHE_FILE = "llm-cache.sqlite3"  # inside --heron-cache DIR
DEFAULT_FOLDER = "llm"  # the default --heron-cache: this folder in the heron cache folder


def default_cache_path(folder: Path | None = None) -> Path:
    """The cache file in ``folder`` (``--heron-cache``), by default in the folder ``llm`` of the
    heron cache folder. It is a folder of its own because a jailed adapter shares it (see
    :mod:`pytest_heron.systems.jail`), never the folder of the server and its secret; a cache
    left in the heron cache folder itself by an earlier heron is moved there."""
    if folder is not None:
        return folder / CACHE_FILE
    from pytest_heron.core.paths import cache_dir

    old = cache_dir() / CACHE_FILE
    new = cache_dir() / DEFAULT_FOLDER / CACHE_FILE
    if old.is_file() and not new.exists():
        new.parent.mkdir(parents=True, exist_ok=True)
        for suffix in ("-wal", "-shm", ""):  # the database last: no window without its log
            with contextlib.suppress(FileNotFoundError):
                old.with_name(CACHE_FILE + suffix).rename(new.with_name(CACHE_FILE + suffix))
    return new
