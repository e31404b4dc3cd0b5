"""The runner page in headless Chromium: the state loads with the seeded checksums, and three
questions run against a scripted OpenAI-compatible endpoint on 127.0.0.1 (with CORS headers, as
a provider sends them) with the right verdicts, token totals and results file.

Chromium is driven with Playwright's Python package (the ``test`` extra) using the browser at
/usr/bin/chromium (or ``HERON_CHROMIUM``); a missing browser fails the tests with how to get it.
"""

from __future__ import annotations

import functools
import http.server
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chat_stub import ChatStub, completion
from guard_cases import CASES, case_sql, mismatches
from pytest_heron import sandbox
from pytest_heron.board.checks import check_folder
from pytest_heron.board.protocol import parse_protocol
from pytest_heron.board.submission import About, write_submission
from pytest_heron.browser import build_runner
from pytest_heron.compare import compare, order_keys
from pytest_heron.database.checksum import table_checksums, total_line
from pytest_heron.dataset import load_questions
from pytest_heron.generate import load_bundle
from pytest_heron.results.document import read_results
from test_report_render import find_chromium

LOAD_TIMEOUT_MS = 15 * 60 * 1000
FLAGS = [  # as the machine notes advise for a closed network: no background connections
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium() -> str:
    """A Chromium executable (test_report_render.find_chromium): a missing one is a failure
    naming the package, never a skip and never an install."""
    return find_chromium()


class _Files(http.server.SimpleHTTPRequestHandler):
    extensions_map = {  # noqa: RUF012  (the base class's own attribute, overridden)
        **http.server.SimpleHTTPRequestHandler.extensions_map,
        ".js": "text/javascript",
        ".wasm": "application/wasm",
        ".json": "application/json",
    }

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The runner folder, built and served on 127.0.0.1; yields the page's URL."""
    folder = tmp_path_factory.mktemp("runner") / "site"
    build_runner(folder)
    handler = functools.partial(_Files, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/runner.html"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def page(site: str) -> Iterator[Any]:
    """The page, loaded: the state is in PGlite and the checksums are on the page."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("the browser tests need Playwright: pip install -e '.[test]'")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium(), args=FLAGS)
        context = browser.new_context(accept_downloads=True)
        tab = context.new_page()
        errors: list[str] = []
        tab.on("pageerror", lambda exc: errors.append(str(exc)))
        tab.goto(site)
        tab.wait_for_selector("#checksums[data-done]", state="attached", timeout=LOAD_TIMEOUT_MS)
        assert errors == []
        yield tab
        context.close()
        browser.close()


def test_the_page_holds_the_seeded_state(page: Any, tiny_state: Any) -> None:
    shown = [line.split("\t") for line in page.text_content("#checksums").splitlines()]
    schemas = [m.name for m in load_bundle().modules]
    seeded = list(table_checksums(tiny_state.admin_dsn, schemas))
    assert shown == [[n, str(r), s] for n, r, s in [*seeded, total_line(seeded)]]
    assert page.text_content("#load-status") == "loaded"


def test_the_page_guard_decides_as_the_case_file_says(page: Any) -> None:
    """The guard the page loaded (libpg-query's WebAssembly parser, in Chromium) on every shared
    case of tests/data/guard_cases.json, with the Python guard's reasons (tests/guard_cases.py)."""
    verdicts = page.evaluate(
        """async (text) => {
            const { checkStatement } = await import("./assets/guard.js");  // the page's instance
            const out = [];
            for (const sql of JSON.parse(text)) out.push(await checkStatement(sql));
            return out;
        }""",
        json.dumps([case_sql(case) for case in CASES]),  # ASCII: lone surrogates travel escaped
    )
    assert mismatches(verdicts) == {}


WRONG = "SELECT currency_code, orders + 1 AS orders FROM ({gold}) AS g"
SLOW = "SELECT pg_sleep(20)"


def _script(questions: dict[str, Any]) -> Any:
    """Replies by question and step: q001 straight to gold, q002 a wrong answer, q004 a detour
    (a rejected write, a statement stopped by its limit, results_ok too early, a text reply)
    before gold. Each reply bills 100 + step prompt tokens and 10 completion tokens."""
    by_text = {q.question: q for q in questions.values()}

    def respond(body: dict[str, Any]) -> dict[str, Any]:
        q = by_text[next(m["content"] for m in body["messages"] if m["role"] == "user")]
        step = sum(1 for m in body["messages"] if m["role"] == "assistant")
        bill = {"prompt_tokens": 100 + step, "completion_tokens": 10}
        if q.id == "q001":
            plan: list[Any] = [("run_sql_query", {"sql": q.gold_sql}), ("results_ok", {})]
        elif q.id == "q002":
            wrong = WRONG.format(gold=q.gold_sql.strip().rstrip(";"))
            plan = [("run_sql_query", {"sql": wrong}), ("results_ok", {})]
        else:
            plan = [
                ("run_sql_query", {"sql": "DELETE FROM core.tenants"}),
                ("run_sql_query", {"sql": SLOW}),
                ("results_ok", {}),
                "Let me think about it.",
                ("run_sql_query", {"sql": q.gold_sql}),
                ("results_ok", {}),
            ]
        move = plan[step]
        if isinstance(move, str):
            return completion(move, **bill)
        return completion(None, tool_calls=[move], **bill)

    return respond


def test_three_questions_end_to_end(page: Any, tiny_state: Any, tmp_path: Path) -> None:
    questions = {q.id: q for q in load_questions()}
    picked = ["q001", "q002", "q004"]
    with ChatStub(_script(questions), cors=True) as stub:
        page.fill("#endpoint", stub.url)
        page.fill("#key", "sk-test-key")
        page.fill("#model", "stub-model")
        page.fill("#timeout", "600")
        page.fill("#statement-timeout", "2")
        page.select_option("#tag-filter", "shape_single")
        for qid in picked:
            page.select_option("#tag-filter", "")
            page.check(f"#questions tr[data-id={qid}] .pick")
        page.click("#run")
        page.wait_for_selector("#run-status[data-done]", state="attached", timeout=LOAD_TIMEOUT_MS)
        downloads: list[Any] = []
        page.on("download", lambda d: downloads.append(d))
        with page.expect_download():
            page.click("#download")
        page.wait_for_timeout(500)
        requests, headers, preflights = stub.requests, stub.headers, stub.preflights

    # the verdicts on the page, and the wrong answer's counterexample as Python words it
    rows = {tr.get_attribute("data-id"): tr for tr in page.query_selector_all("#results tbody tr")}
    assert sorted(rows) == picked
    verdict = {qid: rows[qid].query_selector(".verdict").text_content() for qid in picked}
    assert verdict == {"q001": "correct", "q002": "wrong", "q004": "correct"}
    q2 = questions["q002"]
    gold = sandbox.execute(tiny_state.reader_dsn, q2.gold_sql, timeout_s=30)
    pred = sandbox.execute(
        tiny_state.reader_dsn, WRONG.format(gold=q2.gold_sql.strip().rstrip(";")), timeout_s=30
    )
    python = compare(gold.rows, pred.rows, order=order_keys(q2.gold_sql))
    assert not python.equal
    assert rows["q002"].query_selector(".details .reason").text_content() == python.reason
    wrong_sql = WRONG.format(gold=q2.gold_sql.strip().rstrip(";"))
    assert rows["q002"].query_selector(".details .sql").text_content() == wrong_sql  # and its SQL

    # tokens: 2 + 2 + 6 calls, each billing 100 + step prompt and 10 completion tokens
    prompt = (100 + 101) * 2 + sum(100 + s for s in range(6))
    totals = page.query_selector("#totals")
    assert totals.get_attribute("data-prompt-tokens") == str(prompt)
    assert totals.get_attribute("data-completion-tokens") == str(10 * 10)
    assert totals.get_attribute("data-correct") == "2"
    assert len(requests) == 10 and preflights >= 1
    assert {h["authorization"] for h in headers} == {"Bearer sk-test-key"}

    # the tool results the model saw: the guard's refusal and the stopped statement
    detour = [m["content"] for m in requests[-1]["messages"] if m["role"] == "tool"]
    assert "rejected" in detour[0] and "DELETE" in detour[0]
    assert detour[1].startswith('{"error": "timeout') or '"error":"timeout' in detour[1]
    assert "No query has run successfully yet" in detour[2]
    assert requests[0]["tools"][0]["function"]["name"] == "run_sql_query"
    assert requests[0]["messages"][0]["content"].startswith("You are an expert PostgreSQL 16")

    # the key stays in memory: nothing in the page's storage
    stored = page.evaluate("() => [localStorage.length, sessionStorage.length, document.cookie]")
    assert stored == [0, 0, ""]

    # the results file: read by heron, marked not board-eligible, the same figures
    assert len(downloads) == 2
    files = {}
    for d in downloads:
        target = tmp_path / d.suggested_filename
        d.save_as(target)
        files[d.suggested_filename] = target
    results_path = files["heron-browser-results.json"]
    raw = json.loads(results_path.read_text(encoding="utf-8"))
    assert raw["board_eligible"] is False
    results = read_results(results_path)
    assert results.conditions.scale == "tiny" and results.conditions.seeds == (42,)
    assert results.metrics.tokens_prompt == prompt
    assert results.metrics.tokens_completion == 100
    assert [(o.id, o.correct) for o in results.outcomes] == [
        ("q001", True),
        ("q002", False),
        ("q004", True),
    ]
    # heron submit makes it a folder the verifier reads; with three of the 100 questions its
    # only problem is the missing ones
    protocol_path = files["heron-browser-protocol.yaml"]
    protocol = parse_protocol(protocol_path.read_text(encoding="utf-8"), str(protocol_path))
    about = About("browser", "1", "the agent loop in the browser", "nobody", "https://example.org")
    folder = write_submission(results, "browser-run", tmp_path / "submissions", about=about)
    checked, problems = check_folder(folder, protocol, load_questions())
    assert checked is None
    assert problems == [
        "predictions.jsonl: 97 question(s) missing: "
        + ", ".join(sorted(set(questions) - set(picked))[:10])
        + " and 87 more"
    ]


def test_an_endpoint_without_cors_headers_is_named_with_the_stubs_switch(page: Any) -> None:
    """A server that sends no CORS headers (``heron stub-llm`` without ``--cors``): the browser
    says only "Failed to fetch"; the page says what to check and the stub's switch."""
    with ChatStub(lambda _body: completion("SELECT 1"), cors=False) as stub:
        page.fill("#endpoint", stub.url)
        page.fill("#model", "stub-model")
        page.select_option("#tag-filter", "")
        page.evaluate(
            "() => { for (const b of document.querySelectorAll('#questions .pick')) "
            "b.checked = false; document.getElementById('run-status')"
            ".removeAttribute('data-done'); }"
        )
        page.check("#questions tr[data-id=q001] .pick")
        page.click("#run")
        page.wait_for_selector("#run-status[data-done]", state="attached", timeout=LOAD_TIMEOUT_MS)
        asked = len(stub.requests)
    row = page.query_selector("#results tbody tr[data-id=q001]:last-child")
    assert row.query_selector(".verdict").text_content() == "error"
    said = row.query_selector(".details").text_content()
    assert "could not be reached" in said and "`heron stub-llm --cors` does" in said, said
    assert asked == 0  # the browser never sent the request: its preflight was refused


def test_a_full_run_is_accepted_by_the_verifier(page: Any, tmp_path: Path) -> None:
    """All 100 questions answered with gold by the endpoint: the downloaded file, made a
    submission by ``heron submit``, is accepted by the verifier under its own tiny protocol."""
    questions = {q.question: q for q in load_questions()}

    def gold(body: dict[str, Any]) -> dict[str, Any]:
        q = questions[next(m["content"] for m in body["messages"] if m["role"] == "user")]
        step = sum(1 for m in body["messages"] if m["role"] == "assistant")
        move = [("run_sql_query", {"sql": q.gold_sql}), ("results_ok", {})][step]
        return completion(None, tool_calls=[move], prompt_tokens=50, completion_tokens=5)

    with ChatStub(gold, cors=True) as stub:
        page.fill("#endpoint", stub.url)
        page.fill("#model", "stub-model")  # this test's own settings: no other test's order
        page.fill("#statement-timeout", "30")
        page.select_option("#tag-filter", "")
        page.click("#select-shown")
        assert page.text_content("#selected-count") == "100 of 100 selected"
        page.evaluate("() => document.getElementById('run-status').removeAttribute('data-done')")
        page.click("#run")
        page.wait_for_selector("#run-status[data-done]", state="attached", timeout=LOAD_TIMEOUT_MS)
        downloads: list[Any] = []
        page.on("download", lambda d: downloads.append(d))
        with page.expect_download():
            page.click("#download")
        page.wait_for_timeout(500)
    assert page.get_attribute("#totals", "data-correct") == "100"
    files = {}
    for d in downloads[-2:]:
        files[d.suggested_filename] = tmp_path / d.suggested_filename
        d.save_as(files[d.suggested_filename])
    results = read_results(files["heron-browser-results.json"])
    protocol_path = files["heron-browser-protocol.yaml"]
    protocol = parse_protocol(protocol_path.read_text(encoding="utf-8"), str(protocol_path))
    about = About(
        "browser", "1", "gold through the browser runner", "nobody", "https://example.org"
    )
    folder = write_submission(results, "browser-full", tmp_path / "submissions", about=about)
    # the page answered with gold's SQL: the verifier's gold-share policy (a line left out of the
    # run digest) is lifted here, as this test is about the page's run being reproduced
    with protocol_path.open("a", encoding="utf-8") as f:
        f.write("max_gold_share_unreplayed: 1.0\n")
    # the command, in a process of its own (as test_submissions.py runs it): the verifier stops
    # the server it started, which must not be this session's
    done = subprocess.run(
        [
            *(sys.executable, "-m", "pytest_heron.cli", "verify-submission", str(folder)),
            *("--protocol", str(protocol_path), "--hidden-seed", "43", "--no-replay"),
        ],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    verdict = json.loads((folder / "verdict.json").read_text(encoding="utf-8"))
    assert verdict["accepted"] is True and verdict["reasons"] == []
    assert verdict["reproduced"]["ex_multistate"] == 100.0
    assert protocol.scale == "tiny" and protocol.seeds == (42,)
