"""The system under test never sees gold and runs out of the scoring process (issue 21).

Hostile adapters run through the real plugin (tiny scale, one state, a private question set),
each with ``-n 0`` and ``-n 2``; the verdicts are read from the results file. The scorer patch,
the gold read, the four escapes and the volatile answer are one adapter's four runs, shared with
tests/test_adapter_isolation.py (tests/hostile_scenario.py); a prepare that hangs, the ``cli``
adapter's background child and ``--heron-in-process`` have runs of their own
(``runpytest_subprocess``). A few fast tests drive :class:`ChildSystem` directly.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest

import hostile_scenario
from inner import TWO_QUESTIONS
from pytest_heron.core.errors import AdapterError, AdapterLookupError, AdapterTimeout
from pytest_heron.core.types import BenchmarkContext, Limits, Prediction
from pytest_heron.dataset.questions import GoldQuestion
from pytest_heron.systems.answerers import open_system

pytest_plugins = ["pytester"]

PRIVATE = (
    TWO_QUESTIONS
    + """\
- id: v003
  question: Nothing at all.
  gold_sql: SELECT 1 WHERE false
  gold_tables: []
  shape: single
  retrieval: one_hop
"""
)
GOLD = {  # what an honest adapter would answer (it is never told: this is the test's copy)
    "v001": "SELECT x FROM (VALUES (1), (2), (3)) AS t(x) WHERE x % 2 = 1 ORDER BY x",
    "v002": "SELECT * FROM (VALUES ('a', 1), ('b', 2)) AS t(letter, n)",
    "v003": "SELECT 1 WHERE false",
}
WORKERS = pytest.mark.parametrize("workers", ["0", "2"], ids=["n0", "n2"])
HANG_GUARD_S = 600  # pytester gives up on a run that hangs (a guard, not a timing assert)


def _run(pytester: pytest.Pytester, adapter: str, workers: str, *extra: str) -> dict[str, Any]:
    """Run the benchmark with ``adapter``; the results file (which must exist), with the
    terminal output under the key ``_stdout``."""
    folder = pytester.path / "private"
    if not folder.exists():
        folder.mkdir()
        (folder / "set.yaml").write_text(PRIVATE)
    out = pytester.path / f"out-{uuid.uuid4().hex[:8]}.json"
    result = pytester.runpytest_subprocess(
        f"--heron-adapter={adapter}",
        f"--heron-questions={folder}",
        f"--heron-output={out}",
        "--heron-scale=tiny",
        "--heron-states=1",
        "-n",
        workers,
        "-p",
        "no:cacheprovider",
        *extra,
        timeout=HANG_GUARD_S,
    )
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED), result.stdout.str()
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    doc: dict[str, Any] = json.loads(out.read_text())
    assert sorted(q["id"] for q in doc["questions"]) == ["v001", "v002", "v003"]
    doc["_stdout"] = result.stdout.str()
    return doc


def _by_id(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {q["id"]: q for q in doc["questions"]}


def _adapter(pytester: pytest.Pytester, name: str, body: str) -> None:
    source = f"GOLD = {GOLD!r}\n" + textwrap.dedent(body)
    (pytester.path / f"{name}.py").write_text(source)


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for its reaper does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _dead(pid_file: Path) -> None:
    """Every pid the adapter wrote to ``pid_file`` is gone."""
    pids = [int(p) for p in pid_file.read_text().split()]
    assert pids
    assert [pid for pid in pids if _alive(pid)] == []


CHEAT = """
import pytest_heron.compare
import pytest_heron.scoring.score

class Equal:
    equal = True
    reason = None

def always_equal(*args, **kwargs):
    return Equal()

class Cheat:
    name = "cheat"
    def prepare(self, ctx):
        pytest_heron.compare.compare = always_equal          # the scorer's comparator...
        pytest_heron.scoring.score.compare.compare = always_equal  # ...wherever it is read
    def generate(self, q):
        if q.id == "v002":
            return q.gold_sql                                 # the gold is not there to read
        return "SELECT 41 AS x"                               # wrong everywhere
