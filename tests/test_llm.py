"""llm.py: the chat client against a real local HTTP endpoint, the cache, the meter, extract_sql."""

from __future__ import annotations

import multiprocessing
import socket
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chat_stub import ChatStub, Raw, completion, rate_limited
from pytest_heron.errors import AdapterError
from pytest_heron.systems.llm.client import (
    CacheMiss,
    ChatClient,
    LLMConfig,
    LLMError,
    Meter,
    ResponseCache,
    ToolsUnsupported,
    api_key,
    cache_key,
    extract_sql,
)
from pytest_heron.types import BenchmarkContext, Limits, LLMOptions

MSGS = [{"role": "system", "content": "schema"}, {"role": "user", "content": "q?"}]


def _client(url: str | None, tmp_path: Path, *, offline: bool = False, **config: Any) -> ChatClient:
    values: dict[str, Any] = {"backoff_s": 0.01, "max_backoff_s": 0.05, "api_key": "k"}
    values.update(config)
    return ChatClient(
        LLMConfig(endpoint=url, model="m", **values),
        adapter="test",
        adapter_version="1",
        cache=ResponseCache(tmp_path / "cache.sqlite3"),
        offline=offline,
        data_version="dv1",
    )


# -- extract_sql ------------------------------------------------------------------------------

CASES = [
    ("SELECT 1", "SELECT 1"),
    ("  SELECT a FROM t;  ", "SELECT a FROM t"),
    ("SELECT a FROM t;;\n", "SELECT a FROM t"),
    ("```sql\nSELECT a\nFROM t;\n```", "SELECT a\nFROM t"),
    ("```SQL\nselect 1\n```", "select 1"),
    (
        "```postgresql\nWITH x AS (SELECT 1) SELECT * FROM x\n```",
        "WITH x AS (SELECT 1) SELECT * FROM x",
    ),
    ("```\nSELECT 2\n```", "SELECT 2"),
    ("Here is the query:\n```sql\nSELECT 3;\n```\nIt counts rows.", "SELECT 3"),
    ("First:\n```sql\nSELECT 1\n```\nBetter:\n```sql\nSELECT 2\n```\n", "SELECT 2"),
    (
        "```sql\nSELECT 1\n```\nExplanation:\n```text\nrows are counted\n```",
        "SELECT 1",
    ),
    ("```sql\n-- count\nSELECT count(*) FROM t\n```", "-- count\nSELECT count(*) FROM t"),
    ("```sql\nSQL: SELECT 5\n```", "SELECT 5"),
    ("SQL: SELECT name FROM t WHERE x = 'a;b';", "SELECT name FROM t WHERE x = 'a;b'"),
    ("sql query: SELECT 1", "SELECT 1"),
    ("The answer is SELECT a FROM t WHERE b = 1", "SELECT a FROM t WHERE b = 1"),
    (
        "To answer this, select the right table.\n\nSELECT count(*) FROM orders.orders;\n\n"
        "This counts every order.",
        "SELECT count(*) FROM orders.orders",
    ),
    (
        "WITH x AS (\n  SELECT 1 AS a\n)\nSELECT a FROM x;\nThat's it.",
        "WITH x AS (\n  SELECT 1 AS a\n)\nSELECT a FROM x",
    ),
    (
        "SELECT a\nFROM t\n\nWHERE b = 1\n\nThis filters on b.",
        "SELECT a\nFROM t\n\nWHERE b = 1",
    ),
    ("<think>maybe SELECT 9? no</think>\n```sql\nSELECT 10\n```", "SELECT 10"),
    ("<think>SELECT 9</think>SELECT 10", "SELECT 10"),
    ("```sql\nSELECT a FROM t WHERE", "SELECT a FROM t WHERE"),  # cut off: the unclosed fence
    ("I cannot answer that.", ""),
    ("Use the VALUES list.", ""),
    ("", ""),
    ("SELECT 'it''s; fine' AS x; SELECT 2", "SELECT 2"),
    ("Try: SELECT 1;\nor rather: SELECT 2;", "SELECT 2"),
    ("SELECT a /* ; */ FROM t -- note; more\n;", "SELECT a /* ; */ FROM t -- note; more"),
]


@pytest.mark.parametrize(("text", "expected"), CASES)
def test_extract_sql_table(text: str, expected: str) -> None:
    assert extract_sql(text) == expected


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_extract_sql_never_raises(text: str) -> None:
    out = extract_sql(text)
    assert isinstance(out, str)
    assert not out.endswith(";") and out == out.strip()


