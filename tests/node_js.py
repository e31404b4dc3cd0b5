"""Node.js for the JavaScript tests: find it, and one long-lived process answering requests.

The browser runner's JavaScript (src/pytest_heron/browser/assets/) is tested by Node's own test
runner (tests/js/*.test.mjs) and, against the Python code, through ``tests/js/server.mjs``: one
``node`` process per test module, one JSON line per request.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest

from pytest_heron.browser import vendor
from pytest_heron.core.paths import cache_dir
from wire import encode_rows

JS_DIR = Path(__file__).parent / "js"
NODE_HINT = (
    "the JavaScript tests need Node.js 20 or newer on PATH (`node --version`); on Debian or"
    " Ubuntu: `apt-get install nodejs`, elsewhere see https://nodejs.org (README: 'Developing')"
)


def node() -> str:
    """The ``node`` executable; fails the test (never skips) when it is missing or too old."""
    found = shutil.which("node")
    if found is None:
        pytest.fail(NODE_HINT)
    version = subprocess.run([found, "--version"], capture_output=True, text=True, check=True)
    major = int(version.stdout.strip().lstrip("v").split(".")[0])
    if major < 20:
        pytest.fail(f"node is {version.stdout.strip()}; {NODE_HINT}")
    return found


@functools.cache
def parser_dir() -> Path:
    """The guard's parser files as the runner vendors them (libpg-query.js and .wasm, from the
    verified npm tarball), in a cache folder marked CommonJS for Node's ``require``."""
    package = vendor.LIBPG_QUERY
    folder = cache_dir() / "browser" / f"{package.folder}-{package.version}-node"
    if not (folder / "package.json").exists():
        tgz = vendor.fetch(package, cache_dir() / "browser")
        scratch = Path(tempfile.mkdtemp(dir=folder.parent))
        vendor.unpack(package, tgz, scratch)
        (scratch / "package.json").write_text('{"type": "commonjs"}\n', encoding="utf-8")
        try:
            scratch.rename(folder)  # another worker may have been first: its copy is the same
        except OSError:
            shutil.rmtree(scratch)
    return folder


def node_env() -> dict[str, str]:
    """The environment of a node process that loads the guard (tests/js/parser.mjs)."""
    return {**os.environ, "HERON_LIBPG_QUERY": str(parser_dir())}


class JsServer:
    """One ``node tests/js/server.mjs`` process: comparisons and guard decisions, line by line
    (with ``parser``, the guard's parser is unpacked for it first)."""

    def __init__(self, *, parser: bool = False) -> None:
        self.proc = subprocess.Popen(
            [node(), str(JS_DIR / "server.mjs")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            env=node_env() if parser else None,
        )

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        answer: dict[str, Any] = json.loads(self.proc.stdout.readline())
        assert "error" not in answer, answer["error"]
        return answer

    def compare(self, gold: Any, pred: Any, order: Any, superset: bool) -> dict[str, Any]:
        request = {"gold": encode_rows(gold), "pred": encode_rows(pred), "order": order}
        request["superset"] = superset
        return self.ask(request)

    def guard(self, sql: str) -> dict[str, Any] | None:
        verdict: dict[str, Any] | None = self.ask({"guard": sql})["verdict"]
        return verdict

    def guard_rules(self) -> dict[str, Any]:
        return self.ask({"guard_rules": True})

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)
