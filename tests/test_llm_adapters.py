"""The raw-llm and agent adapters against the scripted endpoint and a real seeded state, first
called directly, then through whole plugin runs (pytester subprocesses)."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from chat_stub import ChatStub, Raw, completion, rate_limited
from inner import TWO_QUESTIONS
from pytest_heron.core.errors import AdapterError
from pytest_heron.core.paths import cache_dir
from pytest_heron.core.types import BenchmarkContext, Limits, LLMOptions, Question
from pytest_heron.dataset import load_questions
from pytest_heron.generate import load_bundle
from pytest_heron.sandbox.execute import execute
from pytest_heron.systems.agent import MAX_AGENT_CALLS, AgentAdapter, catalogue, tables_referenced
from pytest_heron.systems.llm.client import ToolsUnsupported
from pytest_heron.systems.raw_llm import FEW_SHOT, RawLLMAdapter

pytest_plugins = ["pytester"]

HERON_CACHE = cache_dir()  # read before pytester points HOME at a temporary folder

GOLD_SQL = "SELECT count(*) FROM core.tenants"  # what the stubbed model answers
Q = Question(id="t1", question="How many tenants are there?", shape="single", retrieval="named")


def _ctx(dsn: str, url: str | None, cache: Path, **options: Any) -> BenchmarkContext:
    bundle = load_bundle()
    llm: dict[str, Any] = {
        "endpoint": url,
        "model": "m",
        "temperature": 0.0,
        "strategy": "zero-shot",
        "cache_path": str(cache),
        "offline": False,
    }
    llm.update(options)
    return BenchmarkContext(
        dsn=dsn,
        dialect="postgres",
        scale="tiny",
        seed=42,
        schema_ddl=bundle.ddl,
        tables=tuple(sorted(bundle.tables)),
        limits=Limits(timeout_s=60.0, statement_timeout_s=10.0),
        llm=LLMOptions(**llm),
        data_version=bundle.data_version,
    )


def _raw(tiny_state: Any, url: str, tmp_path: Path, strategy: str) -> RawLLMAdapter:
    adapter = RawLLMAdapter()
    adapter.prepare(_ctx(tiny_state.reader_dsn, url, tmp_path / "c.sqlite3", strategy=strategy))
    return adapter


def _sql(text: str) -> str:
    return f"Here it is:\n```sql\n{text};\n```"


# -- few-shot examples ------------------------------------------------------------------------


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().rstrip(";").lower()


def test_few_shot_examples_are_not_benchmark_questions_and_run(tiny_state: Any) -> None:
    questions = load_questions(None)
    assert len(questions) >= 100
    texts = {_norm(q.question) for q in questions}
    golds = {_norm(q.gold_sql) for q in questions}
    assert len(FEW_SHOT) >= 3
    for ex in FEW_SHOT:
        assert _norm(ex.question) not in texts and _norm(ex.sql) not in golds
        result = execute(tiny_state.reader_dsn, ex.sql, timeout_s=10)
        assert result.ok, (ex.question, result.error)
        assert result.rows, f"the example returns no rows on tiny/42: {ex.question}"


# -- raw-llm, called directly -----------------------------------------------------------------


def test_zero_shot_prompt_has_the_whole_schema(tiny_state: Any, tmp_path: Path) -> None:
    with ChatStub([completion(_sql(GOLD_SQL), prompt_tokens=50, completion_tokens=9)]) as stub:
        adapter = _raw(tiny_state, stub.url, tmp_path, "zero-shot")
        pred = adapter.generate(Q)
    assert pred.sql == GOLD_SQL
    assert pred.usage == {
        "prompt_tokens": 50,
        "completion_tokens": 9,
        "calls": 1,
        "cached_calls": 0,
        "llm_ms": pred.usage["llm_ms"],  # type: ignore[index]
    }
    assert pred.tables_in_context is None  # the whole schema: Set-Recall is n/a
    (body,) = stub.requests
    system, user = body["messages"]
    assert system["role"] == "system" and "COMMENT ON TABLE core.tenants" in system["content"]
    assert "CREATE TABLE support.kb_articles" in system["content"]
    assert user == {"role": "user", "content": Q.question}


def test_few_shot_prompt_has_the_examples_as_turns(tiny_state: Any, tmp_path: Path) -> None:
    with ChatStub([completion(_sql(GOLD_SQL))]) as stub:
        _raw(tiny_state, stub.url, tmp_path, "few-shot").generate(Q)
    messages = stub.requests[0]["messages"]
    assert len(messages) == 2 + 2 * len(FEW_SHOT)
    assert [m["role"] for m in messages[1:-1]] == ["user", "assistant"] * len(FEW_SHOT)
    assert messages[1]["content"] == FEW_SHOT[0].question
    assert FEW_SHOT[0].sql in messages[2]["content"]
    assert messages[-1]["content"] == Q.question


def test_self_correct_shows_the_database_error_and_stops_when_it_runs(
    tiny_state: Any, tmp_path: Path
) -> None:
    script = [
        completion(_sql("SELECT count(*) FROM core.tenant"), prompt_tokens=10),
        completion(_sql("SELECT count(nope) FROM core.tenants"), prompt_tokens=20),
        completion(_sql(GOLD_SQL), prompt_tokens=30),
        completion(_sql("SELECT 'never asked'")),
    ]
    with ChatStub(script) as stub:
        pred = _raw(tiny_state, stub.url, tmp_path, "self-correct").generate(Q)
    assert pred.sql == GOLD_SQL and len(stub.requests) == 3
    assert pred.usage is not None and pred.usage["prompt_tokens"] == 60
    second, third = stub.requests[1]["messages"], stub.requests[2]["messages"]
    assert second[-2]["role"] == "assistant" and "core.tenant;" in second[-2]["content"]
    assert second[-1]["role"] == "user"
    assert 'relation "core.tenant" does not exist' in second[-1]["content"]
    assert 'column "nope" does not exist' in third[-1]["content"]


def test_self_correct_makes_at_most_two_rounds(tiny_state: Any, tmp_path: Path) -> None:
    bad = [completion(_sql(f"SELECT {i} FROM core.nothing_{i}")) for i in range(5)]
    with ChatStub(bad) as stub:
        pred = _raw(tiny_state, stub.url, tmp_path, "self-correct").generate(Q)
    assert len(stub.requests) == 3  # the answer and two corrections
    assert pred.sql == "SELECT 2 FROM core.nothing_2"  # scored as it is (a db_error)


def test_self_correct_asks_again_when_there_is_no_sql(tiny_state: Any, tmp_path: Path) -> None:
    script = [completion("I am not sure."), completion(_sql(GOLD_SQL))]
    with ChatStub(script) as stub:
        pred = _raw(tiny_state, stub.url, tmp_path, "few-shot+self-correct").generate(Q)
    assert pred.sql == GOLD_SQL
    assert "contains no SQL" in stub.requests[1]["messages"][-1]["content"]
    assert len(stub.requests[0]["messages"]) == 2 + 2 * len(FEW_SHOT)


def test_a_failed_question_still_reports_what_it_billed(tiny_state: Any, tmp_path: Path) -> None:
    script = [completion("No idea.", prompt_tokens=70, completion_tokens=2)] * 3
    with ChatStub(script) as stub, pytest.raises(AdapterError, match="contains no SQL") as info:
        _raw(tiny_state, stub.url, tmp_path, "self-correct").generate(Q)
    assert len(stub.requests) == 3
    usage = info.value.usage  # type: ignore[attr-defined]
    assert (usage["prompt_tokens"], usage["completion_tokens"], usage["calls"]) == (210, 6, 3)


def test_zero_shot_does_not_execute_or_correct(tiny_state: Any, tmp_path: Path) -> None:
    script = [completion(_sql("SELECT * FROM core.nothing")), completion(_sql("SELECT 1"))]
    with ChatStub(script) as stub:
        pred = _raw(tiny_state, stub.url, tmp_path, "few-shot").generate(Q)
    assert pred.sql == "SELECT * FROM core.nothing" and len(stub.requests) == 1


def test_samples_are_separate_calls(tiny_state: Any, tmp_path: Path) -> None:
    script = [completion(_sql(f"SELECT {i}")) for i in range(2)]
    with ChatStub(script) as stub:
        adapter = _raw(tiny_state, stub.url, tmp_path, "zero-shot")
        answers = [adapter.generate(Q, sample=s).sql for s in (0, 1, 0, 1)]
    assert answers == ["SELECT 0", "SELECT 1", "SELECT 0", "SELECT 1"]
    assert len(stub.requests) == 2


def test_prepare_needs_a_model(tiny_state: Any, tmp_path: Path) -> None:
    with pytest.raises(AdapterError, match="--heron-model"):
        RawLLMAdapter().prepare(_ctx(tiny_state.reader_dsn, "http://x/v1", tmp_path, model=None))


# -- agent, called directly -------------------------------------------------------------------


def _agent(tiny_state: Any, url: str, tmp_path: Path) -> AgentAdapter:
    adapter = AgentAdapter()
    adapter.prepare(_ctx(tiny_state.reader_dsn, url, tmp_path / "c.sqlite3"))
    return adapter


def _run(sql: str) -> dict[str, Any]:
    return completion(None, tool_calls=[("run_sql_query", {"sql": sql})], prompt_tokens=100)


def _ok() -> dict[str, Any]:
    return completion(None, tool_calls=[("results_ok", {})], prompt_tokens=100)


def test_agent_runs_queries_and_submits_the_last_successful_one(
    tiny_state: Any, tmp_path: Path
) -> None:
    script = [
        _ok(),  # submitting before anything ran is refused
        _run("SELECT tenant_id, count(*) FROM orders.customers GROUP BY 1 ORDER BY 1"),
        _run("SELECT count(*) FROM core.tenants"),
        _run("SELECT count(*) FROM core.no_such_table"),  # fails: not the answer
        _ok(),
    ]
    with ChatStub(script) as stub:
        pred = _agent(tiny_state, stub.url, tmp_path).generate(Q)
    assert pred.sql == "SELECT count(*) FROM core.tenants"
    assert pred.tables_in_context == ["core.tenants", "orders.customers"]
    assert pred.usage is not None and pred.usage["calls"] == 5
    assert pred.usage["prompt_tokens"] == 500
    assert len(stub.requests) == 5
    first = stub.requests[0]
    assert [t["function"]["name"] for t in first["tools"]] == ["run_sql_query", "results_ok"]
    assert "orders.customers" in first["messages"][0]["content"]  # the table list
    assert "CREATE TABLE" not in first["messages"][0]["content"]  # but not the DDL
    assert "No query has run successfully" in stub.requests[1]["messages"][-1]["content"]
    rows = json.loads(stub.requests[2]["messages"][-1]["content"])
    assert rows["columns"] == ["tenant_id", "count"] and rows["row_count"] >= 1
    assert len(rows["rows"]) <= 10
    last = stub.requests[4]["messages"]
    assert last[-1]["role"] == "tool" and "does not exist" in last[-1]["content"]
    assert last[-2]["tool_calls"][0]["function"]["name"] == "run_sql_query"


def test_agent_makes_at_most_twenty_calls(tiny_state: Any, tmp_path: Path) -> None:
    endless = ChatStub(lambda body: _run(f"SELECT {len(body['messages'])}"))
    with endless as stub, pytest.raises(AdapterError) as info:
        _agent(tiny_state, stub.url, tmp_path).generate(Q)
    assert len(stub.requests) == MAX_AGENT_CALLS == 20
    assert str(info.value) == (
        "the agent reached its limit of 20 LLM calls without an answer: results_ok was never "
        "called (20 queries run, the last successful one not submitted)"
    )


def test_agent_says_how_often_results_ok_came_too_early(tiny_state: Any, tmp_path: Path) -> None:
    """Five results_ok calls per reply, never after a successful query: the message counts them
    (it used to say results_ok was not called at all)."""
    eager = completion(None, tool_calls=[("results_ok", {})] * 5, prompt_tokens=1)
    with ChatStub(lambda body: eager) as stub, pytest.raises(AdapterError) as info:
        _agent(tiny_state, stub.url, tmp_path).generate(Q)
    assert len(stub.requests) == MAX_AGENT_CALLS
    assert "results_ok was called 100 times but no query had run successfully before it" in str(
        info.value
    )


def _llama_like(script: list[dict[str, Any]]) -> Callable[[dict[str, Any]], Any]:
    """What llama-cpp-python's server does: tools without tool_choice are ignored (a text
    reply), and an assistant turn with content null is an HTTP 500."""
    replies = list(script)

    def respond(body: dict[str, Any]) -> Any:
        for m in body["messages"]:
            if m["role"] == "assistant" and not isinstance(m.get("content"), str):
                return Raw(500, b'{"error": {"message": "TypeError: can only concatenate str"}}')
        if body.get("tools") and body.get("tool_choice") is None:
            return completion("I would run SELECT count(*) FROM core.tenants.")
        return replies.pop(0)

    return respond


def _openai_like(script: list[dict[str, Any]]) -> Callable[[dict[str, Any]], Any]:
    """What OpenAI's API accepts: content null or a string on a tool-call turn, tool_choice
    optional (auto by default), and every tool message answering a call of the turn before."""
    replies = list(script)

    def respond(body: dict[str, Any]) -> Any:
        messages = body["messages"]
        for i, m in enumerate(messages):
            if m["role"] == "assistant" and m.get("tool_calls"):
                if not (m.get("content") is None or isinstance(m.get("content"), str)):
                    return Raw(400, b'{"error": {"message": "invalid content"}}')
                ids = {c["id"] for c in m["tool_calls"]}
                answered = {x.get("tool_call_id") for x in messages[i + 1 :] if x["role"] == "tool"}
                if not ids <= answered:
                    return Raw(
                        400, b'{"error": {"message": "tool_call_ids did not have response"}}'
                    )
        return replies.pop(0)

    return respond


@pytest.mark.parametrize("shape", [_llama_like, _openai_like])
def test_agent_completes_its_loop_on_both_servers_shapes(
    tiny_state: Any, tmp_path: Path, shape: Callable[..., Any]
) -> None:
    script = [_run("SELECT count(*) FROM core.tenants"), _ok()]
    with ChatStub(shape(script)) as stub:
        pred = _agent(tiny_state, stub.url, tmp_path).generate(Q)
    assert pred.sql == "SELECT count(*) FROM core.tenants"
    assert len(stub.requests) == 2
    assert all(r["tool_choice"] == "auto" for r in stub.requests)
    turn = stub.requests[1]["messages"][2]
    assert turn["role"] == "assistant" and turn["content"] == "" and turn["tool_calls"]


def test_agent_grammar_mode_runs_json_steps(tiny_state: Any, tmp_path: Path) -> None:
    def step(action: str, sql: str = "") -> dict[str, Any]:
        return completion(json.dumps({"action": action, "sql": sql}), prompt_tokens=10)

    script = [
        step("results_ok"),  # too early: refused
        completion("not json", prompt_tokens=10),  # nudged
        step("run_sql_query", "SELECT count(*) FROM core.tenants"),
        step("results_ok"),
    ]
    adapter = AgentAdapter()
    ctx = _ctx(tiny_state.reader_dsn, "", tmp_path / "c.sqlite3", agent_mode="grammar")
    with ChatStub(script) as stub:
        ctx = dataclasses.replace(ctx, llm=dataclasses.replace(ctx.llm, endpoint=stub.url))
        adapter.prepare(ctx)
        pred = adapter.generate(Q)
    assert adapter.conditions(ctx) == {"agent_mode": "grammar"}
    assert pred.sql == "SELECT count(*) FROM core.tenants"
    assert pred.usage is not None and pred.usage["calls"] == 4
    for body in stub.requests:
        assert "tools" not in body and "tool_choice" not in body
        fmt = body["response_format"]
        assert fmt["type"] == "json_schema"
        assert fmt["json_schema"]["schema"]["properties"]["action"]["enum"] == [
            "run_sql_query",
            "results_ok",
        ]
    assert '"action": "run_sql_query"' in stub.requests[0]["messages"][0]["content"]
    assert "No query has run successfully" in stub.requests[1]["messages"][-1]["content"]
    assert "Answer with one JSON object" in stub.requests[2]["messages"][-1]["content"]
    result = stub.requests[3]["messages"][-1]
    assert result["role"] == "user" and result["content"].startswith("run_sql_query result: ")
    assert json.loads(result["content"].split(": ", 1)[1])["rows"][0][0] >= 1


def test_agent_mode_is_checked_at_prepare(tiny_state: Any, tmp_path: Path) -> None:
    ctx = _ctx(tiny_state.reader_dsn, "http://127.0.0.1:1/v1", tmp_path / "c", agent_mode="x")
    with pytest.raises(AdapterError, match="--heron-agent-mode: unknown mode 'x'"):
        AgentAdapter().prepare(ctx)


def test_agent_reports_an_endpoint_without_tools(tiny_state: Any, tmp_path: Path) -> None:
    rejected = Raw(400, b'{"error": {"message": "tools is not supported for this model"}}')
    with (
        ChatStub([rejected]) as stub,
        pytest.raises(ToolsUnsupported, match=r"rejected a request with tools \(HTTP 400"),
    ):
        _agent(tiny_state, stub.url, tmp_path).generate(Q)
    prose = [completion("There are 5 tenants."), completion("SELECT count(*) FROM core.tenants")]
    with (
        ChatStub(prose) as stub,
        pytest.raises(ToolsUnsupported, match="answered in text twice without calling"),
    ):
        _agent(tiny_state, stub.url, tmp_path).generate(Q)
    assert len(stub.requests) == 2
    assert "Use the tools" in stub.requests[1]["messages"][-1]["content"]


def test_agent_catalogue_and_table_extraction() -> None:
    bundle = load_bundle()
    schemas, tables = catalogue(bundle.ddl, sorted(bundle.tables))
    assert len(schemas.splitlines()) == 14 and schemas.startswith("analytics: ")
    assert len(tables.splitlines()) == 211
    assert any(line.startswith("core.currencies: ISO 4217") for line in tables.splitlines())
    known = frozenset(bundle.tables)
    sql = (
        "WITH t AS (SELECT id FROM core.tenants) SELECT * FROM t "
        "JOIN orders.customers c ON c.tenant_id = t.id, information_schema.columns"
    )
    assert tables_referenced(sql, known) == {"core.tenants", "orders.customers"}
    assert tables_referenced("SELEC nonsense (", known) == set()


# -- whole plugin runs ------------------------------------------------------------------------

PRIVATE = (
    TWO_QUESTIONS
    + """\
