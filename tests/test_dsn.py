"""The DSN in every form (issue 44, item 5): ``BenchmarkContext.dsn`` (libpq key=value),
``dsn_url`` and ``dsn_parts``, each checked against libpq's own parser (through psycopg) and by
connecting to the real tiny state with psycopg, psycopg2 and SQLAlchemy as docs/adapters.md
shows; and ``heron dsn``, whose DSN reads a state and cannot change it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import psycopg2
import pytest
import sqlalchemy
from hypothesis import given
from hypothesis import strategies as st
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from chat_stub import ChatStub, completion
from pytest_heron.core.conninfo import ConninfoError, parts, url
from pytest_heron.core.types import BenchmarkContext, LLMOptions, Question
from pytest_heron.database.server import Server

COUNT = "SELECT count(*) FROM core.currencies"
words = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1
)
hosts = st.sampled_from(["/tmp/pg sock", "/var/run/postgresql", "localhost", "db.example", "::1"])
conninfos = st.fixed_dictionaries(
    {"host": hosts, "dbname": words},
    optional={
        "port": st.integers(1, 65535).map(str),
        "user": words,
        "password": words,
        "application_name": words,
        "client_encoding": st.sampled_from(["utf8", "latin1"]),
    },
)


@given(conninfos)
def test_parts_read_what_libpq_reads(values: dict[str, str]) -> None:
    dsn = make_conninfo(**values)
    assert parts(dsn) == conninfo_to_dict(dsn) == values


@given(conninfos)
def test_the_url_is_the_same_connection_to_libpq(values: dict[str, str]) -> None:
    dsn = make_conninfo(**values)
    assert conninfo_to_dict(url(dsn)) == values


def test_a_socket_directory_goes_in_the_query() -> None:
    got = url("host=/tmp/pg port=5432 dbname=heron user=reader password='a b'")
    assert got == "postgresql://reader:a%20b@/heron?host=/tmp/pg&port=5432"
    assert url("host=db port=1 dbname=d", "postgresql+psycopg2").startswith(
        "postgresql+psycopg2://db:1/d"
    )
    with pytest.raises(ConninfoError):
        parts("host=/tmp/pg dbname")
    with pytest.raises(ConninfoError):
        parts("password='unterminated")


def _ctx(dsn: str) -> BenchmarkContext:
    return BenchmarkContext(dsn, "postgres", "tiny", 42, "", ())


def test_every_form_connects_with_every_driver(tiny_state: Any) -> None:
    """What docs/adapters.md shows, against the tiny state as its reader role."""
    ctx = _ctx(tiny_state.reader_dsn)
    counts = []
    with psycopg.connect(ctx.dsn) as conn:  # psycopg (3): the libpq string
        counts.append(conn.execute(COUNT).fetchone())
    with psycopg.connect(ctx.dsn_url) as conn:  # ... or the URL
        counts.append(conn.execute(COUNT).fetchone())
    for connect in (
        lambda: psycopg2.connect(**ctx.dsn_parts),
        lambda: psycopg2.connect(ctx.dsn_url),
    ):
        conn2 = connect()
        try:
            with conn2.cursor() as cur:
                cur.execute(COUNT)
                counts.append(cur.fetchone())
        finally:
            conn2.close()
    for driver in ("psycopg2", "psycopg"):
        engine = sqlalchemy.create_engine(
            ctx.dsn_url.replace("postgresql://", f"postgresql+{driver}://", 1)
        )
        try:
            with engine.connect() as conn3:
                counts.append(tuple(conn3.execute(sqlalchemy.text(COUNT)).one()))
        finally:
            engine.dispose()
    assert len(counts) == 6 and len(set(counts)) == 1 and counts[0][0] > 0  # type: ignore[index]
    assert ctx.dsn_parts["dbname"] == tiny_state.database


def _heron(*args: str, **kwargs: Any) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "pytest_heron.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kwargs,
    )


def _read_only(dsn: str) -> None:
    """The DSN reads the state and cannot change it."""
    with psycopg.connect(dsn) as conn:
        assert conn.execute(COUNT).fetchone()[0] > 0  # type: ignore[index]
    with psycopg.connect(dsn) as conn, pytest.raises(psycopg.Error):
        conn.execute("CREATE TABLE public.mine (x int)")
    with psycopg.connect(dsn) as conn, pytest.raises(psycopg.Error):
        conn.execute("DELETE FROM core.currencies")


def test_heron_dsn_prints_a_read_only_dsn_in_each_form(server: Server, tiny_state: Any) -> None:
    base = ("dsn", "--scale", "tiny", "--seed", "42", "--dsn", server.admin_dsn)
    printed = {}
    for form in ("libpq", "url", "parts"):
        done = _heron(*base, "--form", form)
        out, err = done.communicate(timeout=300)
        assert done.returncode == 0, err
        printed[form] = out.strip()
    assert parts(printed["libpq"]) == json.loads(printed["parts"])
    assert conninfo_to_dict(printed["url"]) == conninfo_to_dict(printed["libpq"])
    assert conninfo_to_dict(printed["libpq"])["dbname"] == tiny_state.database
    _read_only(printed["libpq"])
    _read_only(printed["url"])


def test_heron_dsn_keeps_the_embedded_server_up_until_interrupted(tiny_state: Any) -> None:
    """On the embedded server the command stays in the foreground (the server stops with its
    last user), prints the DSN at once and exits 0 on Ctrl-C."""
    proc = _heron("dsn", "--scale", "tiny", "--seed", "42", env=dict(os.environ))
    try:
        assert proc.stdout is not None
        dsn = proc.stdout.readline().strip()
        _read_only(dsn)
        assert proc.poll() is None  # still serving
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "Ctrl-C stops it" in err


# -- a tool that owns its HTTP client, pointed at the proxy by OPENAI_BASE_URL ------------------

DOCS = Path(__file__).resolve().parents[1] / "docs" / "adapters.md"


class SdkTool:
    """The "tool" of the docs' example: the OpenAI SDK, configured by the environment alone."""

    def __init__(self, dsn_url: str) -> None:
        import openai

        self.dsn_url = dsn_url
        self.client = openai.OpenAI(max_retries=0)  # OPENAI_BASE_URL, OPENAI_API_KEY

    def ask(self, question: str) -> str:
        reply = self.client.chat.completions.create(
            model="anything", messages=[{"role": "user", "content": question}]
        )
        return str(reply.choices[0].message.content)


