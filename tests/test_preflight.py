"""A misconfigured run stops before its first question with one usage error (exit status 4)
that names what is wrong and what to do, and writes no results file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from chat_stub import ChatStub, completion
from pytest_heron.core.errors import ConfigError
from pytest_heron.systems import preflight

pytest_plugins = ["pytester"]

PRIVATE = """\
- id: v001
  question: Which numbers from one to three are odd, in order?
  gold_sql: SELECT x FROM (VALUES (1), (2), (3)) AS t(x) WHERE x % 2 = 1 ORDER BY x
  gold_tables: []
  shape: single
  retrieval: named
- id: v002
  question: Nothing at all.
  gold_sql: SELECT 1 WHERE false
  gold_tables: []
  shape: single
  retrieval: one_hop
  empty_probe: true
"""
FAST = ["--heron-scale=tiny", "--heron-states=1", "-p", "no:cacheprovider"]


def _private(pytester: pytest.Pytester, text: str = PRIVATE) -> Path:
    folder = pytester.mkdir("private")
    (folder / "set.yaml").write_text(text)
    return folder


def _refused(pytester: pytest.Pytester, *args: str, subprocess: bool = False) -> str:
    """Run with ``args`` and --heron-output; assert a usage error and no results file; the
    error text. In-process unless ``subprocess``: these errors come before any server is started
    (an in-process session must not start the embedded server, which this process shares)."""
    pytester.syspathinsert()  # adapters written into the folder import, as in a subprocess
    run = pytester.runpytest_subprocess if subprocess else pytester.runpytest
    result = run(*args, "--heron-output=out.json", *FAST)
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    err = result.stderr.str()
    assert "Traceback" not in err
    assert "passed" not in result.stdout.str() and "failed" not in result.stdout.str()
    assert not (pytester.path / "out.json").exists()
    assert not (pytester.path / "out.json.jsonl").exists()
    return err


def test_raw_llm_without_model(pytester: pytest.Pytester) -> None:
    err = _refused(pytester, "--heron-adapter=raw-llm", "--heron-endpoint=http://127.0.0.1:9/v1")
    assert "--heron-adapter=raw-llm needs --heron-model" in err


def test_llm_adapter_without_endpoint(pytester: pytest.Pytester) -> None:
    err = _refused(pytester, "--heron-adapter=agent", "--heron-model=m")
    assert "--heron-adapter=agent needs --heron-endpoint" in err
    assert "--heron-offline" in err


THIRD_PARTY = """
class Needy:
    name = "needy"
    requires = ("heron_no_such_sdk", "json")
    def prepare(self, ctx): pass
    def generate(self, q): return "SELECT 1"

class Asks:
    name = "asks"
    needs_llm = True
    def prepare(self, ctx): pass
    def generate(self, q): return "SELECT 1"
"""


def test_a_third_party_adapter_declares_what_it_needs(pytester: pytest.Pytester) -> None:
    """``requires`` (lazily imported modules) and ``needs_llm`` are checked before the first
    question, like the built-in adapters' extras and options."""
    pytester.makepyfile(tool_adapters=THIRD_PARTY)
    err = _refused(pytester, "--heron-adapter=tool_adapters:Needy")
    assert "needs modules that are not installed: heron_no_such_sdk;" in err  # json is there
    err = _refused(pytester, "--heron-adapter=tool_adapters:Asks")
    assert "--heron-adapter=tool_adapters:Asks needs --heron-model" in err
    err = _refused(
        pytester,
        "--heron-adapter=tool_adapters:Asks",
        "--heron-model=m",
        "--heron-endpoint=http://127.0.0.1:9/v1",
    )
    assert "--heron-endpoint http://127.0.0.1:9/v1 cannot be reached" in err


def test_refused_endpoint_is_named(pytester: pytest.Pytester) -> None:
    err = _refused(
        pytester,
        "--heron-adapter=raw-llm",
        "--heron-endpoint=http://127.0.0.1:9/v1",
        "--heron-model=m",
        f"--heron-questions={_private(pytester)}",
    )
    assert "--heron-endpoint http://127.0.0.1:9/v1 cannot be reached" in err
    assert "GET http://127.0.0.1:9/v1/models" in err and "Start the server or fix the URL" in err