"""

# -- the hostile adapter's runs (tests/hostile_scenario.py: unisolated, sandboxed, jailed)

HOSTILE_RUNS = pytest.mark.parametrize("key", hostile_scenario.run_keys())


def _hostile(hostile_runs: tuple[Any, dict[str, Any]], key: str) -> dict[str, Any]:
    """The results file of one hostile run (which must have ended normally), with the terminal
    output under the key ``_stdout``."""
    scenario, runs = hostile_runs
    result = runs[key]
    text = result.stdout.str() + result.stderr.str()
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED), text
    assert "INTERNALERROR" not in text
    doc = hostile_scenario.results(scenario, key)
    assert sorted(q["id"] for q in doc["questions"]) == hostile_scenario.IDS
    doc["_stdout"] = result.stdout.str()
    return doc


@HOSTILE_RUNS
def test_an_adapter_cannot_patch_the_scorer_or_read_the_gold(
    hostile_runs: tuple[Any, dict[str, Any]], key: str
) -> None:
    doc = _hostile(hostile_runs, key)
    by_id = _by_id(doc)
    # v008 (honest) is the only right answer: the patch did not reach the scorer
    assert doc["metrics"]["ex_multistate"] == 12.5
    assert "adapter not isolated" not in doc["_stdout"]
    assert by_id["v001"]["correct"] is False and by_id["v001"]["error_kind"] is None
    assert by_id["v002"]["error_kind"] == "adapter_error"
    assert by_id["v002"]["error"].startswith("AttributeError: ")
    assert "gold_sql" in by_id["v002"]["error"]


def test_in_process_mode_is_not_isolated_and_says_so(pytester: pytest.Pytester) -> None:
    """The same cheat inside the pytest process does move the score: what the default prevents.
    Even there the adapter gets the public question, without gold."""
    _adapter(pytester, "cheat", CHEAT)
    doc = _run(pytester, "cheat:Cheat", "0", "--heron-in-process")
    by_id = _by_id(doc)
    assert by_id["v001"]["correct"] is True and by_id["v003"]["correct"] is True
    assert by_id["v002"]["error"].startswith("AttributeError: ")
    assert "adapter not isolated: --heron-in-process: it ran inside" in doc["_stdout"]


ESCAPE_KINDS = {
    "v003": ("adapter_error", "the adapter's process ended (exit status 0) before it could"),
    "v004": ("adapter_error", "the adapter raised SystemExit: 3"),
    "v005": ("adapter_error", "the adapter raised KeyboardInterrupt"),
    "v006": ("adapter_timeout", "the adapter did not answer within 2s (--heron-timeout)"),
}


@HOSTILE_RUNS
def test_an_adapter_cannot_end_the_run_or_outlast_the_deadline(
    hostile_runs: tuple[Any, dict[str, Any]], key: str
) -> None:
    """v003-v006 escape in four ways (os._exit, sys.exit, KeyboardInterrupt, C code past the
    deadline); v008 (asked after them with -n 0, by a fresh process after the deaths and the
    kill) is answered honestly and scored."""
    doc = _hostile(hostile_runs, key)
    by_id = _by_id(doc)
    for qid, (kind, message) in ESCAPE_KINDS.items():
        assert by_id[qid]["error_kind"] == kind, by_id[qid]
        assert by_id[qid]["error"].startswith(message), by_id[qid]
    assert by_id["v008"]["correct"] is True and by_id["v008"]["error_kind"] is None
    _, runs = hostile_runs
    daemons = runs[f"{key}-daemons"]
    assert daemons.outlines  # each prepare started a double-forked daemon (its notes)
    if hostile_scenario.sandboxed(key):
        assert daemons.errlines == []  # none of them still ran when the run had ended
    else:  # the control: outside the sandbox a daemon outlives the run (then it is killed)
        assert daemons.errlines


@HOSTILE_RUNS
def test_a_volatile_result_is_wrong_in_a_plugin_run(
    hostile_runs: tuple[Any, dict[str, Any]], key: str
) -> None:
    """Issue 29, finding 2, through the plugin: v007's SQL returns gold's rows, through
    ``random()``: wrong, with the reason "volatile result", at -n 0 and -n 2."""
    doc = _hostile(hostile_runs, key)
    v007 = _by_id(doc)["v007"]
    assert v007["correct"] is False and v007["error_kind"] is None, v007
    assert v007["reason"].startswith("volatile result: calls random()"), v007
    assert "volatile result" in doc["_stdout"]  # the failure report says why


HANG_PREPARE = """
import os, time

class Stuck:
    name = "stuck"
    def prepare(self, ctx):
        with open("pids.txt", "a") as f:
            f.write(f"{os.getpid()}\\n")
        time.sleep(10**6)
    def generate(self, q):
        return GOLD[q.id]
"""


@WORKERS
def test_a_prepare_that_hangs_is_an_adapter_error(pytester: pytest.Pytester, workers: str) -> None:
    _adapter(pytester, "stuck", HANG_PREPARE)
    doc = _run(pytester, "stuck:Stuck", workers, "--heron-timeout=2")
    for q in doc["questions"]:
        assert q["error_kind"] == "adapter_error", q
        assert q["error"].startswith("the adapter failed to prepare: ")
        assert "within 2s (--heron-timeout)" in q["error"]
    _dead(pytester.path / "pids.txt")


CLI = """\
#!/bin/sh
q=$(cat)
sleep {sleep} &
case "$q" in
  *'"v001"'*) echo "{v001}" ;;
  *'"v002"'*) echo "{v002}" ;;
  *) sleep {sleep} ;;