- id: v003
  question: How many tenants are there?
  gold_sql: SELECT count(*) AS tenants FROM core.tenants
  gold_tables: [core.tenants]
  shape: single
  retrieval: named
- id: v004
  question: Nothing at all.
  gold_sql: SELECT 1 WHERE false
  gold_tables: []
  shape: single
  retrieval: one_hop
  empty_probe: true
"""
)
GOLD = {
    "Which numbers from one to three are odd, in order?": (
        "v001",
        "SELECT x FROM (VALUES (1), (2), (3)) AS t(x) WHERE x % 2 = 1 ORDER BY x",
    ),
    "Pair each letter with its number.": (
        "v002",
        "SELECT * FROM (VALUES ('a', 1), ('b', 2)) AS t(letter, n)",
    ),
    "How many tenants are there?": ("v003", "SELECT count(*) AS tenants FROM core.tenants"),
    "Nothing at all.": ("v004", "SELECT 1 WHERE false"),
}
FAST = ["--heron-scale=tiny", "--heron-states=1", "-p", "no:cacheprovider"]


def _question_of(body: dict[str, Any]) -> str:
    """The benchmark question in a request (the agent's and raw-llm's first user message)."""
    users = [m["content"] for m in body["messages"] if m["role"] == "user"]
    return next(u for u in reversed(users) if u in GOLD) if users else ""


class Billing:
    """A responder answering each question with its gold SQL (or a wrong one for ``wrong``),
    billing a distinct, known number of tokens per call."""

    def __init__(self, wrong: tuple[str, ...] = ()) -> None:
        self.wrong = wrong
        self.billed: list[tuple[int, int]] = []

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        qid, gold = GOLD[_question_of(body)]
        sql = "SELECT 'wrong' AS answer" if qid in self.wrong else gold
        prompt = 1000 + sum(len(str(m.get("content") or "")) for m in body["messages"]) % 997
        done = 3 + int(qid[1:]) * 11
        self.billed.append((prompt, done))
        return completion(_sql(sql), prompt_tokens=prompt, completion_tokens=done)


@pytest.fixture
def heron_env(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private question folder; the inner runs share the real embedded server and states."""
    monkeypatch.setenv("HERON_CACHE_DIR", str(HERON_CACHE))
    folder = pytester.mkdir("private")
    (folder / "set.yaml").write_text(PRIVATE)
    return folder