def test_model_the_endpoint_does_not_serve(pytester: pytest.Pytester) -> None:
    with ChatStub([], models=["qwen2.5-coder:14b", "llama3.1:8b"]) as stub:
        err = _refused(
            pytester,
            "--heron-adapter=din-sql",
            f"--heron-endpoint={stub.url}",
            "--heron-model=gpt-4o-mini",
            f"--heron-questions={_private(pytester)}",
        )
        assert stub.requests == []  # not one chat request was sent
    assert f"--heron-model 'gpt-4o-mini' is not served by {stub.url}" in err
    assert "lists: llama3.1:8b, qwen2.5-coder:14b" in err


def test_server_without_model_list_is_noted_and_the_run_goes_on(
    pytester: pytest.Pytester,
) -> None:
    answer = completion("```sql\nSELECT 1 WHERE false\n```", prompt_tokens=3)
    with ChatStub(lambda _body: answer, models=None) as stub:
        result = pytester.runpytest_subprocess(
            "--heron-adapter=raw-llm",
            f"--heron-endpoint={stub.url}",
            "--heron-model=anything",
            f"--heron-questions={_private(pytester)}",
            "--heron-cache=llmcache",
            *FAST,
        )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            f"heron: {stub.url}/models answered HTTP 404 (no model list): the model name "
            "'anything' is not checked"
        ]
    )


def test_a_served_model_is_said(pytester: pytest.Pytester) -> None:
    with ChatStub(lambda _body: completion("SELECT 1 WHERE false")) as stub:
        result = pytester.runpytest_subprocess(
            "--heron-adapter=raw-llm",
            f"--heron-endpoint={stub.url}",
            "--heron-model=stub-model",
            f"--heron-questions={_private(pytester)}",
            "--heron-cache=llmcache",
            *FAST,
        )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([f"heron: endpoint {stub.url} serves stub-model"])


def test_a_rejected_key_is_a_usage_error() -> None:
    def fetch(url: str, headers: dict[str, str]) -> tuple[int, bytes]:
        assert headers["Authorization"] == "Bearer sk-wrong"
        return 401, b""

    with pytest.raises(ConfigError, match=r"refused the key .*HTTP 401.*HERON_API_KEY"):
        preflight.check_endpoint("https://api.example/v1", "m", "sk-wrong", fetch=fetch)


@pytest.mark.parametrize(
    ("endpoint", "hinted"),
    [
        ("http://127.0.0.1:8089/v1", True),
        ("http://localhost:8089/v1/", True),
        ("http://127.0.0.1:9000/v1", False),
    ],
)
def test_an_unreachable_stub_address_names_heron_stub_llm(endpoint: str, hinted: bool) -> None:
    def refused(url: str, headers: dict[str, str]) -> tuple[int, bytes]:
        raise ConnectionRefusedError(111, "Connection refused")

    with pytest.raises(ConfigError, match="cannot be reached") as err:
        preflight.check_endpoint(endpoint, "heron-stub", "k", fetch=refused)
    assert ("`heron stub-llm` serves one there" in str(err.value)) is hinted


@pytest.mark.parametrize(
    ("body", "verdict"),
    [
        (b'{"data": [{"id": "m"}]}', None),
        (b'{"data": [{"id": "loaded.gguf", "owned_by": "llamacpp"}]}', "does not name its"),
        (b"<html>", "no readable model list"),
        (b'{"data": []}', "does not name its"),
    ],
)
def test_what_a_model_list_allows(body: bytes, verdict: str | None) -> None:
    note = preflight.check_endpoint("http://h/v1", "m", "k", fetch=lambda _u, _h: (200, body))
    assert note is None if verdict is None else (note is not None and verdict in note)


