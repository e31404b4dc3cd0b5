"""What a run checks about its system under test before the first question.

A misconfiguration found here stops the run with one :class:`~pytest_heron.core.errors.ConfigError`
(a pytest usage error, exit status 4) that names what is wrong and what to do, instead of
failing every question the same way and writing a 0 % results file. Checked, in this order:

1. the adapter's extra is installed (:data:`NEEDS` lists what the built-in adapters import; a
   third-party adapter may list its lazily imported modules in a ``requires`` attribute);
2. the options it cannot run without are given (an LLM adapter needs ``--heron-model``, and
   ``--heron-endpoint`` unless ``--heron-offline``; a third-party adapter that asks a model
   says so with ``needs_llm = True``);
3. the endpoint answers and knows the model: ``GET {endpoint}/models`` on an OpenAI-compatible
   server. A refused connection, a rejected key or a model the list does not hold is an error;
   a server without ``/models`` (or whose list cannot be read) is only noted, and the model is
   not checked.

The adapter being found and importable is checked when the run opens it
(:func:`~pytest_heron.systems.answerers.open_system`); output paths and gold queries are
checked by :class:`~pytest_heron.run.controller.HeronRun`.
"""

from __future__ import annotations

import importlib.util
import json
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_heron.core.errors import ConfigError

STUB_HOSTS = ("127.0.0.1", "localhost")  # where `heron stub-llm` listens by default (port 8089)
PROBE_TIMEOUT_S = 10.0  # GET /models: a server that does not answer this fast is not there
MAX_MODELS_SHOWN = 8  # of the names a server lists, in an error
SKIP_STATUSES = frozenset({404, 405, 501})  # the server has no /models


@dataclass(frozen=True)
class Needs:
    """What a built-in adapter needs before it can answer anything."""

    extra: str | None  # the pytest-heron extra that installs ``modules``
    modules: tuple[str, ...] = ()  # top-level modules it imports
    llm: bool = False  # it asks a model: --heron-model, and an endpoint unless offline


_LLM = Needs("llm", ("openai",), llm=True)
NEEDS: dict[str, Needs] = {
    "raw-llm": _LLM,
    "agent": _LLM,
    "din-sql": _LLM,
    "mac-sql": _LLM,
    "vanna": Needs("vanna", ("vanna", "openai"), llm=True),
    "langchain": Needs(
        "langchain",
        ("langchain_classic", "langchain_community", "langchain_core", "langchain_openai"),
        llm=True,
    ),
    "promptquery": Needs("promptquery", ("promptquery", "openai"), llm=True),
}


def install_hint(extra: str) -> str:
    """How to install an extra: the package's name first (it works from any project, a vendor's
    included, where ``'.[extra]'`` would install the vendor's own package), a clone second."""
    return (
        f"pip install 'pytest-heron[{extra}]' (in a clone of pytest-heron itself: "
        f"pip install -e '.[{extra}]')"
    )


def missing_modules(modules: Sequence[str]) -> list[str]:
    """Those of ``modules`` that cannot be imported here (looked up, never imported)."""
    missing = []
    for name in modules:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            missing.append(name)
    return missing


def check_extras(adapter: str) -> None:
    """The modules of ``adapter``'s extra are importable (without importing them)."""
    needs = NEEDS.get(adapter)
    if needs is None or needs.extra is None:
        return
    missing = missing_modules(needs.modules)
    if missing:
        raise ConfigError(
            f"the {adapter} adapter needs the {needs.extra!r} extra (missing: "
            f"{', '.join(missing)}); install it with {install_hint(needs.extra)}"
        )


def check_declared(adapter: str, declared: Mapping[str, Any]) -> None:
    """The modules a third-party adapter declares in ``requires`` are importable (see
    :func:`pytest_heron.systems.child.declared_needs`)."""
    missing = declared.get("missing") or []
    if missing:
        raise ConfigError(
            f"the adapter {adapter!r} needs modules that are not installed: "
            f"{', '.join(map(str, missing))}; install what its documentation names (usually "
            "its package with an extra), in the Python that runs pytest"
        )


def asks_a_model(adapter: str, declared: Mapping[str, Any] | None = None) -> bool:
    """Whether ``adapter`` asks a model: a built-in LLM adapter, or one declaring
    ``needs_llm = True``."""
    needs = NEEDS.get(adapter)
    return (needs is not None and needs.llm) or bool(declared and declared.get("llm") is True)