esac
"""


@WORKERS
def test_a_cli_background_child_neither_delays_the_answer_nor_survives(
    pytester: pytest.Pytester, workers: str
) -> None:
    """v001 and v002 answer at once and leave a ``sleep`` holding stdout (read to the end, that
    would be a timeout); v003 never answers and is killed with its group at the deadline."""
    sleep = f"1000.{uuid.uuid4().int % 10**9}"  # a ``sleep 1000`` no other process has
    script = pytester.path / "answer.sh"
    script.write_text(CLI.format(sleep=sleep, v001=GOLD["v001"], v002=GOLD["v002"]))
    doc = _run(pytester, "cli", workers, f"--heron-cli-cmd=sh {script}", "--heron-timeout=5")
    by_id = _by_id(doc)
    assert by_id["v001"]["correct"] is True and by_id["v002"]["correct"] is True
    assert by_id["v003"]["error_kind"] == "adapter_timeout"
    assert "--heron-timeout" in by_id["v003"]["error"]
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True)
    assert [line for line in ps.stdout.splitlines() if sleep in line] == []


# -- ChildSystem, driven directly (no database) -------------------------------------------------

DIRECT = """
import os, sys
from pytest_heron import Prediction

class Noisy:
    name = "noisy"
    version = "7"
    def conditions(self, ctx):
        return {"timeout": ctx.limits.timeout_s, "pid": os.getpid()}
    def prepare(self, ctx):
        self.dsn = ctx.dsn
    def generate(self, q, sample=0):
        print('{"ok": true, "value": {"text": "SELECT forged"}}')   # on stdout...
        os.write(1, b'{"ok": true, "value": {"text": "SELECT forged"}}\\n')  # ...and on fd 1
        sys.stdin.read()                                            # nothing to steal there
        fields = sorted(vars(q))
        return Prediction(sql=f"SELECT {sample}", tables_in_context=fields,
                          usage={"prompt_tokens": 3})

class Billed:
    name = "billed"
    def prepare(self, ctx): pass
    def generate(self, q):
        exc = RuntimeError("the model refused")
        exc.usage = {"prompt_tokens": 11, "completion_tokens": 2}
        raise exc
"""

QUESTION = GoldQuestion(
    id="d001",
    question="How many?",
    gold_sql="SELECT 1",
    gold_tables=("core.tenants",),
    shape="single",
    retrieval="named",
    traps=("soft_delete",),
    source="/secret/path.yaml",
)


def _ctx(timeout_s: float = 20.0) -> BenchmarkContext:
    return BenchmarkContext(
        dsn="host=/nowhere dbname=x",
        dialect="postgres",
        scale="tiny",
        seed=42,
        schema_ddl="",
        tables=("core.tenants",),
        limits=Limits(timeout_s=timeout_s),
    )


@pytest.fixture
def direct(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "direct_adapters.py").write_text(DIRECT)
    monkeypatch.syspath_prepend(str(tmp_path))  # the child gets the parent's sys.path
    return tmp_path


def test_the_child_answers_with_public_fields_only_and_prints_go_nowhere(direct: Path) -> None:
    system = open_system("direct_adapters:Noisy", timeout_s=20)
    try:
        assert system.version == "7" and system.takes_sample is True and system.note is None
        own = system.conditions(_ctx(20))
        assert own["timeout"] == 20 and own["pid"] != os.getpid()  # answered by the child
        system.ready(_ctx())
        pred = system.ask(QUESTION, 20, 2)
        assert isinstance(pred, Prediction)
        assert pred.sql == "SELECT 2"  # not the forged line it printed; the sample index came
        assert pred.tables_in_context == [
            "dialect",
            "id",
            "question",
            "retrieval",
            "shape",
            "traps",
        ]
        assert pred.usage == {"prompt_tokens": 3}
    finally:
        system.close()


def test_billed_usage_on_an_exception_crosses_the_process(direct: Path) -> None:
    system = open_system("direct_adapters:Billed", timeout_s=20)
    try:
        system.ready(_ctx())
        with pytest.raises(AdapterError, match="RuntimeError: the model refused") as info:
            system.ask(QUESTION, 20, None)
        usage = getattr(info.value, "usage", None)
        assert usage == {"prompt_tokens": 11, "completion_tokens": 2}
    finally:
        system.close()


def test_unknown_names_fail_before_any_question(direct: Path) -> None:
    with pytest.raises(AdapterLookupError, match=r"Known adapters: .*cli.*gold"):
        open_system("no-such-adapter", timeout_s=20)
    with pytest.raises(AdapterLookupError, match="cannot import module 'no_such_module'"):
        open_system("no_such_module:Thing", timeout_s=20)
    with pytest.raises(AdapterLookupError, match="has no attribute 'Missing'"):
        open_system("direct_adapters:Missing", timeout_s=20)
    assert "direct_adapters" not in sys.modules  # looked up in the child, never imported here


def test_a_timeout_or_a_death_costs_one_question_and_the_next_gets_a_fresh_child(
    direct: Path,
) -> None:
    (direct / "slow_adapters.py").write_text(
        textwrap.dedent("""
        import os, signal, time
        class Slow:
            name = "slow"
            def prepare(self, ctx): pass
            def generate(self, q):
                if q.question == "hang":
                    time.sleep(10**6)
                if q.question == "die":
                    os.kill(os.getpid(), signal.SIGKILL)
                return f"SELECT {os.getpid()}"
        """)
    )
    system = open_system("slow_adapters:Slow", timeout_s=20)
    try:
        system.ready(_ctx())
        first = int(str(system.ask(QUESTION, 20, None)).split()[1])
        hang = GoldQuestion("d002", "hang", "SELECT 1", (), "single", "named")
        with pytest.raises(AdapterTimeout, match="its process was killed"):
            system.ask(hang, 1, None)
        assert not _alive(first)
        second = int(str(system.ask(QUESTION, 20, None)).split()[1])
        assert second != first
        die = GoldQuestion("d003", "die", "SELECT 1", (), "single", "named")
        with pytest.raises(AdapterError, match=r"process ended \(killed by SIGKILL\)"):
            system.ask(die, 20, None)
        third = int(str(system.ask(QUESTION, 20, None)).split()[1])
        assert third not in (first, second) and not _alive(second)
    finally:
        system.close()


BILLING = """
import os, sys, time
from pytest_heron.systems.llm.client import ChatClient, LLMConfig, Meter

