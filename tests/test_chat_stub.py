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