def _documented_class() -> type:
    block = next(b for b in DOCS.read_text().split("```python\n")[1:] if "class OwnClientTool" in b)
    namespace: dict[str, Any] = {"make_the_tool": SdkTool}
    exec(compile(block.split("```", 1)[0], str(DOCS), "exec"), namespace)
    return namespace["OwnClientTool"]  # type: ignore[no-any-return]


def test_the_documented_own_client_tool_goes_through_the_proxy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    reply = completion("SELECT 42 AS answer", prompt_tokens=11, completion_tokens=3)
    with ChatStub([reply]) as stub:
        ctx = BenchmarkContext(
            "host=/nowhere dbname=d",
            "postgres",
            "tiny",
            42,
            "",
            (),
            llm=LLMOptions(endpoint=stub.url, model="stub-model", cache_path=str(tmp_path / "c")),
        )
        tool = _documented_class()()
        tool.prepare(ctx)
        try:
            assert os.environ["OPENAI_BASE_URL"] == tool.proxy.url != stub.url
            pred = tool.generate(Question("q1", "What is the answer?"))
        finally:
            tool.proxy.close()
    assert pred.sql == "SELECT 42 AS answer"
    assert pred.usage is not None and (pred.usage["prompt_tokens"], pred.usage["calls"]) == (11, 1)
    assert stub.requests[0]["messages"][-1]["content"] == "What is the answer?"
    assert tool.tool.dsn_url == "postgresql:///d?host=/nowhere"
