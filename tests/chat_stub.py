"""The scripted OpenAI-compatible endpoint of the LLM tests: a thin import of
:mod:`pytest_heron.systems.llm.stub` (``heron stub-llm`` serves its deterministic responder).

It can also run as a separate process (``python tests/chat_stub.py PORT_FILE SCRIPT.json``) for
tests that need the endpoint to outlive or be killed independently of the pytest process.
"""

from __future__ import annotations

import json
import sys
import threading
from typing import Any

from pytest_heron.systems.llm.stub import (
    DEFAULT_MODELS,
    ChatStub,
    Raw,
    Reply,
    Responder,
    completion,
    rate_limited,
)

__all__ = [
    "DEFAULT_MODELS",
    "ChatStub",
    "Raw",
    "Reply",
    "Responder",
    "completion",
    "rate_limited",
]


def _main(argv: list[str]) -> None:
    """``python chat_stub.py PORT_FILE SCRIPT.json``: serve a script of completion bodies until
    killed, writing the chosen port to PORT_FILE and appending each request to PORT_FILE.log."""
    port_file, script_file = argv
    with open(script_file) as f:
        script = json.load(f)
    stub = ChatStub(script)
    log = open(port_file + ".log", "a")  # noqa: SIM115

    original = stub._responder

    def logged(body: dict[str, Any]) -> Reply:
        log.write(json.dumps(body) + "\n")
        log.flush()
        return original(body)

    stub._responder = logged
    stub.start()
    with open(port_file, "w") as f:
        f.write(str(stub.port))
    threading.Event().wait()


if __name__ == "__main__":
    _main(sys.argv[1:])
