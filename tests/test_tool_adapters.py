"""The tool adapters (vanna, langchain, promptquery, din-sql, mac-sql) end to end against the
scripted chat endpoint on 127.0.0.1 and the real tiny state: each records the stub's SQL, the
tokens the stub billed and the tables it put in context."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from heron_adapters import schema_text
from heron_adapters.proxy import LLMProxy

from chat_stub import ChatStub, Raw, completion
from inner import Scenario, shared
from pytest_heron import sandbox
from pytest_heron.core.errors import AdapterError
from pytest_heron.core.paths import cache_dir
from pytest_heron.core.types import BenchmarkContext, Limits, LLMOptions, Prediction, Question
from pytest_heron.generate.spec import load_bundle
from pytest_heron.systems.registry import make_adapter
from pytest_heron.systems.retrieval.lexical import LexicalIndex

pytest_plugins = ["pytester"]
# pytester points HOME at a temporary folder; the plugin runs below share the session's embedded
# server and seeded states instead of building their own (the cache is safe between processes)
SHARED_CACHE = str(cache_dir())

Q = Question(
    id="t001",
    question="List the ISO codes of the currencies that have no minor units, in order.",
    shape="single",
    retrieval="named",
)
ANSWER = "SELECT code FROM core.currencies WHERE minor_units = 0 ORDER BY code"


def _ctx(state: Any, url: str, cache: Path, **options: Any) -> BenchmarkContext:
    bundle = load_bundle()
    return BenchmarkContext(
        dsn=state.reader_dsn,
        dialect="postgres",
        scale="tiny",
        seed=42,
        schema_ddl=bundle.ddl,
        tables=tuple(sorted(bundle.tables)),
        limits=Limits(timeout_s=60.0, statement_timeout_s=30.0),
        llm=LLMOptions(
            **{
                "endpoint": url,
                "model": "stub-model",
                "temperature": 0.0,
                "samples": 1,
                "cache_path": str(cache),
                "offline": False,
                **options,
            }
        ),
        data_version=bundle.data_version,
    )


def _billed(pred: Prediction) -> tuple[int, int, int]:
    assert pred.usage is not None
    return pred.usage["prompt_tokens"], pred.usage["completion_tokens"], pred.usage["calls"]


def _system(body: dict[str, Any]) -> str:
    return "\n".join(
        str(m.get("content") or "") for m in body["messages"] if m.get("role") == "system"
    )


def _user(body: dict[str, Any]) -> str:
    return "\n".join(
        str(m.get("content") or "") for m in body["messages"] if m.get("role") == "user"
    )


def _scores_like_gold(state: Any, pred: Prediction) -> None:
    got = sandbox.execute(state.reader_dsn, pred.sql, timeout_s=30)
    gold = sandbox.execute(state.reader_dsn, ANSWER, timeout_s=30)
    assert got.ok and gold.ok
    assert got.rows == gold.rows and got.rows


# -- pure helpers -------------------------------------------------------------------------------


def test_table_chunks_cover_every_table_with_its_comments() -> None:
    bundle = load_bundle()
    chunks = schema_text.table_chunks(bundle.ddl)
    assert sorted(chunks) == sorted(bundle.tables)
    cur = chunks["core.currencies"]
    assert cur.startswith("CREATE TABLE core.currencies (")
    assert "COMMENT ON TABLE core.currencies IS" in cur
    assert "COMMENT ON COLUMN core.currencies.minor_units IS" in cur
    assert "core.countries" not in cur
    assert all(text.count("CREATE TABLE") == 1 for text in chunks.values())
    comments = schema_text.table_comments(bundle.ddl)
    assert sorted(comments) == sorted(bundle.tables)
    assert comments["core.currencies"].startswith("ISO 4217 currencies")


def test_lexical_index_is_deterministic_and_ranks_the_named_table() -> None:
    chunks = schema_text.table_chunks(load_bundle().ddl)
    names = list(chunks)
    ix = LexicalIndex(chunks.values())
    top = [names[i] for i in ix.top("fx rates exchange rate of the day between currencies", 10)]
    assert "core.fx_rates" in top[:3]
    assert top == [
        names[i]
        for i in LexicalIndex(chunks.values()).top(
            "fx rates exchange rate of the day between currencies", 10
        )
    ]
    assert ix.top("zzzz qqqq", 5) == []


def test_proxy_keeps_quiet_when_the_tool_gives_up_and_classifies_out_of_time(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A tool that gives up on a slow request leaves no broken-pipe traceback behind (it would
    show under the next question), and the question's running out of time is a timeout."""
    import threading
    import time

    import openai

    from pytest_heron.core.errors import OutOfTime
    from pytest_heron.systems.llm.client import ChatClient, LLMConfig, ResponseCache

    answered = threading.Event()

    def slow(_body: dict[str, Any]) -> dict[str, Any]:
        time.sleep(1.0)
        answered.set()
        return completion("a", prompt_tokens=5)

    with ChatStub(slow) as stub:
        config = LLMConfig(endpoint=stub.url, model="m", max_attempts=1)
        proxy = LLMProxy(ChatClient(config, adapter="t", cache=ResponseCache(tmp_path / "c")))
        try:
            impatient = openai.OpenAI(base_url=proxy.url, api_key="k", max_retries=0, timeout=0.2)
            proxy.record("q1", timeout_s=30)
            with pytest.raises(openai.APITimeoutError):
                impatient.chat.completions.create(
                    model="m", messages=[{"role": "user", "content": "x"}]
                )
            assert answered.wait(20)
            time.sleep(0.5)  # the proxy writes its late reply to the closed connection
            late = proxy.record("q2", timeout_s=0.3)
            client = openai.OpenAI(base_url=proxy.url, api_key="k", max_retries=0)
            with pytest.raises(openai.BadRequestError, match="LLMTimeout"):
                client.chat.completions.create(
                    model="m", messages=[{"role": "user", "content": "y"}]
                )
        finally:
            proxy.close()
    err = capfd.readouterr().err
    assert "Traceback" not in err and "BrokenPipe" not in err, err
    with pytest.raises(OutOfTime, match="tool: the LLM call failed: LLMTimeout") as info:
        late.check("tool")
    assert isinstance(info.value, TimeoutError)