QUERIES = st.from_regex(
    r"SELECT [a-z_]{1,8} FROM [a-z_]{1,8}( WHERE [a-z]{1,5} = [0-9]{1,3})?", fullmatch=True
)
PROSE = st.text(alphabet=st.characters(blacklist_characters="`;'\"", codec="ascii"), max_size=40)


@settings(max_examples=200, deadline=None)
@given(QUERIES, PROSE, PROSE, st.sampled_from(["sql", "SQL", "postgresql", ""]))
def test_extract_sql_finds_a_fenced_query_in_any_prose(
    query: str, before: str, after: str, tag: str
) -> None:
    text = f"{before}\n```{tag}\n{query};\n```\n{after}"
    assert extract_sql(text) == query


@settings(max_examples=100, deadline=None)
@given(QUERIES)
def test_extract_sql_keeps_a_bare_query(query: str) -> None:
    assert extract_sql(query + ";") == query
    assert extract_sql("SQL: " + query) == query


# -- cache key and cache ----------------------------------------------------------------------


def _key(**change: Any) -> str:
    parts: dict[str, Any] = {
        "adapter": "raw-llm",
        "adapter_version": "1",
        "model": "m",
        "params": {"temperature": 0.0},
        "messages": MSGS,
        "tools": None,
        "data_version": "dv",
        "question_id": "q001",
        "sample": 0,
    }
    parts.update(change)
    return cache_key(**parts)


def test_cache_key_covers_everything_that_shapes_the_answer() -> None:
    base = _key()
    assert base == _key() and len(base) == 64
    assert _key(params={"temperature": 0.0}) == base
    variants = [
        _key(adapter="agent"),
        _key(adapter_version="2"),
        _key(model="m2"),
        _key(params={"temperature": 0.5}),
        _key(messages=[*MSGS, {"role": "user", "content": "more"}]),
        _key(tools=[{"type": "function", "function": {"name": "f"}}]),
        _key(data_version="dv2"),
        _key(question_id="q002"),
        _key(sample=1),
    ]
    assert len({base, *variants}) == len(variants) + 1


def test_cache_key_ignores_dict_order() -> None:
    a = _key(messages=[{"role": "user", "content": "x"}])
    b = _key(messages=[{"content": "x", "role": "user"}])
    assert a == b


