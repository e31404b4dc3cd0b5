"""llm.py: the chat client against a real local HTTP endpoint, the cache, the meter, extract_sql."""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import re
import socket
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chat_stub import ChatStub, Raw, completion, rate_limited
from pytest_heron.core.errors import AdapterError
from pytest_heron.core.types import BenchmarkContext, Limits, LLMOptions, Question
from pytest_heron.systems.llm.client import (
    CacheMiss,
    ChatClient,
    LLMConfig,
    LLMError,
    LLMTimeout,
    Meter,
    ResponseCache,
    ToolsUnsupported,
    api_key,
    cache_key,
    extract_sql,
)

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
        ChatStub([Raw(503, b"{}")] * 10) as stub,
        pytest.raises(LLMError, match="failed after 3 attempts: HTTP 503"),
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


def test_connection_refused_fails_at_once_naming_the_endpoint(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{_free_port()}/v1/"
    client = _client(url, tmp_path, max_attempts=6, backoff_s=5.0)
    started = time.monotonic()
    with pytest.raises(LLMError) as info:
        client.chat(MSGS, question_id="q")
    assert time.monotonic() - started < 5.0  # no backoff was waited: nothing listens there
    assert str(info.value) == (
        f"cannot connect to the endpoint {url.rstrip('/')}: the connection was refused (is the "
        "server running, and is --heron-endpoint right?)"
    )
    assert not isinstance(info.value, TimeoutError)


def test_slow_endpoint_times_out_per_request(tmp_path: Path) -> None:
    def slow(_body: dict[str, Any]) -> dict[str, Any]:
        time.sleep(1.5)
        return completion("SELECT 1")

    with ChatStub(slow) as stub:
        client = _client(stub.url, tmp_path, timeout_s=0.3, max_attempts=2)
        client._client()  # the SDK's setup (its TLS context) is not the request's time
        started = time.monotonic()
        with pytest.raises(LLMTimeout, match=r"timed out 2 times \(no reply within 0\.3s"):
            client.chat(MSGS, question_id="q")
        assert time.monotonic() - started < 1.5
        with pytest.raises(LLMTimeout, match="out of time") as info:
            _client(stub.url, tmp_path, max_attempts=5).chat(
                MSGS, question_id="q", deadline=time.monotonic() + 0.3
            )
    # one classification of "out of time": a TimeoutError, so adapter_timeout for every adapter
    assert isinstance(info.value, TimeoutError) and isinstance(info.value, AdapterError)


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


# -- against a real server's behaviour (issue 20) ----------------------------------------------


def test_http_500_is_retried_once_and_keeps_the_servers_reason(tmp_path: Path) -> None:
    cause = "ValueError: 'content' must be a string, not None"
    long = "Traceback (most recent call last):\n" + "  File x, line 1\n" * 200 + cause
    body = json.dumps({"error": {"message": long, "type": "internal_server_error"}}).encode()
    with ChatStub([Raw(500, body)] * 6) as stub, pytest.raises(LLMError) as info:
        _client(stub.url, tmp_path, max_attempts=6).chat(MSGS, question_id="q")
    assert len(stub.requests) == 2  # retried once, not six times
    text = str(info.value)
    assert f"the endpoint {stub.url} failed the request twice: HTTP 500" in text
    assert text.endswith(cause)  # the cause, at the end of a long message, is kept
    assert text.count("characters ...]") == 1


@pytest.mark.parametrize("status", [400, 401, 403, 413, 501])
def test_other_statuses_are_not_retried(tmp_path: Path, status: int) -> None:
    with ChatStub([Raw(status, b'{"error": {"message": "no"}}')] * 3) as stub:
        with pytest.raises(LLMError, match=f"refused the request: HTTP {status}: no"):
            _client(stub.url, tmp_path).chat(MSGS, question_id="q")
        assert len(stub.requests) == 1


def test_max_tokens_is_sent_and_in_the_key_unless_the_caller_sets_it(tmp_path: Path) -> None:
    with ChatStub([completion("SELECT 1")] * 4) as stub:
        _client(stub.url, tmp_path, max_tokens=77).chat(MSGS, question_id="q")
        _client(stub.url, tmp_path, max_tokens=78).chat(MSGS, question_id="q")  # not replayed
        _client(stub.url, tmp_path, max_tokens=77).chat(
            MSGS, question_id="q2", params={"max_tokens": 5}
        )
        _client(stub.url, tmp_path, max_tokens=None).chat(MSGS, question_id="q3")
    sent = [r.get("max_tokens") for r in stub.requests]
    assert sent == [77, 78, 5, None]
    assert "max_tokens" not in stub.requests[3]


def test_a_model_that_takes_max_completion_tokens_gets_it(tmp_path: Path) -> None:
    refusal = Raw(
        400,
        b'{"error": {"message": "Unsupported parameter: \'max_tokens\' is not supported with '
        b"this model. Use 'max_completion_tokens' instead.\"}}",
    )
    with ChatStub([refusal, completion("SELECT 1")]) as stub:
        reply = _client(stub.url, tmp_path, max_tokens=64).chat(MSGS, question_id="q")
    assert reply.content == "SELECT 1"
    assert stub.requests[1]["max_completion_tokens"] == 64 and "max_tokens" not in stub.requests[1]


def test_tool_choice_and_string_content_on_tool_call_turns(tmp_path: Path) -> None:
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    turn = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c0", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ],
    }
    convo = [*MSGS, turn, {"role": "tool", "tool_call_id": "c0", "content": "{}"}]
    with ChatStub([completion("done")] * 2) as stub:
        client = _client(stub.url, tmp_path)
        client.chat(convo, question_id="q", tools=tools)
        client.chat(MSGS, question_id="q2", tools=tools, params={"tool_choice": "required"})
    first, second = stub.requests
    assert first["tool_choice"] == "auto" and second["tool_choice"] == "required"
    assert first["messages"][2]["content"] == "" and first["messages"][2]["tool_calls"]
    assert turn["content"] is None  # the caller's conversation is left as it was
    assert "tool_choice" not in _client(stub.url, tmp_path).sent_params(None, None)