def test_proxy_goes_through_the_llm_layer_cache_and_meter(tmp_path: Path) -> None:
    import openai

    from pytest_heron.systems.llm.client import ChatClient, LLMConfig, ResponseCache

    script = [completion("a", prompt_tokens=5, completion_tokens=1)] * 2
    with ChatStub(script) as stub:
        config = LLMConfig(endpoint=stub.url, model="m", max_attempts=1)
        llm = ChatClient(config, adapter="t", cache=ResponseCache(tmp_path / "c.sqlite3"))
        proxy = LLMProxy(llm)
        try:
            client = openai.OpenAI(base_url=proxy.url, api_key="k", max_retries=0)
            rec = proxy.record("q1")
            for _ in range(2):  # the second identical call is replayed from the cache
                client.chat.completions.create(
                    model="m", messages=[{"role": "user", "content": "x"}], seed=0
                )
            other = proxy.record("q2")
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
            with pytest.raises(openai.BadRequestError, match="script exhausted"):
                client.chat.completions.create(
                    model="m", messages=[{"role": "user", "content": "y"}]
                )
            with pytest.raises(openai.BadRequestError, match="streaming"):
                client.chat.completions.create(model="m", messages=[], stream=True)
        finally:
            proxy.close()
    assert rec.usage()["prompt_tokens"] == 10 and rec.usage()["calls"] == 2
    assert rec.usage()["cached_calls"] == 1
    assert [m for m, _ in rec.chats()] == [[{"role": "user", "content": "x"}]] * 2
    assert len(stub.requests) == 3  # q2 is a different question: not a cache hit
    assert stub.requests[0]["seed"] == 0  # other request fields pass through
    with pytest.raises(AdapterError, match="script exhausted"):
        other.check("tool")


# -- vanna --------------------------------------------------------------------------------------