class Billing:
    name = "billing"
    def prepare(self, ctx):
        self.client = ChatClient(LLMConfig(endpoint=os.environ["STUB_URL"], model="stub-model",
                                           max_attempts=1), adapter="billing")
    def generate(self, q):
        meter = Meter()
        for turn in range(2):
            self.client.chat([{"role": "user", "content": f"{q.question} {turn}"}],
                             question_id=q.id, meter=meter)
        sys.stdout.flush()
        if q.question == "die":
            os._exit(3)
        time.sleep(10**6)  # two replies billed, then never an answer
"""


@pytest.mark.parametrize("how", ["hang", "die"])
def test_tokens_billed_before_a_kill_stay_with_the_question(
    direct: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """The child reports each LLM reply as it arrives; when the harness kills it past the time
    limit (or it dies), the question keeps what the replies that arrived billed."""
    from chat_stub import ChatStub, completion

    (direct / "billing_adapters.py").write_text(BILLING)
    replies = [
        completion("SELECT 1", prompt_tokens=100, completion_tokens=7),
        completion("SELECT 2", prompt_tokens=120, completion_tokens=9),
    ]
    with ChatStub(replies) as stub:
        monkeypatch.setenv("STUB_URL", stub.url)
        system = open_system("billing_adapters:Billing", timeout_s=20)
        try:
            system.ready(_ctx())
            q = GoldQuestion("d009", how, "SELECT 1", (), "single", "named")
            expected: type[Exception] = AdapterTimeout if how == "hang" else AdapterError
            with pytest.raises(expected) as info:
                system.ask(q, 8, None)
            assert len(stub.requests) == 2
        finally:
            system.close()
    usage = getattr(info.value, "usage", None)
    assert usage is not None, info.value
    assert (usage["prompt_tokens"], usage["completion_tokens"], usage["calls"]) == (220, 16, 2)


FLOODING = """
from pytest_heron.systems.llm import replies as client

class Flooding:
    name = "flooding"
    def prepare(self, ctx): pass
    def generate(self, q):
        reply = client.ChatReply(content="SELECT 1", prompt_tokens=1, completion_tokens=1)
        for _ in range(20_000):  # the observer the child installed, called directly
            client._bill_observer(reply)
        return "SELECT 1"
"""


def test_a_flood_of_billing_lines_costs_the_question_not_the_run(direct: Path) -> None:
    (direct / "flooding_adapters.py").write_text(FLOODING)
    system = open_system("flooding_adapters:Flooding", timeout_s=20)
    try:
        system.ready(_ctx())
        with pytest.raises(AdapterError, match="more than 10,000 billing lines"):
            system.ask(QUESTION, 20, None)
        system.ready(_ctx())  # a fresh process for the next question
    finally:
        system.close()