def check_options(
    adapter: str,
    *,
    model: str | None,
    endpoint: str | None,
    offline: bool,
    declared: Mapping[str, Any] | None = None,
) -> None:
    """The options an LLM adapter cannot run without."""
    if not asks_a_model(adapter, declared):
        return
    if not model:
        raise ConfigError(
            f"--heron-adapter={adapter} needs --heron-model (the model to ask, e.g. "
            "--heron-model=gpt-4o-mini; see the provider table in docs/adapters.md, or heron-stub "
            "with heron stub-llm)"
        )
    if not endpoint and not offline:
        raise ConfigError(
            f"--heron-adapter={adapter} needs --heron-endpoint (an OpenAI-compatible base URL "
            "such as https://api.openai.com/v1 or http://localhost:11434/v1), or --heron-offline "
            "to replay from the cache"
        )


Fetch = Callable[[str, dict[str, str]], tuple[int, bytes]]


def http_get(url: str, headers: dict[str, str]) -> tuple[int, bytes]:
    """GET ``url``: its status and body (an HTTP error status is returned, not raised); a
    connection that fails raises OSError."""
    request = urllib.request.Request(url, headers=headers, method="GET")
    try:
        with urllib.request.urlopen(request, timeout=PROBE_TIMEOUT_S) as reply:
            return int(reply.status), bytes(reply.read(1 << 22))
    except urllib.error.HTTPError as exc:
        return int(exc.code), b""


def _model_ids(body: bytes) -> tuple[list[str], bool] | None:
    """The ids listed by an OpenAI-style ``/models`` body, and whether the server is
    llama.cpp's (which answers with its loaded model whatever the name); None if unreadable."""
    try:
        data: Any = json.loads(body)
    except (ValueError, RecursionError):
        return None
    items = data.get("data") if isinstance(data, dict) else None
    if not isinstance(items, list):
        return None
    ids = [str(m["id"]) for m in items if isinstance(m, dict) and "id" in m]
    llamacpp = any(isinstance(m, dict) and m.get("owned_by") == "llamacpp" for m in items)
    return ids, llamacpp


def check_endpoint(endpoint: str, model: str, key: str, *, fetch: Fetch = http_get) -> str | None:
    """Raise ConfigError when ``endpoint`` cannot be reached, refuses the key or does not list
    ``model``; return a line to show when the model could not be checked (else None)."""
    url = endpoint.rstrip("/") + "/models"
    what = f"--heron-endpoint {endpoint}"
    try:
        status, body = fetch(url, {"Authorization": f"Bearer {key}", "Accept": "application/json"})
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        stub = endpoint.rstrip("/") in (f"http://{host}:8089/v1" for host in STUB_HOSTS)
        start = (
            "Start the server (`heron stub-llm` serves one there)" if stub else "Start the server"
        )
        raise ConfigError(
            f"{what} cannot be reached (GET {url}: {reason}). {start} or fix the URL "
            "(it is the base URL, usually ending in /v1); --heron-offline replays from the cache "
            "without an endpoint"
        ) from None
    if status in (401, 403):
        raise ConfigError(
            f"{what} refused the key (GET {url}: HTTP {status}). Set HERON_API_KEY or "
            "OPENAI_API_KEY to a key this endpoint accepts"
        )
    if status in SKIP_STATUSES:
        return (
            f"{url} answered HTTP {status} (no model list): the model name {model!r} is not checked"
        )
    if status != 200:
        return f"{url} answered HTTP {status}: the model name {model!r} is not checked"
    listed = _model_ids(body)
    if listed is None:
        return f"{url} sent no readable model list: the model name {model!r} is not checked"
    ids, llamacpp = listed
    if model in ids:
        return None
    if llamacpp or not ids:
        return f"{url} does not name its models: the model name {model!r} is not checked"
    shown = ", ".join(sorted(ids)[:MAX_MODELS_SHOWN])
    more = f" and {len(ids) - MAX_MODELS_SHOWN} more" if len(ids) > MAX_MODELS_SHOWN else ""
    raise ConfigError(
        f"--heron-model {model!r} is not served by {endpoint} (GET {url} lists: {shown}{more}). "
        "Give one of those names (on Ollama, pull the model first: ollama pull NAME)"
    )