def test_vanna_trains_on_the_schema_and_records_the_stub_sql(
    tiny_state: Any, tmp_path: Path
) -> None:
    reply = completion(f"```sql\n{ANSWER};\n```", prompt_tokens=1200, completion_tokens=30)
    with ChatStub([reply]) as stub:
        adapter = make_adapter("vanna")
        adapter.prepare(_ctx(tiny_state, stub.url, tmp_path / "llm.sqlite3"))
        pred = adapter.generate(Q)
    assert pred.sql.rstrip(";") == ANSWER
    assert _billed(pred) == (1200, 30, 1)
    body = stub.requests[0]
    assert body["model"] == "stub-model" and body["temperature"] == 0.0
    system = _system(body)
    assert system.startswith("You are a PostgreSQL expert")
    # the tables in context are exactly those whose DDL (with comments) Vanna put in the prompt
    assert pred.tables_in_context and len(pred.tables_in_context) <= 10
    for table in pred.tables_in_context:
        assert f"CREATE TABLE {table} (" in system
        assert f"COMMENT ON TABLE {table} IS" in system
    assert "core.currencies" in pred.tables_in_context
    assert "===Additional Context" in system and "Schema core:" in system
    assert _user(body).endswith(Q.question)
    _scores_like_gold(tiny_state, pred)


def test_vanna_intermediate_sql_runs_in_the_sandbox(tiny_state: Any, tmp_path: Path) -> None:
    script = [
        completion("-- intermediate_sql\nSELECT DISTINCT region FROM core.countries;"),
        completion(f"{ANSWER};", prompt_tokens=7, completion_tokens=3),
    ]
    with ChatStub(script) as stub:
        adapter = make_adapter("vanna")
        adapter.prepare(_ctx(tiny_state, stub.url, tmp_path / "llm.sqlite3"))
        pred = adapter.generate(Q)
    assert pred.sql.rstrip(";") == ANSWER
    assert len(stub.requests) == 2
    second = _system(stub.requests[1])
    assert "results of the intermediate SQL query" in second
    assert "EMEA" in second  # real rows from the read-only state
    assert pred.usage is not None and pred.usage["calls"] == 2


# -- langchain ----------------------------------------------------------------------------------


def _langchain_responder(body: dict[str, Any]) -> dict[str, Any]:
    if "You choose the database tables" in _system(body):
        return completion(
            "core.currencies\ncore.countries\nnot.a_table", prompt_tokens=3000, completion_tokens=9
        )
    return completion(f"SQLQuery: {ANSWER}", prompt_tokens=900, completion_tokens=20)


def test_langchain_chain_selects_tables_and_records_the_stub_sql(
    tiny_state: Any, tmp_path: Path
) -> None:
    with ChatStub(_langchain_responder) as stub:
        adapter = make_adapter("langchain")
        adapter.prepare(_ctx(tiny_state, stub.url, tmp_path / "llm.sqlite3"))
        pred = adapter.generate(Q)
    assert pred.sql == ANSWER
    assert pred.tables_in_context == ["core.countries", "core.currencies"]
    assert _billed(pred) == (3900, 29, 2)
    select, query = stub.requests
    listing = _system(select)
    assert "core.currencies: ISO 4217 currencies" in listing
    assert listing.count("\n") > 200  # every table is offered to the selection step
    prompt = "\n".join(str(m["content"]) for m in query["messages"])
    assert "You are a PostgreSQL expert" in prompt
    assert "CREATE TABLE core.currencies" in prompt and "CREATE TABLE core.countries" in prompt
    assert "CREATE TABLE core.fx_rates" not in prompt
    assert "3 rows from currencies table" in prompt  # LangChain's sample rows, from the state
    assert "Column Comments" in prompt
    assert query["stop"] == ["\nSQLResult:"]
    assert "query for at most 1000 results" in prompt  # k raised from the default 5
    _scores_like_gold(tiny_state, pred)


def test_langchain_selection_naming_no_table_is_an_adapter_error(
    tiny_state: Any, tmp_path: Path
) -> None:
    with ChatStub([completion("I do not know.")]) as stub:
        adapter = make_adapter("langchain")
        adapter.prepare(_ctx(tiny_state, stub.url, tmp_path / "llm.sqlite3"))
        with pytest.raises(AdapterError, match="named no known table"):
            adapter.generate(Q)


# -- promptquery --------------------------------------------------------------------------------