def test_the_endpoint_is_part_of_the_cache_key(tmp_path: Path) -> None:
    with (
        ChatStub([completion("SELECT 'first'", prompt_tokens=3)]) as one,
        ChatStub([completion("SELECT 'second'", prompt_tokens=4)]) as two,
    ):
        assert _client(one.url, tmp_path).chat(MSGS, question_id="q").content == "SELECT 'first'"
        again = _client(two.url, tmp_path).chat(MSGS, question_id="q")
        assert again.content == "SELECT 'second'" and not again.cached  # asked, not replayed
        assert _client(one.url + "/", tmp_path).chat(MSGS, question_id="q").cached
    assert len(one.requests) == 1 and len(two.requests) == 1
    # offline: the named endpoint's reply, or without one the newest from any endpoint
    named = _client(one.url, tmp_path, offline=True).chat(MSGS, question_id="q")
    assert named.content == "SELECT 'first'"
    assert _client(None, tmp_path, offline=True).chat(MSGS, question_id="q").cached
    with pytest.raises(CacheMiss, match=re.escape("endpoint http://127.0.0.1:1/v1, model m")):
        _client("http://127.0.0.1:1/v1", tmp_path, offline=True).chat(MSGS, question_id="q")


def test_a_cache_file_of_the_first_key_format_is_not_read(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite3"
    with sqlite3.connect(path) as conn:  # the format-1 table, with a reply under today's key
        conn.execute(
            "CREATE TABLE replies (key TEXT PRIMARY KEY, reply TEXT NOT NULL, model TEXT NOT NULL,"
            " question TEXT NOT NULL, created REAL NOT NULL)"
        )
        key = _client(None, tmp_path, offline=True).key(MSGS, tools=None, question_id="q", sample=0)
        conn.execute(
            "INSERT INTO replies VALUES (?, '{\"content\": \"SELECT 0\"}', 'm', 'q', 0)", (key,)
        )
    with pytest.raises(CacheMiss):
        _client(None, tmp_path, offline=True).chat(MSGS, question_id="q")
    with ChatStub([completion("SELECT 1")]) as stub:
        assert _client(stub.url, tmp_path).chat(MSGS, question_id="q").content == "SELECT 1"
    with sqlite3.connect(path) as conn:  # left as it was, beside the new table
        assert conn.execute("SELECT count(*) FROM replies").fetchone() == (1,)


def test_a_replayed_call_keeps_its_recorded_latency(tmp_path: Path) -> None:
    def slow(_body: dict[str, Any]) -> dict[str, Any]:
        time.sleep(0.4)
        return completion("SELECT 1", prompt_tokens=5)

    with ChatStub(slow) as stub:
        live = _client(stub.url, tmp_path).chat(MSGS, question_id="q")
        meter = Meter()
        replayed = _client(stub.url, tmp_path).chat(MSGS, question_id="q", meter=meter)
    assert live.latency_s >= 0.4 and replayed.cached
    assert replayed.latency_s == pytest.approx(live.latency_s)
    usage = meter.usage()
    assert usage["replayed_ms"] == round(live.latency_s * 1000) == usage["llm_ms"]
    assert "replayed_ms" not in Meter().usage()


def test_a_request_given_up_on_has_its_connection_closed(tmp_path: Path) -> None:
    """The server sees the client go (a llama.cpp-style server then drops the queued request)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    closed = threading.Event()

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(65536)  # the request; never answered
            conn.settimeout(30)
            with contextlib.suppress(OSError):
                while conn.recv(65536):
                    pass
                closed.set()  # EOF: the client closed its end

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
    with pytest.raises(LLMTimeout):
        _client(url, tmp_path, timeout_s=0.3, max_attempts=1).chat(MSGS, question_id="q")
    assert closed.wait(20), "the abandoned request's connection was left open"
    listener.close()


def test_one_classification_of_out_of_time() -> None:
    from pytest_heron.core.errors import AdapterTimeout, ErrorKind, OutOfTime, adapter_failure_kind
    from pytest_heron.scoring.score import _adapter_failure
    from pytest_heron.systems.child import failure

    late = [LLMTimeout("out of time"), OutOfTime("late"), TimeoutError("late")]
    for exc in late:
        assert adapter_failure_kind(exc) is ErrorKind.ADAPTER_TIMEOUT
        assert _adapter_failure(exc)[0] is ErrorKind.ADAPTER_TIMEOUT
        assert failure(exc)["kind"] == "adapter_timeout"
    assert _adapter_failure(AdapterTimeout("killed"))[0] is ErrorKind.ADAPTER_TIMEOUT
    for exc in (LLMError("HTTP 400"), CacheMiss("miss"), ValueError("x")):
        assert failure(exc)["kind"] == "adapter_error"
        assert _adapter_failure(exc)[0] is ErrorKind.ADAPTER_ERROR


def test_a_question_that_runs_out_of_time_keeps_the_tokens_already_billed(tmp_path: Path) -> None:
    from pytest_heron.systems.base import MeteredAdapter
    from pytest_heron.systems.child import failure

    def respond(body: dict[str, Any]) -> dict[str, Any]:
        if len(body["messages"]) > 2:
            time.sleep(1.0)  # the second call does not come back in time
        return completion("SELECT 1", prompt_tokens=40, completion_tokens=2)

    class Two(MeteredAdapter):
        def answer(self, q: Any, sample: int, meter: Meter) -> Any:
            first = client.chat(MSGS, question_id="q", meter=meter)
            deadline = time.monotonic() + 0.3
            client.chat([*MSGS, first.message()], question_id="q", meter=meter, deadline=deadline)

    with ChatStub(respond) as stub:
        client = _client(stub.url, tmp_path)
        with pytest.raises(LLMTimeout) as info:
            Two().generate(Question(id="q", question="?"))
    reply = failure(info.value)
    assert reply["kind"] == "adapter_timeout"
    assert reply["usage"]["prompt_tokens"] == 40 and reply["usage"]["calls"] == 1
