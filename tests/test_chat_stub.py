"""The scripted chat endpoint the LLM tests rely on behaves like a provider, over real HTTP."""

from __future__ import annotations

import openai
import pytest

from chat_stub import ChatStub, Raw, completion, rate_limited


def test_scripted_replies_reach_the_openai_client_with_usage() -> None:
    script = [completion("SELECT 1", prompt_tokens=11, completion_tokens=3)]
    with ChatStub(script) as stub:
        client = openai.OpenAI(base_url=stub.url, api_key="test", max_retries=0)
        reply = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}]
        )
    assert reply.choices[0].message.content == "SELECT 1"
    assert reply.usage is not None and reply.usage.prompt_tokens == 11
    assert stub.requests[0]["messages"] == [{"role": "user", "content": "hi"}]


def test_tool_calls_and_errors() -> None:
    script = [
        rate_limited(),
        completion(None, tool_calls=[("run_sql_query", {"sql": "SELECT 2"})]),
        Raw(200, b"not json"),
    ]
    with ChatStub(script) as stub:
        client = openai.OpenAI(base_url=stub.url, api_key="test", max_retries=0)
        with pytest.raises(openai.RateLimitError):
            client.chat.completions.create(model="m", messages=[])
        reply = client.chat.completions.create(model="m", messages=[])
        call = reply.choices[0].message.tool_calls[0]  # type: ignore[index]
        assert call.function.name == "run_sql_query"  # type: ignore[union-attr]
        with pytest.raises((openai.APIError, ValueError)):  # the SDK lets JSONDecodeError out
            client.chat.completions.create(model="m", messages=[])
    assert len(stub.requests) == 3


def _preflight(url: str) -> tuple[int, dict[str, str]]:
    import urllib.error
    import urllib.request

    ask = urllib.request.Request(
        url + "/chat/completions",
        method="OPTIONS",
        headers={"Origin": "http://127.0.0.1:8000", "Access-Control-Request-Method": "POST"},
    )
    try:
        with urllib.request.urlopen(ask, timeout=30) as reply:
            return reply.status, {k.lower(): v for k, v in reply.headers.items()}
    except urllib.error.HTTPError as refused:
        return refused.code, {k.lower(): v for k, v in refused.headers.items()}


@pytest.mark.parametrize("cors", [True, False])
def test_heron_stub_llm_cors_answers_the_browsers_preflight(cors: bool) -> None:
    """``heron stub-llm --cors`` (the real command, in a process of its own) lets the browser
    runner's page call it; without ``--cors`` a preflight is refused, as before."""
    import subprocess
    import sys

    args = [sys.executable, "-m", "pytest_heron.cli", "stub-llm", "--port", "0"]
    proc = subprocess.Popen(
        [*args, *(["--cors"] if cors else [])], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        url = first.split("serving ", 1)[1].split(" ", 1)[0]
        assert ("CORS on" in first) is cors
        status, headers = _preflight(url)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    if cors:
        assert status == 204 and headers["access-control-allow-origin"] == "*"
        assert "POST" in headers["access-control-allow-methods"]
    else:
        assert status == 405 and "access-control-allow-origin" not in headers