def _promptquery_responder(generated: list[str]) -> Any:
    def respond(body: dict[str, Any]) -> dict[str, Any]:
        system, user = _system(body), _user(body)
        if system.startswith("You select database tables"):
            return completion('["currencies", "countries"]', prompt_tokens=500, completion_tokens=8)
        if user.startswith("The query below failed"):
            return completion(f"```sql\n{ANSWER}\n```", prompt_tokens=300, completion_tokens=12)
        return completion(f"```sql\n{generated[0]}\n```", prompt_tokens=700, completion_tokens=15)

    return respond


def test_promptquery_cli_one_shot_records_sql_tables_and_usage(
    tiny_state: Any, tmp_path: Path
) -> None:
    with ChatStub(_promptquery_responder([ANSWER])) as stub:
        adapter = make_adapter("promptquery")
        adapter.prepare(_ctx(tiny_state, stub.url, tmp_path / "llm.sqlite3"))
        pred = adapter.generate(Q)
    assert pred.sql == ANSWER
    kinds = [_system(b).split("\n")[0] for b in stub.requests]
    assert len(kinds) == 2 and kinds[0].startswith("You select database tables")
    assert _billed(pred) == (1200, 23, 2)
    assert all(b["model"] == "stub-model" for b in stub.requests)
    assert pred.tables_in_context is not None
    assert {"core.currencies", "core.countries"} <= set(pred.tables_in_context)
    assert len(pred.tables_in_context) <= 25  # PromptQuery's cap after FK expansion
    assert pred.trace["exit_status"] == 0
    _scores_like_gold(tiny_state, pred)


def test_promptquery_repair_round_gives_the_repaired_sql(tiny_state: Any, tmp_path: Path) -> None:
    broken = "SELECT no_such_column FROM core.currencies"
    with ChatStub(_promptquery_responder([broken])) as stub:
        adapter = make_adapter("promptquery")
        adapter.prepare(_ctx(tiny_state, stub.url, tmp_path / "llm.sqlite3"))
        pred = adapter.generate(Q)
    assert pred.sql == ANSWER
    assert len(stub.requests) == 3
    assert "no_such_column" in _user(stub.requests[2])  # the database's error went back
    assert pred.usage is not None and pred.usage["calls"] == 3


def test_promptquery_llm_failure_is_an_adapter_error_with_stderr(
    tiny_state: Any, tmp_path: Path
) -> None:
    refused = Raw(400, b'{"error": {"message": "model not loaded"}}')
    with ChatStub(lambda body: refused) as stub:
        adapter = make_adapter("promptquery")
        adapter.prepare(_ctx(tiny_state, stub.url, tmp_path / "llm.sqlite3"))
        with pytest.raises(
            AdapterError, match=r"status 1: the LLM call failed: .*model not loaded"
        ):
            adapter.generate(Q)
    assert len(stub.requests) == 2  # the selector (PromptQuery falls back to TF-IDF), the SQL


# -- din-sql ------------------------------------------------------------------------------------


def _din_responder(label: str, generated: str, corrected: str) -> Any:
    def respond(body: dict[str, Any]) -> dict[str, Any]:
        user = _user(body)
        if "Schema_links:" in user and "Think step by step" in user:
            text = (
                "The question asks for currency codes.\n"
                "Schema_links: [core.currencies.code, core.currencies.minor_units, 0]"
            )
            return completion(text, prompt_tokens=9000, completion_tokens=40)
        if "Classify the SQL query" in user:
            return completion(f"One table.\nLabel: {label}", prompt_tokens=800, completion_tokens=5)
        if "SQL written for it" in user:
            return completion(f"```sql\n{corrected}\n```", prompt_tokens=900, completion_tokens=20)
        return completion(
            f"Plan...\n```sql\n{generated}\n```", prompt_tokens=850, completion_tokens=25
        )

    return respond