def _doc(path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(path.read_text())
    return doc


def _by_id(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {q["id"]: q for q in doc["questions"]}


def test_raw_llm_run_scores_bills_exactly_and_replays_from_the_cache(
    pytester: pytest.Pytester, heron_env: Path
) -> None:
    billing = Billing(wrong=("v002",))
    with ChatStub(billing) as stub:
        args = [
            "--heron-adapter=raw-llm",
            f"--heron-endpoint={stub.url}",
            "--heron-model=m",
            f"--heron-questions={heron_env}",
            "--heron-cache=llmcache",
            *FAST,
        ]
        first = pytester.runpytest_subprocess(*args, "--heron-output=one.json")
        first.assert_outcomes(passed=3, failed=1)
        first.stdout.fnmatch_lines(
            ["*heron benchmark*", "adapter=raw-llm *strategy=zero-shot n=4*"]
        )
        assert len(stub.requests) == 4
        first.stdout.fnmatch_lines(["*   billed tokens prompt/completion: *"])
        # The same run offline, with no endpoint at all: the same answers from the cache, and
        # nothing sent. (An online run replaying from the cache: the samples test below.)
        offline = [a for a in args if not a.startswith("--heron-endpoint")]
        second = pytester.runpytest_subprocess(
            *offline, "--heron-offline", "--heron-output=two.json"
        )
        second.assert_outcomes(passed=3, failed=1)
        assert len(stub.requests) == 4  # the replaying run sent nothing
        second.stdout.fnmatch_lines(
            ["*tokens prompt/completion: *, replayed from the cache (all 4 calls; billed when*"]
        )
        assert all(r["max_tokens"] == 2048 for r in stub.requests)
    one, two = _doc(pytester.path / "one.json"), _doc(pytester.path / "two.json")
    assert one["metrics"]["ex_multistate"] == 75.0
    assert one["metrics"]["tokens_prompt"] == sum(p for p, _ in billing.billed)
    assert one["metrics"]["tokens_completion"] == sum(c for _, c in billing.billed)
    assert one["conditions"]["adapter_conditions"] == {"strategy": "zero-shot"}
    assert one["conditions"]["model"] == "m"
    assert one["conditions"]["endpoint"] == stub.url and one["conditions"]["max_tokens"] == 2048
    # the replay keeps the recorded latencies, so its figures are the recorded run's
    # (VES times the SQL again on each run: its noise is the only difference left)
    ves_part = 0.20 * (min(100.0, two["metrics"]["ves"]) - min(100.0, one["metrics"]["ves"]))
    assert two["metrics"]["grade"] - one["metrics"]["grade"] == pytest.approx(ves_part, abs=1e-3)
    assert (two["metrics"]["llm_calls"], two["metrics"]["replayed_calls"]) == (4, 4)
    assert (one["metrics"]["llm_calls"], one["metrics"]["replayed_calls"]) == (4, 0)
    for key in ("tokens_prompt", "tokens_completion", "ex_multistate"):
        assert two["metrics"][key] == one["metrics"][key]
    q1, q2 = _by_id(one), _by_id(two)
    assert q1["v003"]["tables_in_context"] is None
    assert (q1["v003"]["usage"]["calls"], q1["v003"]["usage"]["cached_calls"]) == (1, 0)
    assert (q2["v003"]["usage"]["calls"], q2["v003"]["usage"]["cached_calls"]) == (1, 1)
    for qid in q1:
        recorded = q1[qid]["usage"]["llm_ms"]
        assert q2[qid]["usage"]["replayed_ms"] == recorded == q2[qid]["usage"]["llm_ms"]
        assert q2[qid]["latency_s"] >= recorded / 1000
    assert q1["v002"]["error_kind"] is None and not q1["v002"]["correct"]

    assert two["metrics"]["tokens_prompt"] == sum(p for p, _ in billing.billed)
    # Offline with a model the cache has never seen: every question fails, saying why.
    miss = pytester.runpytest_subprocess(
        *[a for a in offline if a != "--heron-model=m"],
        "--heron-model=other",
        "--heron-offline",
        "--heron-output=miss.json",
    )
    miss.assert_outcomes(failed=4)
    v001 = _by_id(_doc(pytester.path / "miss.json"))["v001"]
    assert _doc(pytester.path / "miss.json")["metrics"]["grade"] == 0.0  # no answer: Grade 0
    assert v001["error_kind"] == "adapter_error"
    assert "no cached reply for question v001" in v001["error"]
    assert "llm-cache.sqlite3" in v001["error"]


def _erratic(calls: dict[str, int]) -> Callable[[dict[str, Any]], Any]:
    def respond(body: dict[str, Any]) -> Any:
        qid, gold = GOLD[_question_of(body)]
        calls[qid] = calls.get(qid, 0) + 1
        if qid == "v001":
            if calls[qid] == 1:
                return rate_limited(0)
            return completion(_sql(gold), prompt_tokens=40, completion_tokens=4)
        if qid == "v002":
            return Raw(200, b"<html>gateway hiccup</html>")
        if qid == "v003":
            return Raw(200, b'{"id": "x", "object": "chat.completion", "usage": {}}')
        return completion("", prompt_tokens=12)

    return respond


def test_rate_limits_retry_and_broken_replies_become_adapter_errors(
    pytester: pytest.Pytester, heron_env: Path
) -> None:
    calls: dict[str, int] = {}
    with ChatStub(_erratic(calls)) as stub:
        args = [
            "--heron-adapter=raw-llm",
            f"--heron-endpoint={stub.url}",
            "--heron-model=m",
            f"--heron-questions={heron_env}",
            "--heron-cache=llmcache",
            "--heron-output=e.json",
            *FAST,
        ]
        result = pytester.runpytest_subprocess(*args)
        result.assert_outcomes(passed=1, failed=3)
        assert calls == {"v001": 2, "v002": 1, "v003": 1, "v004": 1}
        out = _by_id(_doc(pytester.path / "e.json"))
        assert out["v001"]["correct"] and out["v001"]["usage"]["prompt_tokens"] == 40
        assert out["v004"]["usage"]["prompt_tokens"] == 12  # billed, though the reply was empty
        assert out["v002"]["usage"] is None  # nothing billed
        assert _doc(pytester.path / "e.json")["metrics"]["tokens_prompt"] == 40 + 12
        for qid, text in (
            ("v002", f"malformed response from the endpoint {stub.url}: not JSON: '<html>gat"),
            ("v003", "malformed response from the endpoint: no choices"),
            ("v004", "the model returned an empty reply"),
        ):
            assert out[qid]["error_kind"] == "adapter_error"
            assert text in out[qid]["error"], out[qid]["error"]
        result.stdout.fnmatch_lines(["*adapter_error: *no choices*"])
        pytester.runpytest_subprocess(*args).assert_outcomes(passed=1, failed=3)
        assert calls == {"v001": 2, "v002": 2, "v003": 2, "v004": 2}  # errors are not cached


def test_agent_run_under_xdist(pytester: pytest.Pytester, heron_env: Path) -> None:
    def respond(body: dict[str, Any]) -> dict[str, Any]:
        _, gold = GOLD[_question_of(body)]
        if body["messages"][-1]["role"] == "tool":
            return completion(None, tool_calls=[("results_ok", {})], prompt_tokens=7)
        return completion(None, tool_calls=[("run_sql_query", {"sql": gold})], prompt_tokens=5)

    with ChatStub(respond) as stub:
        result = pytester.runpytest_subprocess(
            "--heron-adapter=agent",
            f"--heron-endpoint={stub.url}",
            "--heron-model=m",
            f"--heron-questions={heron_env}",
            "--heron-cache=llmcache",
            "--heron-output=a.json",
            "-n",
            "2",
            *FAST,
        )
    result.assert_outcomes(passed=4)
    doc = _doc(pytester.path / "a.json")
    assert doc["metrics"]["ex_multistate"] == 100.0
    assert doc["metrics"]["tokens_prompt"] == 4 * (5 + 7) and len(stub.requests) == 8
    assert doc["conditions"]["adapter_conditions"] == {"agent_mode": "tools"}  # no strategy
    assert _by_id(doc)["v003"]["tables_in_context"] == ["core.tenants"]
    assert _by_id(doc)["v001"]["tables_in_context"] == []


def test_a_killed_run_resumes_without_repeating_calls_and_the_strategy_lands_in_results(
    pytester: pytest.Pytester, heron_env: Path
) -> None:
    """A run with a strategy is killed waiting for v003's reply; resumed under xdist, it asks
    only what was never answered, and the strategy is in the results and the header."""
    billing = Billing()
    victim: dict[str, subprocess.Popen[bytes]] = {}

    def respond(body: dict[str, Any]) -> dict[str, Any]:
        reply = billing(body)
        if GOLD[_question_of(body)][0] == "v003" and "proc" in victim:
            os.kill(victim.pop("proc").pid, signal.SIGKILL)  # dies waiting for this reply
            time.sleep(0.5)
        return reply

    with ChatStub(respond) as stub:
        args = [
            "--heron-adapter=raw-llm",
            f"--heron-endpoint={stub.url}",
            "--heron-model=m",
            "--heron-strategy=few-shot+self-correct",
            f"--heron-questions={heron_env}",
            "--heron-cache=llmcache",
            "--heron-output=r.json",
            *FAST,
        ]
        proc = pytester.popen(
            [sys.executable, "-m", "pytest", *args],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        victim["proc"] = proc
        assert proc.wait(timeout=300) == -signal.SIGKILL
        asked = [GOLD[_question_of(b)][0] for b in stub.requests]
        assert asked == ["v001", "v002", "v003"]
        assert not (pytester.path / "r.json").exists()
        resumed = pytester.runpytest_subprocess(*args, "--heron-resume", "-n", "2")
        # (an xdist controller does not count the questions its workers deselect: the requests
        # below show that only v003 and v004 were asked)
        outcomes = resumed.parseoutcomes()
        assert outcomes.get("passed") == 2 and "failed" not in outcomes, outcomes
        resumed.stdout.fnmatch_lines(["adapter=raw-llm *strategy=few-shot+self-correct *"])
        asked = [GOLD[_question_of(b)][0] for b in stub.requests]
        # v003 was never answered; the two workers ask v003 and v004 in either order
        assert asked[:3] == ["v001", "v002", "v003"] and sorted(asked[3:]) == ["v003", "v004"]
        assert all(len(r["messages"]) == 2 + 2 * len(FEW_SHOT) for r in stub.requests)
    doc = _doc(pytester.path / "r.json")
    assert doc["metrics"]["ex_multistate"] == 100.0 and len(doc["questions"]) == 4
    assert doc["conditions"]["adapter_conditions"] == {"strategy": "few-shot+self-correct"}
    killed = asked.index("v003")  # the killed call's reply never arrived
    counted = billing.billed[:killed] + billing.billed[killed + 1 :]
    assert doc["metrics"]["tokens_prompt"] == sum(p for p, _ in counted)


def test_samples_through_the_plugin_are_cached_per_sample(
    pytester: pytest.Pytester, heron_env: Path
) -> None:
    asked: dict[str, int] = {}

    def alternate(body: dict[str, Any]) -> dict[str, Any]:
        qid, gold = GOLD[_question_of(body)]
        asked[qid] = asked.get(qid, 0) + 1
        sql = gold if asked[qid] == 2 else "SELECT 'wrong' AS answer"  # only the 2nd call is right
        return completion(_sql(sql), prompt_tokens=100, completion_tokens=10)

    with ChatStub(alternate) as stub:
        args = [
            "--heron-adapter=raw-llm",
            f"--heron-endpoint={stub.url}",
            "--heron-model=m",
            "--heron-temperature=0.7",
            "--heron-samples=2",
            f"--heron-questions={heron_env}",
            "--heron-cache=llmcache",
            *FAST,
        ]
        pytester.runpytest_subprocess(*args, "--heron-output=one.json")
        assert len(stub.requests) == 8  # 4 questions x 2 samples, each its own call
        pytester.runpytest_subprocess(*args, "--heron-output=two.json")
        assert len(stub.requests) == 8  # both samples of every question replayed from the cache
    for name in ("one.json", "two.json"):
        doc = _doc(pytester.path / name)
        q = _by_id(doc)
        assert [s["correct"] for s in q["v001"]["samples"]] == [False, True]
        assert doc["metrics"]["ex_at_k"] == {"1": 50.0, "2": 100.0}
        assert doc["metrics"]["tokens_prompt"] == 800 and doc["conditions"]["samples"] == 2