def test_cache_round_trip_and_wal(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "sub" / "c.sqlite3")
    assert cache.get("k") is None
    cache.put("k", {"content": "SELECT 1", "prompt_tokens": 3}, model="m", question="q")
    assert cache.get("k") == {"content": "SELECT 1", "prompt_tokens": 3}
    assert len(cache) == 1
    with sqlite3.connect(cache.path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def _writer(path: str, worker: int, n: int) -> None:
    cache = ResponseCache(Path(path))
    for i in range(n):
        cache.put(f"{worker}-{i}", {"i": i}, model="m", question=f"q{i}")
        assert cache.get(f"{worker}-{i}") == {"i": i}


def test_cache_is_safe_with_several_writing_processes(tmp_path: Path) -> None:
    path = str(tmp_path / "shared.sqlite3")
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(path, w, 60)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    assert len(ResponseCache(Path(path))) == 240


# -- the client against the stub --------------------------------------------------------------


def test_a_call_is_metered_recorded_and_replayed(tmp_path: Path) -> None:
    with ChatStub([completion("SELECT 1", prompt_tokens=120, completion_tokens=7)]) as stub:
        client = _client(stub.url, tmp_path, temperature=0.3)
        meter = Meter()
        reply = client.chat(MSGS, question_id="q1", meter=meter)
        assert reply.content == "SELECT 1" and not reply.cached
        again = client.chat(MSGS, question_id="q1", meter=meter)
        assert again.cached and again.content == "SELECT 1"
        fresh = _client(stub.url, tmp_path, temperature=0.3)  # a new process, same cache file
        assert fresh.chat(MSGS, question_id="q1").cached
    assert len(stub.requests) == 1
    sent = stub.requests[0]
    assert sent["model"] == "m" and sent["messages"] == MSGS and sent["temperature"] == 0.3
    assert "tools" not in sent
    usage = meter.usage()
    assert usage["prompt_tokens"] == 240 and usage["completion_tokens"] == 14
    assert usage["calls"] == 2 and usage["cached_calls"] == 1
    assert len(meter.latencies_s) == 2


def test_sample_and_question_are_separate_cache_entries(tmp_path: Path) -> None:
    replies = [completion(f"SELECT {i}", prompt_tokens=1) for i in range(3)]
    with ChatStub(replies) as stub:
        client = _client(stub.url, tmp_path)
        got = [
            client.chat(MSGS, question_id="q1", sample=0).content,
            client.chat(MSGS, question_id="q1", sample=1).content,
            client.chat(MSGS, question_id="q2", sample=0).content,
            client.chat(MSGS, question_id="q1", sample=1).content,
        ]
    assert got == ["SELECT 0", "SELECT 1", "SELECT 2", "SELECT 1"]
    assert len(stub.requests) == 3


def test_api_key_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("HERON_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert api_key() == "heron-no-key"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")
    assert api_key() == "sk-openai"
    monkeypatch.setenv("HERON_API_KEY", "sk-heron")
    assert api_key() == "sk-heron"
    with ChatStub([completion("SELECT 1")]) as stub:
        ChatClient(LLMConfig(endpoint=stub.url, model="m"), adapter="t").chat(MSGS, question_id="q")
    assert stub.headers[0]["authorization"] == "Bearer sk-heron"


def test_429_then_success_honours_retry_after(tmp_path: Path) -> None:
    script = [
        rate_limited(0.3),
        Raw(503, b'{"error": {"message": "busy"}}'),
        completion("SELECT 1"),
    ]
    with ChatStub(script) as stub:
        client = _client(stub.url, tmp_path, max_backoff_s=5.0)
        started = time.monotonic()
        reply = client.chat(MSGS, question_id="q")
        elapsed = time.monotonic() - started
    assert reply.content == "SELECT 1" and len(stub.requests) == 3
    assert elapsed >= 0.3  # waited as Retry-After asked


def test_retry_after_is_capped(tmp_path: Path) -> None:
    with ChatStub([rate_limited(3600), completion("SELECT 1")]) as stub:
        started = time.monotonic()
        _client(stub.url, tmp_path, max_backoff_s=0.1).chat(MSGS, question_id="q")
    assert time.monotonic() - started < 5


def test_attempts_are_bounded(tmp_path: Path) -> None:
    with (
        ChatStub([Raw(500, b"{}")] * 10) as stub,
        pytest.raises(LLMError, match="failed after 3 attempts: HTTP 500"),
    ):
        _client(stub.url, tmp_path, max_attempts=3).chat(MSGS, question_id="q")
    assert len(stub.requests) == 3


def test_a_client_error_is_not_retried_nor_cached(tmp_path: Path) -> None:
    bad = Raw(401, b'{"error": {"message": "invalid api key"}}')
    with ChatStub([bad, completion("SELECT 1")]) as stub:
        client = _client(stub.url, tmp_path)
        with pytest.raises(LLMError, match="refused the request: HTTP 401: invalid api key"):
            client.chat(MSGS, question_id="q")
        assert client.chat(MSGS, question_id="q").content == "SELECT 1"
    assert len(stub.requests) == 2


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_connection_refused_is_retried_then_reported(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{_free_port()}/v1"
    with pytest.raises(LLMError, match="failed after 2 attempts: APIConnectionError"):
        _client(url, tmp_path, max_attempts=2).chat(MSGS, question_id="q")


def test_slow_endpoint_times_out_per_request(tmp_path: Path) -> None:
    def slow(_body: dict[str, Any]) -> dict[str, Any]:
        time.sleep(1.5)
        return completion("SELECT 1")

    with ChatStub(slow) as stub:
        started = time.monotonic()
        with pytest.raises(LLMError, match="APITimeoutError"):
            _client(stub.url, tmp_path, timeout_s=0.3, max_attempts=2).chat(MSGS, question_id="q")
        assert time.monotonic() - started < 1.5
        with pytest.raises(LLMError, match="out of time"):
            _client(stub.url, tmp_path, max_attempts=5).chat(
                MSGS, question_id="q", deadline=time.monotonic() + 0.3
            )


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (Raw(200, b"not json at all"), "malformed response from the endpoint"),
        (Raw(200, b""), "malformed response from the endpoint"),
        (Raw(200, b'{"id": "x", "object": "chat.completion"}'), "no choices"),
        (Raw(200, b'{"choices": []}'), "no choices"),
        (Raw(200, b'{"choices": [{"index": 0}]}'), "has no message"),
        (Raw(200, b'{"error": {"message": "model overloaded"}}'), "model overloaded"),
        (completion("", prompt_tokens=5), "empty reply"),
        (completion(None), "empty reply"),
    ],
)
def test_unusable_replies_are_errors_and_never_cached(
    tmp_path: Path, reply: Any, message: str
) -> None:
    with ChatStub([reply, completion("SELECT 1")]) as stub:
        client = _client(stub.url, tmp_path)
        meter = Meter()
        with pytest.raises(LLMError, match=message):
            client.chat(MSGS, question_id="q", meter=meter)
        assert client.chat(MSGS, question_id="q").content == "SELECT 1"
    assert len(stub.requests) == 2
    if message == "empty reply" and meter.calls:
        assert meter.usage()["prompt_tokens"] == (5 if "5" in str(reply) else 0)