@pytest.mark.parametrize("label", ["EASY", "NON-NESTED", "NESTED"])
def test_din_sql_four_stages(tiny_state: Any, tmp_path: Path, label: str) -> None:
    generated = "SELECT code FROM core.currencies WHERE minor_units = 0"
    with ChatStub(_din_responder(label, generated, ANSWER)) as stub:
        adapter = make_adapter("din-sql")
        adapter.prepare(_ctx(tiny_state, stub.url, tmp_path / "llm.sqlite3"))
        pred = adapter.generate(Q)
    assert pred.sql == ANSWER  # the self-corrected query
    assert pred.tables_in_context == ["core.currencies"]
    assert _billed(pred) == (11550, 90, 4)
    link, _classify, gen, fix = stub.requests
    listing = _system(link)
    assert "core.currencies -- ISO 4217 currencies the platform can price and bill in." in listing
    assert listing.count("  columns: ") == 211
    assert "core.countries.default_currency_code = core.currencies.code" in listing  # an FK
    gen_system = _system(gen)
    assert "COMMENT ON COLUMN core.currencies.minor_units" in gen_system
    assert "CREATE TABLE core.countries" not in gen_system  # only the linked tables
    prompt = _user(gen)
    expected = {
        "EASY": "single table",
        "NON-NESTED": "intermediate representation",
        "NESTED": "Sub-questions",
    }[label]
    assert expected in prompt
    assert generated in _user(fix)
    assert pred.trace["class"] == label
    _scores_like_gold(tiny_state, pred)


def test_din_sql_replays_from_the_cache_and_offline(tiny_state: Any, tmp_path: Path) -> None:
    cache = tmp_path / "llm.sqlite3"
    with ChatStub(_din_responder("EASY", ANSWER, ANSWER)) as stub:
        first = make_adapter("din-sql")
        first.prepare(_ctx(tiny_state, stub.url, cache))
        one = first.generate(Q)
        again = make_adapter("din-sql")
        again.prepare(_ctx(tiny_state, stub.url, cache, offline=True))
        two = again.generate(Q)
    assert len(stub.requests) == 4  # the second run sent nothing
    assert two.sql == one.sql and _billed(two) == _billed(one)
    assert two.usage is not None and two.usage["cached_calls"] == 4
    other = Question(**{**Q.__dict__, "id": "t002"})
    with pytest.raises(AdapterError, match="no cached reply for question t002"):
        again.generate(other)


# -- mac-sql ------------------------------------------------------------------------------------


def _mac_responder(selection: str, decomposed: str, refined: list[str]) -> Any:
    def respond(body: dict[str, Any]) -> dict[str, Any]:
        user = _user(body)
        if "database administrator" in _system(body):
            return completion(selection, prompt_tokens=20000, completion_tokens=30)
        if "Decompose the question" in user:
            text = (
                "Sub question 1: currencies\nSQL\n```sql\nSELECT code FROM core.currencies\n```"
                f"\n\nSub question 2: all\nSQL\n```sql\n{decomposed}\n```"
            )
            return completion(text, prompt_tokens=1500, completion_tokens=60)
        return completion(
            f"```sql\n{refined.pop(0)}\n```", prompt_tokens=1600, completion_tokens=20
        )

    return respond


def test_mac_sql_selector_decomposer_and_refiner_on_error(tiny_state: Any, tmp_path: Path) -> None:
    selection = '{"core.currencies": ["code", "minor_units"], "core.countries": "drop_all"}'
    broken = "SELECT code FROM core.currencies WHERE minor_unit = 0 ORDER BY code"
    with ChatStub(_mac_responder(selection, broken, [ANSWER])) as stub:
        adapter = make_adapter("mac-sql")
        adapter.prepare(_ctx(tiny_state, stub.url, tmp_path / "llm.sqlite3"))
        pred = adapter.generate(Q)
    assert pred.sql == ANSWER
    assert pred.tables_in_context == ["core.currencies"]
    assert _billed(pred) == (23100, 110, 3)
    selector, decomposer, refiner = stub.requests
    assert "# Table: core.currencies -- ISO 4217 currencies" in _system(selector)
    assert _system(selector).count("# Table: ") == 211
    pruned = _system(decomposer)
    assert "(minor_units, integer NOT NULL CHECK" in pruned and "(symbol," not in pruned
    assert "minor_unit" in _user(refiner) and "does not exist" in _user(refiner)
    assert [r["sql"] for r in pred.trace["refiner"]] == [broken]
    _scores_like_gold(tiny_state, pred)