def test_output_that_is_a_folder(pytester: pytest.Pytester) -> None:
    pytester.mkdir("taken")
    result = pytester.runpytest(  # in-process: refused before any server starts
        "--heron-adapter=gold", "--heron-output=taken", f"--heron-questions={_private(pytester)}"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--heron-output: " in result.stderr.str() and "is a folder" in result.stderr.str()


def test_report_folder_that_is_a_file(pytester: pytest.Pytester) -> None:
    (pytester.path / "report").write_text("not a folder")
    err = _refused(
        pytester,
        "--heron-adapter=gold",
        "--heron-report=report",
        f"--heron-questions={_private(pytester)}",
    )
    assert "--heron-report: " in err and "is a file; it must be a folder" in err


def test_gold_that_does_not_run_on_the_first_state(pytester: pytest.Pytester) -> None:
    broken = PRIVATE.replace("SELECT 1 WHERE false", "SELECT nope FROM core.no_such_table")
    folder = _private(pytester, broken)
    err = _refused(pytester, "--heron-adapter=gold", f"--heron-questions={folder}", subprocess=True)
    assert "the gold SQL of 1 question(s) does not run: v002 on seed 42:" in err
    assert "no_such_table" in err


# -- --heron-adapter=file ------------------------------------------------------------------------


def _lines(*records: Any) -> str:
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records)


GOOD = _lines(
    {"id": "v001", "sql": "SELECT x FROM (VALUES (1), (3)) AS t(x) ORDER BY x"},
    {"id": "v002", "sql": "SELECT 0", "tables": ["core.tenants"]},
)


@pytest.mark.parametrize("xdist", [[], ["-n", "2"]])
def test_a_predictions_file_is_scored_and_its_digest_recorded(
    pytester: pytest.Pytester, xdist: list[str]
) -> None:
    import hashlib

    (pytester.path / "preds.jsonl").write_text(GOOD)
    result = pytester.runpytest_subprocess(
        "--heron-adapter=file",
        "--heron-predictions=preds.jsonl",
        f"--heron-questions={_private(pytester)}",
        "--heron-output=out.json",
        *xdist,
        *FAST,
    )
    result.assert_outcomes(passed=1, failed=1)
    doc = json.loads((pytester.path / "out.json").read_text())
    digest = hashlib.sha256(GOOD.encode()).hexdigest()
    assert doc["conditions"]["adapter_conditions"] == {
        "predictions": "preds.jsonl",
        "predictions_sha256": digest,
    }
    by_id = {q["id"]: q for q in doc["questions"]}
    assert by_id["v001"]["correct"] is True and by_id["v002"]["correct"] is False
    assert by_id["v002"]["tables_in_context"] == ["core.tenants"]
    result.stdout.fnmatch_lines([f"adapter=file *predictions_sha256={digest}*"])


def test_a_bad_predictions_file_names_every_line(pytester: pytest.Pytester) -> None:
    (pytester.path / "preds.jsonl").write_text(
        _lines(
            {"id": "v001", "sql": "SELECT 1"},
            "{not json",
            {"id": "q999", "sql": "SELECT 1"},
            {"id": "v001", "sql": "SELECT 2"},
            ["v001"],
            {"id": "v001", "sql": 7, "extra": 1},
        )
    )
    err = _refused(
        pytester,
        "--heron-adapter=file",
        "--heron-predictions=preds.jsonl",
        f"--heron-questions={_private(pytester)}",
    )
    for text in (
        "preds.jsonl: 6 problem(s):",
        "line 2: not JSON (",
        "line 3: unknown question id 'q999'",
        "line 4: 'v001' again (first on line 1)",
        "line 5: expected a JSON object with 'id' and 'sql'",
        "line 6: unknown field 'extra'",
        "no prediction for 1 question(s): v002",
    ):
        assert text in err, err


def test_file_adapter_needs_its_file(pytester: pytest.Pytester) -> None:
    err = _refused(pytester, "--heron-adapter=file")
    assert "--heron-adapter=file needs --heron-predictions=FILE.jsonl" in err
    err = _refused(pytester, "--heron-adapter=file", "--heron-predictions=absent.jsonl")
    assert "absent.jsonl: no such file" in err
    err = _refused(pytester, "--heron-adapter=gold", "--heron-predictions=absent.jsonl")
    assert "--heron-predictions is read only with --heron-adapter=file" in err