def test_tools_rejected_by_the_endpoint(tmp_path: Path) -> None:
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    for status in (400, 404, 422):
        body = b'{"error": {"message": "tools are not supported"}}'
        with (
            ChatStub([Raw(status, body)]) as stub,
            pytest.raises(ToolsUnsupported, match=f"HTTP {status}.*tools are not supported"),
        ):
            _client(stub.url, tmp_path).chat(MSGS, question_id="q", tools=tools)
        assert stub.requests[0]["tools"] == tools


def test_a_400_about_something_else_is_not_a_tools_problem(tmp_path: Path) -> None:
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    too_long = Raw(400, b'{"error": {"message": "maximum context length is 8192 tokens"}}')
    with ChatStub([too_long]) as stub, pytest.raises(LLMError) as info:
        _client(stub.url, tmp_path).chat(MSGS, question_id="q", tools=tools)
    assert not isinstance(info.value, ToolsUnsupported)
    assert "HTTP 400: maximum context length" in str(info.value)


def test_tool_calls_round_trip_through_the_cache(tmp_path: Path) -> None:
    tools = [{"type": "function", "function": {"name": "run_sql_query"}}]
    reply = completion(None, tool_calls=[("run_sql_query", {"sql": "SELECT 1"})])
    with ChatStub([reply]) as stub:
        client = _client(stub.url, tmp_path)
        live = client.chat(MSGS, question_id="q", tools=tools)
        replayed = client.chat(MSGS, question_id="q", tools=tools)
    assert live.tool_calls == replayed.tool_calls
    assert replayed.tool_calls[0].parsed_arguments() == {"sql": "SELECT 1"}
    assert replayed.message()["tool_calls"][0]["function"]["name"] == "run_sql_query"
    assert len(stub.requests) == 1


def test_offline_replays_and_a_miss_names_question_and_file(tmp_path: Path) -> None:
    with ChatStub([completion("SELECT 1", prompt_tokens=9)]) as stub:
        _client(stub.url, tmp_path).chat(MSGS, question_id="q7")
    offline = _client(None, tmp_path, offline=True)
    meter = Meter()
    assert offline.chat(MSGS, question_id="q7", meter=meter).content == "SELECT 1"
    assert meter.usage()["prompt_tokens"] == 9 and meter.usage()["cached_calls"] == 1
    with pytest.raises(CacheMiss, match=r"question q8 .*cache\.sqlite3") as info:
        offline.chat(MSGS, question_id="q8")
    assert isinstance(info.value, AdapterError)


def test_config_from_the_context() -> None:
    def ctx(**llm: Any) -> BenchmarkContext:
        return BenchmarkContext(
            dsn="",
            dialect="postgres",
            scale="tiny",
            seed=42,
            schema_ddl="",
            tables=(),
            limits=Limits(timeout_s=30.0),
            llm=LLMOptions(**llm),
        )

    with pytest.raises(AdapterError, match="--heron-model"):
        LLMConfig.from_context(ctx(endpoint="http://x/v1"))
    with pytest.raises(AdapterError, match="--heron-endpoint"):
        LLMConfig.from_context(ctx(model="m"))
    offline = LLMConfig.from_context(ctx(model="m", offline=True))
    assert offline.endpoint is None
    cfg = LLMConfig.from_context(ctx(model="m", endpoint="http://x/v1", temperature=0.7))
    assert (cfg.model, cfg.temperature, cfg.timeout_s) == ("m", 0.7, 30.0)