def test_mac_sql_refines_empty_results_at_most_three_times(tiny_state: Any, tmp_path: Path) -> None:
    empty = "SELECT code FROM core.currencies WHERE minor_units = 9"
    variants = [f"{empty} AND {i} = {i}" for i in range(1, 5)]
    with ChatStub(_mac_responder("not json at all", empty, list(variants))) as stub:
        adapter = make_adapter("mac-sql")
        adapter.prepare(_ctx(tiny_state, stub.url, tmp_path / "llm.sqlite3"))
        pred = adapter.generate(Q)
    assert len(stub.requests) == 2 + 3  # selector, decomposer, three refinements
    assert pred.sql == variants[2]
    assert all("returned no rows" in r["outcome"] for r in pred.trace["refiner"])
    # the selector's reply kept nothing: BM25's best tables stand in
    assert pred.tables_in_context and "core.currencies" in pred.tables_in_context


# -- plugin runs --------------------------------------------------------------------------------

PRIVATE = """\
- id: p001
  question: List the ISO codes of the currencies that have no minor units, in order.
  gold_sql: SELECT code FROM core.currencies WHERE minor_units = 0 ORDER BY code
  gold_tables: [core.currencies]
  shape: single
  retrieval: named
- id: p002
  question: How many countries does each sales region have?
  gold_sql: >-
    SELECT region, count(*) AS n FROM core.countries GROUP BY region ORDER BY region
  gold_tables: [core.countries]
  shape: single
  retrieval: named
"""
GOLD = {
    "List the ISO codes of the currencies that have no minor units, in order.": (
        "SELECT code FROM core.currencies WHERE minor_units = 0 ORDER BY code",
        ["core.currencies"],
    ),
    "How many countries does each sales region have?": (
        "SELECT region, count(*) AS n FROM core.countries GROUP BY region ORDER BY region",
        ["core.countries"],
    ),
}
PER_CALL = (100, 10)  # tokens every stub reply bills


def universal(body: dict[str, Any]) -> dict[str, Any]:
    """Answers every stage of every tool adapter with the gold SQL of the question asked."""
    text = "\n".join(str(m.get("content") or "") for m in body["messages"])
    sql, tables = next(v for k, v in GOLD.items() if k in text)
    system, user = _system(body), _user(body)
    if system.startswith("You choose the database tables"):  # langchain's selection
        reply = "\n".join(tables)
    elif system.startswith("You are a PostgreSQL expert. Given an input"):  # langchain's chain
        reply = f"SQLQuery: {sql}"
    elif system.startswith("You select database tables"):  # promptquery's selector
        reply = json.dumps([t.split(".")[1] for t in tables])
    elif "Schema_links:" in user and "Think step by step" in user:  # din-sql linking
        reply = f"Schema_links: [{', '.join(tables)}]"
    elif "Classify the SQL query" in user:  # din-sql classification
        reply = "Label: EASY"
    elif "database administrator" in system:  # mac-sql selector
        reply = json.dumps({t: "keep_all" for t in tables})
    else:
        reply = f"```sql\n{sql}\n```"
    return completion(reply, prompt_tokens=PER_CALL[0], completion_tokens=PER_CALL[1])


def _promptquery_runs(scenario: Scenario) -> dict[str, pytest.RunResult]:
    """promptquery through the plugin against the stub (``one.json``), then the same run offline
    with no endpoint at all (``two.json``); the stub's request counts after each run are kept as
    the ``sent`` entry's lines."""
    scenario.write("private/set.yaml", PRIVATE)
    common_args = [
        "--heron-adapter=promptquery",
        f"--heron-questions={scenario.path / 'private'}",
        "--heron-model=stub-model",
        f"--heron-cache={scenario.path / 'llmcache'}",
        "--heron-scale=tiny",
        "--heron-states=1",
        "-p",
        "no:cacheprovider",
    ]
    with ChatStub(universal) as stub:
        first = scenario.run(
            *common_args, f"--heron-endpoint={stub.url}", "--heron-output=one.json"
        )
        sent = len(stub.requests)
        second = scenario.run(*common_args, "--heron-offline", "--heron-output=two.json")
        counts = [str(sent), str(len(stub.requests))]
    return {"first": first, "second": second, "sent": pytest.RunResult(0, counts, [], 0.0)}


@pytest.fixture
def promptquery_runs(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Scenario, dict[str, pytest.RunResult]]:
    return shared(tmp_path_factory, "promptquery", _promptquery_runs)


def _check_tool_run(result: pytest.RunResult, doc: dict[str, Any], name: str, calls: int) -> None:
    result.assert_outcomes(passed=2)
    assert doc["conditions"]["adapter"] == name
    m = doc["metrics"]
    assert m["ex1"] == 100.0 and m["errors"] == 0
    assert calls >= 2
    assert (m["tokens_prompt"], m["tokens_completion"]) == (
        PER_CALL[0] * calls,
        PER_CALL[1] * calls,
    )
    by_id = {q["id"]: q for q in doc["questions"]}
    for qid, (sql, tables) in zip(("p001", "p002"), GOLD.values(), strict=True):
        assert by_id[qid]["pred_sql"].rstrip(";") == sql
        assert set(tables) <= set(by_id[qid]["tables_in_context"])
    assert m["set_recall"] == 100.0


@pytest.mark.parametrize("name", ["vanna", "langchain", "din-sql", "mac-sql"])
def test_plugin_run_scores_each_tool_adapter(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """promptquery's run is the first of ``promptquery_runs`` (the next test)."""
    monkeypatch.setenv("HERON_CACHE_DIR", SHARED_CACHE)
    folder = pytester.mkdir("private")
    (folder / "set.yaml").write_text(PRIVATE)
    with ChatStub(universal) as stub:
        result = pytester.runpytest_subprocess(
            f"--heron-adapter={name}",
            f"--heron-questions={folder}",
            f"--heron-endpoint={stub.url}",
            "--heron-model=stub-model",
            f"--heron-cache={pytester.path / 'llmcache'}",
            "--heron-output=out.json",
            "--heron-scale=tiny",
            "--heron-states=1",
            "-p",
            "no:cacheprovider",
        )
    doc = json.loads((pytester.path / "out.json").read_text())
    _check_tool_run(result, doc, name, len(stub.requests))


def test_promptquery_scores_and_replays_offline_through_the_cache(
    promptquery_runs: tuple[Scenario, dict[str, pytest.RunResult]],
) -> None:
    scenario, runs = promptquery_runs
    sent, after = (int(n) for n in runs["sent"].outlines)
    one, two = (json.loads((scenario.path / f).read_text()) for f in ("one.json", "two.json"))
    _check_tool_run(runs["first"], one, "promptquery", sent)
    runs["second"].assert_outcomes(passed=2)
    assert sent == 4 and after == sent  # the offline run asked nothing
    assert [q["pred_sql"] for q in one["questions"]] == [q["pred_sql"] for q in two["questions"]]
    assert two["metrics"]["tokens_prompt"] == one["metrics"]["tokens_prompt"] == 400
    assert all(q["usage"]["cached_calls"] == 2 for q in two["questions"])


MISSING = {"vanna": "vanna", "langchain": "langchain_classic", "promptquery": "promptquery"}
BLOCKER = """
import sys

class Block:  # the tools' packages cannot be imported, as on a machine without the extras
    def find_spec(self, fullname, path=None, target=None):
        if fullname.split(".")[0] in {blocked!r}:
            raise ImportError(f"No module named {{fullname!r}}")
        return None

sys.meta_path.insert(0, Block())
"""
PREPARE_ALL = """
import json
from pytest_heron.systems.registry import make_adapter
from pytest_heron.core.types import BenchmarkContext, LLMOptions

ctx = BenchmarkContext(dsn="", dialect="postgres", scale="tiny", seed=42, schema_ddl="",
                       tables=(), llm=LLMOptions(endpoint="http://127.0.0.1:9/v1", model="m"))
out = {{}}
for name in {names!r}:
    try:
        make_adapter(name).prepare(ctx)
        out[name] = "prepared"
    except Exception as exc:
        out[name] = f"{{type(exc).__name__}}: {{exc}}"
print(json.dumps(out))
"""


def test_a_missing_extra_fails_prepare_with_the_pip_command() -> None:
    import subprocess
    import sys

    code = BLOCKER.format(blocked=sorted(MISSING.values())) + PREPARE_ALL.format(
        names=sorted(MISSING)
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    out = json.loads(done.stdout.strip().splitlines()[-1])
    for name, module in MISSING.items():
        assert out[name].startswith(f"AdapterError: the {name} adapter needs the optional "), out
        assert f"dependency {module!r}" in out[name] or f"dependency '{module}." in out[name]
        assert out[name].endswith(f"install it with: pip install 'pytest-heron[{name}]'")


def test_a_missing_extra_is_one_usage_error_before_the_first_question(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HERON_CACHE_DIR", SHARED_CACHE)
    folder = pytester.mkdir("private")
    (folder / "set.yaml").write_text(PRIVATE)
    # sitecustomize (the folder is on PYTHONPATH): the pytest process cannot import vanna
    (pytester.path / "sitecustomize.py").write_text(BLOCKER.format(blocked=["vanna"]))
    result = pytester.runpytest_subprocess(
        "--heron-adapter=vanna",
        f"--heron-questions={folder}",
        "--heron-endpoint=http://127.0.0.1:9/v1",
        "--heron-model=m",
        "--heron-output=out.json",
        "--heron-scale=tiny",
        "--heron-states=1",
        "-p",
        "no:cacheprovider",
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert not (pytester.path / "out.json").exists()
    err = result.stderr.str()
    assert "the vanna adapter needs the 'vanna' extra (missing: vanna)" in err
    assert "pip install 'pytest-heron[vanna]' (in a clone of pytest-heron itself" in err


def test_doctests_of_the_tool_modules() -> None:
    import doctest
    import importlib

    for module in ("schema_text", "langchain_adapter", "promptquery_adapter", "din_sql", "mac_sql"):
        result = doctest.testmod(importlib.import_module(f"heron_adapters.{module}"))
        assert result.attempted > 0 and result.failed == 0, module


def test_the_readme_adapter_example_runs(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HERON_CACHE_DIR", SHARED_CACHE)
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    section = readme.split("## Adding an adapter", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    assert code.startswith("# mytool_adapter.py") and len(code.splitlines()) <= 30
    pytester.makepyfile(mytool_adapter=code)
    folder = pytester.mkdir("private")
    (folder / "set.yaml").write_text(PRIVATE)
    with ChatStub(universal) as stub:
        result = pytester.runpytest_subprocess(
            "--heron-adapter=mytool_adapter:MyTool",
            f"--heron-questions={folder}",
            f"--heron-endpoint={stub.url}",
            "--heron-model=stub-model",
            f"--heron-cache={pytester.path / 'llmcache'}",
            "--heron-output=out.json",
            "--heron-scale=tiny",
            "--heron-states=1",
            "-p",
            "no:cacheprovider",
        )
    result.assert_outcomes(passed=2)
    doc = json.loads((pytester.path / "out.json").read_text())
    assert doc["metrics"]["ex1"] == 100.0
    assert doc["metrics"]["tokens_prompt"] == PER_CALL[0] * 2
    assert "CREATE TABLE core.currencies" in _system(stub.requests[0])


def test_din_sql_failure_keeps_the_billed_usage(tiny_state: Any, tmp_path: Path) -> None:
    with ChatStub(_din_responder("EASY", "", ANSWER)) as stub:
        adapter = make_adapter("din-sql")
        adapter.prepare(_ctx(tiny_state, stub.url, tmp_path / "llm.sqlite3"))
        with pytest.raises(AdapterError, match="generation step returned no SQL") as info:
            adapter.generate(Q)
    assert len(stub.requests) == 3
    usage = info.value.usage  # type: ignore[attr-defined]
    assert (usage["prompt_tokens"], usage["calls"]) == (9000 + 800 + 850, 3)


LLM_ADAPTERS = ("agent", "din-sql", "mac-sql", "raw-llm")


def test_without_the_openai_sdk_llm_adapters_fail_prepare_with_the_pip_command() -> None:
    import subprocess
    import sys

    code = BLOCKER.format(blocked=["openai"]) + PREPARE_ALL.format(names=[*LLM_ADAPTERS, "gold"])
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out.pop("gold") == "prepared"  # the core runs without the SDK
    assert out == {
        name: f"AdapterError: the {name} adapter needs the OpenAI SDK (package 'openai'); "
        "install it with: pip install 'pytest-heron[llm]'"
        for name in LLM_ADAPTERS
    }
