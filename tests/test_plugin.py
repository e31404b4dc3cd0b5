"""Plugin behaviour through inner pytest sessions: the benchmark as pytest runs it, with and without
xdist.

Each scenario (one configuration of inner runs) is run once per test run by a session-scoped
fixture (``inner.shared``: once per test run, under xdist too), and several tests assert on
its result; usage errors, which stop a
session before it starts a server, are checked in-process with ``pytester.runpytest``. The list of
the sessions merged this way, and which test now asserts what each one asserted, is in DECISIONS
(2026-12-02, "one session per scenario").
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from inner import TWO_QUESTIONS, Scenario, shared
from pytest_heron.generate import load_bundle
from pytest_heron.results.conditions import Conditions
from pytest_heron.results.document import Results
from pytest_heron.scoring.metrics import Summary
from pytest_heron.scoring.outcome import FIELDS as OUTCOME_FIELDS
from pytest_heron.site.report import CSV_COLUMNS

pytest_plugins = ["pytester"]

PRIVATE = (
    TWO_QUESTIONS
    + """\
  traps: [mixed_currency]
- id: v003
  question: Nothing at all.
  gold_sql: SELECT 1 WHERE false
  gold_tables: []
  shape: single
  retrieval: one_hop
  empty_probe: true
"""
)
FAST = ["--heron-scale=tiny", "--heron-states=1", "-p", "no:cacheprovider"]
GOLD = """
GOLD = {  # the private set's gold, as an adapter may know it only by being told
    "v001": "SELECT x FROM (VALUES (1), (2), (3)) AS t(x) WHERE x % 2 = 1 ORDER BY x",
    "v002": "SELECT * FROM (VALUES ('a', 1), ('b', 2)) AS t(letter, n)",
    "v003": "SELECT 1 WHERE false",
}
"""


def _private(pytester: pytest.Pytester) -> Path:
    folder = pytester.mkdir("private")
    (folder / "set.yaml").write_text(PRIVATE)
    return folder


def _files(scenario: Scenario, **files: str) -> None:
    """The private question set and the given files, written into a scenario's folder."""
    scenario.write("private/set.yaml", PRIVATE)
    for filename, text in files.items():
        scenario.write(filename, text)


def _priv(scenario: Scenario) -> str:
    return f"--heron-questions={scenario.path / 'private'}"


def _results(path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(path.read_text())
    return doc


def _written(path: Path, run: pytest.RunResult) -> dict[str, Any]:
    """The results file a scenario's run wrote; if it is missing, that run's output says why."""
    assert path.is_file(), f"{path.name} was not written:\n{run.stdout.str()}\n{run.stderr.str()}"
    return _results(path)


def _stable(doc: dict[str, Any]) -> dict[str, Any]:
    """The results without what legitimately varies between runs (timings, start time)."""
    doc = json.loads(json.dumps(doc))
    doc["conditions"].pop("started_at")
    for timed in ("latency_s_median", "latency_s_p90", "ves", "r_ves", "grade"):  # wall-clock based
        doc["metrics"].pop(timed)
    for q in doc["questions"]:
        q.pop("latency_s")
        q.pop("ves")
    return doc


# -- gold at tiny, serial and under xdist (one scenario, two sessions) -----------------------


@pytest.fixture(scope="session")
def gold_builtin(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    def build(scenario: Scenario) -> dict[str, pytest.RunResult]:
        common = ["--heron-adapter=gold", "--heron-scale=tiny", "-p", "no:cacheprovider"]
        return {
            "serial": scenario.run(*common, "--heron-output=serial.json"),
            "parallel": scenario.run(*common, "--heron-output=parallel.json", "-n", "2"),
        }

    scenario, runs = shared(tmp_path_factory, "gold-builtin", build)
    return {
        **runs,
        "one": _written(scenario.path / "serial.json", runs["serial"]),
        "two": _written(scenario.path / "parallel.json", runs["parallel"]),
    }


def test_gold_scores_100_on_builtin_questions(gold_builtin: dict[str, Any]) -> None:
    serial, one = gold_builtin["serial"], gold_builtin["one"]
    serial.assert_outcomes(passed=len(one["questions"]))
    assert one["metrics"]["ex_multistate"] == 100.0 and one["metrics"]["ex1"] == 100.0
    assert one["conditions"]["seeds"] == [42, 43, 44] and one["conditions"]["states"] == 3
    assert len(one["questions"]) >= 10
    serial.stdout.fnmatch_lines(
        [
            "*heron benchmark*",
            "adapter=gold scale=tiny seeds=42,43,44*",
            "multi-state EX@1 (all 3 states): 100.0%*",
        ]
    )


def test_xdist_agrees_with_the_serial_run(gold_builtin: dict[str, Any]) -> None:
    assert gold_builtin["parallel"].ret == 0
    assert _stable(gold_builtin["one"]) == _stable(gold_builtin["two"])


# -- gold on a private set, with a failing project test beside it (one session) ---------------

PROJECT_TEST = "def test_project():\n    assert False\n"


@pytest.fixture(scope="session")
def gold_private(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    def build(scenario: Scenario) -> dict[str, pytest.RunResult]:
        _files(scenario, **{"test_project.py": PROJECT_TEST})
        args = ["--heron-adapter=gold", _priv(scenario), "--heron-output=out.json", *FAST]
        return {"result": scenario.run(*args)}

    scenario, runs = shared(tmp_path_factory, "gold-private", build)
    return {"result": runs["result"], "doc": _written(scenario.path / "out.json", runs["result"])}


def test_results_file_has_every_key(gold_private: dict[str, Any]) -> None:
    doc = gold_private["doc"]
    assert doc["version"] == 1
    assert set(doc["conditions"]) == {f.name for f in dataclasses.fields(Conditions)}
    assert set(doc["metrics"]) == {f.name for f in dataclasses.fields(Summary)}
    assert Results.from_json(doc).outcomes[0].id == doc["questions"][0]["id"]  # it reads back
    assert doc["conditions"]["data_version"] == load_bundle().data_version
    assert doc["conditions"]["adapter_conditions"] == {}  # gold says nothing about itself
    assert doc["conditions"]["questions_digest"] and doc["conditions"]["sqlglot_version"]
    assert doc["metrics"]["ex_at_k"] is None and doc["metrics"]["errors"] == 0
    assert doc["metrics"]["exact_match"] == 100.0 and doc["metrics"]["soft_f1"] == 100.0
    assert doc["metrics"]["ves"] is not None and 50 < doc["metrics"]["ves"] < 200
    assert doc["metrics"]["grade"] is not None and doc["metrics"]["grade"] > 80
    assert set(doc["breakdown"]) == {"shape", "retrieval", "trap", "join_width"}
    assert doc["breakdown"]["join_width"]["0 tables"]["n"] == 3
    assert doc["breakdown"]["shape"]["join"] == {
        "n": 1,
        "ex1": 100.0,
        "ex_multistate": 100.0,
        "errors": 0,
        "failures_syntax": 0,
        "failures_semantic": 0,
    }
    for q in doc["questions"]:
        assert list(q) == list(OUTCOME_FIELDS)  # every field, in the record's order
        assert isinstance(q["correct"], bool) and q["error_kind"] is None
    assert doc["conditions"]["backend"] == "embedded"
    assert doc["conditions"]["postgres_version"].startswith("16")


def test_with_adapter_and_no_paths_only_the_benchmark_runs(gold_private: dict[str, Any]) -> None:
    gold_private["result"].assert_outcomes(passed=3)  # test_project.py was not collected


# -- the ini turns it on, the command line wins, a path adds the project's tests (one session) --


@pytest.fixture(scope="session")
def gold_ini(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    def build(scenario: Scenario) -> dict[str, pytest.RunResult]:
        _files(scenario, **{"test_project.py": PROJECT_TEST})
        scenario.write(
            "pytest.ini",
            "[pytest]\nheron_adapter = gold\nheron_scale = tiny\nheron_seed = 45\n"
            f"heron_states = 1\nheron_questions = {scenario.path / 'private'}\n",
        )
        args = ["--heron-seed=42", ".", "--heron-output=ini.json", "-p", "no:cacheprovider"]
        return {"result": scenario.run(*args)}

    scenario, runs = shared(tmp_path_factory, "gold-ini", build)
    return {"result": runs["result"], "doc": _written(scenario.path / "ini.json", runs["result"])}


def test_ini_turns_it_on_and_the_command_line_wins(gold_ini: dict[str, Any]) -> None:
    assert gold_ini["doc"]["conditions"]["seeds"] == [42]
    assert len(gold_ini["doc"]["questions"]) == 3


def test_with_a_path_the_project_tests_run_beside_the_benchmark(gold_ini: dict[str, Any]) -> None:
    gold_ini["result"].assert_outcomes(passed=3, failed=1)


# -- in-process: no server is started by any of these ------------------------------------------


def test_plain_pytest_is_unaffected(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_one():\n    assert True\n")
    # (the outer session imported the plugin before this one could mark it for assertion
    # rewriting; with an editable install pytest warns about it, naming the module)
    result = pytester.runpytest(
        "-p", "no:cacheprovider", "-W", "ignore::pytest.PytestAssertRewriteWarning"
    )
    result.assert_outcomes(passed=1)
    assert "heron" not in result.stdout.str().replace("heron-0", "")
    assert "heron benchmark" not in result.stdout.str()


# The import budget of each entry point, as modules it must not load (seconds would depend on
# the machine; a module list does not). `pytest_heron.plugin` loads into every pytest session
# of every project; `pytest_heron.run.controller` is what a benchmark session imports before
# its states are found ready, and the generator is for building a state, which a warm cache skips;
# `pytest_heron.cli` answers --help and usage errors.
IMPORT_BUDGETS = {
    "pytest_heron.plugin": (
        "psycopg",
        "numpy",
        "sqlglot",
        "yaml",
        "pandas",
        "jinja2",
        "pytest_heron.run",
        "pytest_heron.generate",
        "pytest_heron.database",
        "pytest_heron.scoring",
    ),
    "pytest_heron.run.controller": (
        "pytest_heron.generate.columns",
        "pytest_heron.generate.load",
        "pytest_heron.generate.streams",
        "jinja2",
        "pandas",
        "pytest_heron.browser",
        "pytest_heron.site",
        "pytest_heron.audit",
        "pytest_heron.site.report",
    ),
    "pytest_heron.cli": ("psycopg", "numpy", "sqlglot", "jinja2", "pytest_heron.generate.load"),
}


@pytest.mark.parametrize("module", sorted(IMPORT_BUDGETS))
def test_loading_the_plugin_imports_nothing_heavy(module: str) -> None:
    import subprocess

    code = (
        f"import sys, {module}\n"
        f"names = {IMPORT_BUDGETS[module]!r}\n"
        "heavy = [m for m in names if m in sys.modules]\n"
        "print(heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_unknown_adapter_lists_the_known_ones(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--heron-adapter=nope", *FAST)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*unknown adapter 'nope'. Known adapters: *cli, *gold*"])
    assert "Traceback" not in result.stderr.str()


def test_bad_question_file_names_file_id_and_field(pytester: pytest.Pytester) -> None:
    folder = pytester.mkdir("bad")
    (folder / "broken.yaml").write_text(PRIVATE.replace("shape: join", "shape: spiral"))
    result = pytester.runpytest("--heron-adapter=gold", f"--heron-questions={folder}", *FAST)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*broken.yaml, question 'v002', field 'shape': must be one of*"])
    assert "Traceback" not in result.stderr.str()


def test_resume_needs_an_output(pytester: pytest.Pytester) -> None:
    private = _private(pytester)
    no_output = pytester.runpytest(
        "--heron-adapter=gold", "--heron-resume", f"--heron-questions={private}", *FAST
    )
    assert no_output.ret == pytest.ExitCode.USAGE_ERROR
    no_output.stderr.fnmatch_lines(["*--heron-resume needs --heron-output*"])


def test_bad_price_table_is_a_usage_error(pytester: pytest.Pytester) -> None:
    private = _private(pytester)
    pytester.makepyfile(sampled=SAMPLED)
    (pytester.path / "bad.yaml").write_text("models:\n  m: {prompt: cheap}\n")
    bad = pytester.runpytest(
        "--heron-adapter=sampled:Sampled",
        f"--heron-questions={private}",
        *FAST,
        "--heron-prices=bad.yaml",
    )
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    assert "bad.yaml, model 'm': expected {prompt: N, completion: N}" in bad.stderr.str()


def test_help_works_with_the_adapter_set_in_the_ini(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nheron_adapter = gold\nheron_scale = tiny\n")
    result = pytester.runpytest("--help")
    assert result.ret == 0, result.stderr.str()
    result.stdout.fnmatch_lines(["*--heron-adapter=NAME*"])
    everything = result.stderr.str() + result.stdout.str()
    assert "AttributeError" not in everything and "INTERNALERROR" not in everything


# -- the cli adapter ---------------------------------------------------------------------------


def test_cli_adapter_scores_an_outside_command(pytester: pytest.Pytester) -> None:
    private = _private(pytester)
    script = pytester.path / "answer.py"
    script.write_text(
        textwrap.dedent("""
        import json, sys
        q = json.load(sys.stdin)
        assert q["dialect"] == "postgres" and q["dsn"]
        if q["id"] == "v001":
            print("SELECT x FROM (VALUES (1), (3)) AS t(x) ORDER BY x")
        elif q["id"] == "v002":
            print(json.dumps({"sql": "SELECT 2 AS n, 'b' AS l UNION ALL SELECT 1, 'a'",
                              "tables": [], "usage": {"prompt_tokens": 7}}))
        else:
            sys.stderr.write("model refused to answer")
            sys.exit(3)
    """)
    )
    result = pytester.runpytest_subprocess(
        "--heron-adapter=cli",
        f"--heron-cli-cmd={sys.executable} {script}",
        f"--heron-questions={private}",
        "--heron-output=cli.json",
        *FAST,
    )
    result.assert_outcomes(passed=2, failed=1)
    doc = _results(pytester.path / "cli.json")
    by_id = {q["id"]: q for q in doc["questions"]}
    assert by_id["v002"]["correct"] and by_id["v002"]["usage"] == {"prompt_tokens": 7}
    assert by_id["v003"]["error_kind"] == "adapter_error"
    assert "status 3" in by_id["v003"]["error"] and "model refused" in by_id["v003"]["error"]
    assert doc["metrics"]["tokens_prompt"] == 7


ADAPTERS = (
    GOLD
    + """
import time
from pytest_heron import Prediction

class Wrong:
    name = "wrong"
    def prepare(self, ctx):
        assert ctx.dialect == "postgres"
    def generate(self, q):
        if q.id == "v001":
            return "SELECT x FROM (VALUES (3), (1)) AS t(x)"      # order broken
        if q.id == "v002":
            return {"sql": "DELETE FROM core.tenants"}           # rejected
        return None                                               # invalid

class Crashy:
    name = "crashy"
    def prepare(self, ctx): pass
    def generate(self, q):
        if q.id == "v001":
            raise RuntimeError("boom")
        if q.id == "v002":
            time.sleep(30)
        return Prediction(sql=GOLD[q.id])
"""
)


# -- a wrong adapter, serial with a report folder (one session) and under xdist (one) ----------


@pytest.fixture(scope="session")
def wrong_serial(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    def build(scenario: Scenario) -> dict[str, pytest.RunResult]:
        _files(scenario, **{"myadapters.py": ADAPTERS})
        args = ["--heron-adapter=myadapters:Wrong", "--heron-report=rep", _priv(scenario), *FAST]
        return {"result": scenario.run(*args)}

    scenario, runs = shared(tmp_path_factory, "wrong", build)
    return {"result": runs["result"], "folder": scenario.path / "rep"}


def test_wrong_answers_fail_with_a_readable_difference(wrong_serial: dict[str, Any]) -> None:
    result = wrong_serial["result"]
    result.assert_outcomes(failed=3)
    result.stdout.fnmatch_lines(
        [
            "*order differs at row 1*",
            "rejected: only a SELECT*",
            "invalid_prediction: the adapter returned NoneType*",
        ]
    )
    assert "Traceback" not in result.stdout.str()
    doc = _results(wrong_serial["folder"] / "results.json")
    kinds = {q["id"]: q["error_kind"] for q in doc["questions"]}
    assert kinds == {"v001": None, "v002": "rejected", "v003": "invalid_prediction"}


def test_report_folder_is_self_contained(wrong_serial: dict[str, Any]) -> None:
    folder = wrong_serial["folder"]
    doc = _results(folder / "results.json")
    assert doc["metrics"]["ex_multistate"] == 0.0
    rows = list(csv.reader(io.StringIO((folder / "questions.csv").read_text())))
    assert rows[0] == list(CSV_COLUMNS) and rows[0][:2] == ["id", "correct"] and len(rows) == 4
    by_id = {r[0]: dict(zip(rows[0], r, strict=True)) for r in rows[1:]}
    assert by_id["v001"]["question"].startswith("Which numbers from one to three")
    assert (
        by_id["v001"]["gold_sql"]
        == "SELECT x FROM (VALUES (1), (2), (3)) AS t(x) WHERE x % 2 = 1 ORDER BY x"
    )
    assert by_id["v001"]["reason"] and by_id["v002"]["error_kind"] == "rejected"
    page = (folder / "report.html").read_text()
    assert 'id="headline-ex">0.0%' in page and "n=3 questions" in page
    assert "adapter=myadapters:Wrong" in page
    assert page.count("<svg") >= 5  # EX by shape, retrieval, trap, join width; error kinds
    assert "rejected" in page and "invalid_prediction" in page
    assert "http://" not in page and "https://" not in page
    assert (folder / "questions" / "v001.html").is_file() and (
        folder / "schema" / "crm.html"
    ).is_file()


def test_set_ex_and_failure_modes_cross_xdist(pytester: pytest.Pytester) -> None:
    # v001 returns gold's rows out of gold's ORDER BY: wrong as EX, right as a set (BIRD's
    # count); v002 is rejected (a syntax failure), v003 returns nothing usable (neither mode)
    private = _private(pytester)
    pytester.makepyfile(myadapters=ADAPTERS)
    result = pytester.runpytest_subprocess(
        "--heron-adapter=myadapters:Wrong",
        f"--heron-questions={private}",
        "--heron-output=w.json",
        "-n",
        "2",
        *FAST,
    )
    result.assert_outcomes(failed=3)
    result.stdout.fnmatch_lines(
        ["*set-EX (rows as sets, BIRD's count; not EX): multi-state 33.3%*syntax 1, semantic 1*"]
    )
    doc = _results(pytester.path / "w.json")
    m = doc["metrics"]
    assert (m["ex_multistate"], m["ex_multistate_set"]) == (0.0, 33.3333)
    assert (m["failures_syntax"], m["failures_semantic"], m["ex_all_k"]) == (1, 1, None)
    by_id = {q["id"]: q for q in doc["questions"]}
    assert by_id["v001"]["correct_set"] is True and by_id["v002"]["correct_set"] is False


# -- a crashing and hanging adapter under xdist, then --lf (one scenario, two sessions) ---------


@pytest.fixture(scope="session")
def crashy(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    def build(scenario: Scenario) -> dict[str, pytest.RunResult]:
        _files(scenario, **{"myadapters.py": ADAPTERS})
        base = [_priv(scenario), "--heron-scale=tiny", "--heron-states=1"]  # cache on: --lf
        crashed = scenario.run(
            "--heron-adapter=myadapters:Crashy",
            "--heron-timeout=1",
            "--heron-output=c.json",
            "-n",
            "2",
            *base,
        )
        return {"crashed": crashed, "again": scenario.run("--heron-adapter=gold", "--lf", *base)}

    scenario, runs = shared(tmp_path_factory, "crashy", build)
    return {**runs, "doc": _written(scenario.path / "c.json", runs["crashed"])}


def test_crash_and_hang_cost_only_their_question(crashy: dict[str, Any]) -> None:
    crashy["crashed"].assert_outcomes(passed=1, failed=2)
    kinds = {q["id"]: q["error_kind"] for q in crashy["doc"]["questions"]}
    assert kinds == {"v001": "adapter_error", "v002": "adapter_timeout", "v003": None}


def test_last_failed_asks_only_the_failed_questions_again(crashy: dict[str, Any]) -> None:
    crashy["again"].assert_outcomes(passed=2, deselected=1)


def test_conftest_hook_provides_an_adapter(pytester: pytest.Pytester) -> None:
    private = _private(pytester)
    pytester.makeconftest(
        GOLD
        + """
class Echo:
    name = "echo"
    def prepare(self, ctx): pass
    def generate(self, q): return GOLD[q.id]
def pytest_heron_make_adapter(config, name):
    return Echo if name == "echo" else None
"""
    )
    result = pytester.runpytest_subprocess(
        "--heron-adapter=echo", f"--heron-questions={private}", *FAST
    )
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["adapter not isolated: *pytest_heron_make_adapter hook*"])


def test_k_and_m_select_questions(pytester: pytest.Pytester) -> None:
    private = _private(pytester)
    base = [f"--heron-questions={private}", *FAST]
    pytester.runpytest_subprocess("--heron-adapter=gold", "-k", "v002", *base).assert_outcomes(
        passed=1, deselected=2
    )
    pytester.runpytest_subprocess(
        "--heron-adapter=gold", "-m", "shape_single", *base
    ).assert_outcomes(passed=2, deselected=1)
    pytester.runpytest_subprocess(
        "--heron-adapter=gold", "-m", "trap_mixed_currency", *base
    ).assert_outcomes(passed=1, deselected=2)


def test_min_ex_decides_the_exit_status(pytester: pytest.Pytester) -> None:
    private = _private(pytester)
    pytester.makepyfile(myadapters=ADAPTERS)
    args = [
        "--heron-adapter=myadapters:Crashy",
        "--heron-timeout=1",
        f"--heron-questions={private}",
        *FAST,
    ]
    low = pytester.runpytest_subprocess("--heron-min-ex=30", *args)
    assert low.ret == 0
    low.assert_outcomes(passed=1, xfailed=2)
    low.stdout.fnmatch_lines(["--heron-min-ex=30: multi-state EX 33.3% -> passed"])
    high = pytester.runpytest_subprocess("--heron-min-ex=50", *args)
    assert high.ret == pytest.ExitCode.TESTS_FAILED
    high.stdout.fnmatch_lines(["--heron-min-ex=50: multi-state EX 33.3% -> FAILED"])


DYING = (
    GOLD
    + """
import os

class Dying:
    name = "dying"
    def prepare(self, ctx): pass
    def generate(self, q):
        if q.id == "v002":
            os._exit(3)  # the whole process dies mid-run, as on a power cut or kill -9
        return GOLD[q.id]
"""
)
IN_PROCESS = "--heron-in-process"  # so that os._exit ends the pytest process, not the adapter's


def test_interrupted_run_resumes_with_every_question_once(pytester: pytest.Pytester) -> None:
    private = _private(pytester)
    pytester.makepyfile(dying=DYING)
    args = [IN_PROCESS, f"--heron-questions={private}", "--heron-output=r.json", *FAST]
    died = pytester.runpytest_subprocess("--heron-adapter=dying:Dying", *args)
    assert died.ret == 3 and not (pytester.path / "r.json").exists()
    journal = (pytester.path / "r.json.jsonl").read_text().splitlines()
    assert [json.loads(line).get("id") for line in journal[1:]] == ["v001"]
    refused = pytester.runpytest_subprocess(
        "--heron-adapter=dying:Dying",
        "--heron-resume",
        *args[:-4],
        "--heron-scale=tiny",
        "--heron-seed=43",
        "--heron-states=1",
        "-p",
        "no:cacheprovider",
    )
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines(["*refusing, the configuration differs*seeds*"])
    resumed = pytester.runpytest_subprocess(
        "--heron-adapter=dying:Dying", "--heron-resume", "-k", "not v002", *args
    )
    resumed.assert_outcomes(passed=1, deselected=2)
    final = pytester.runpytest_subprocess("--heron-adapter=dying:Dying", "--heron-resume", *args)
    assert final.ret == 3  # v002 still kills the process: it has no record yet
    (pytester.path / "dying.py").write_text(DYING.replace("os._exit(3)", "pass"))
    done = pytester.runpytest_subprocess("--heron-adapter=dying:Dying", "--heron-resume", *args)
    done.assert_outcomes(passed=1, deselected=2)
    doc = _results(pytester.path / "r.json")
    assert sorted(q["id"] for q in doc["questions"]) == ["v001", "v002", "v003"]
    assert doc["metrics"]["ex_multistate"] == 100.0
    records = [json.loads(x) for x in (pytester.path / "r.json.jsonl").read_text().splitlines()]
    assert sorted(r["id"] for r in records[1:]) == ["v001", "v002", "v003"]


REFUSING = (
    GOLD
    + """
import os
from pytest_heron.core.errors import AdapterError

class Refusing:
    name = "refusing"
    def prepare(self, ctx): pass
    def generate(self, q):
        if q.id == "v002" and os.path.exists("endpoint-down"):
            raise AdapterError("cannot connect to the endpoint http://127.0.0.1:9/v1: the "
                               "connection was refused (is the server running?)")
        return GOLD[q.id]
"""
)


def test_resume_asks_again_what_a_refused_endpoint_failed_and_a_finished_journal_exits_0(
    pytester: pytest.Pytester,
) -> None:
    private = _private(pytester)
    pytester.makepyfile(refusing=REFUSING)
    args = ["--heron-adapter=refusing:Refusing", f"--heron-questions={private}"]
    args += ["--heron-output=r.json", *FAST]
    (pytester.path / "endpoint-down").write_text("")
    down = pytester.runpytest_subprocess(*args)
    down.assert_outcomes(passed=2, failed=1)
    assert _results(pytester.path / "r.json")["metrics"]["ex_multistate"] < 100
    (pytester.path / "endpoint-down").unlink()  # the server is back
    back = pytester.runpytest_subprocess(*args, "--heron-resume")
    back.assert_outcomes(passed=1, deselected=2)
    back.stdout.fnmatch_lines(
        [
            "*journal: 1 question(s) had failed because the endpoint refused the connection, and "
            "were asked again: v002*"
        ]
    )
    assert _results(pytester.path / "r.json")["metrics"]["ex_multistate"] == 100.0
    again = pytester.runpytest_subprocess(*args, "--heron-resume")
    assert again.ret == pytest.ExitCode.OK, again.stdout.str()  # not 5: the run is complete
    again.assert_outcomes(deselected=3)
    again.stdout.fnmatch_lines(["*resumed: 3 questions taken from the journal*"])


def test_resume_needs_a_journal(pytester: pytest.Pytester) -> None:
    private = _private(pytester)
    no_journal = pytester.runpytest_subprocess(
        "--heron-adapter=gold",
        "--heron-resume",
        "--heron-output=x.json",
        f"--heron-questions={private}",
        *FAST,
    )
    assert no_journal.ret == pytest.ExitCode.USAGE_ERROR
    no_journal.stderr.fnmatch_lines(["*there is no journal at*x.json.jsonl*"])


def test_a_worker_that_dies_costs_only_its_question(pytester: pytest.Pytester) -> None:
    private = _private(pytester)
    pytester.makepyfile(dying=DYING)
    result = pytester.runpytest_subprocess(
        "--heron-adapter=dying:Dying",
        IN_PROCESS,
        f"--heron-questions={private}",
        "--heron-output=w.json",
        "-n",
        "2",
        *FAST,
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*heron benchmark*", "*errors by kind: infra_crash=1*"])
    doc = _results(pytester.path / "w.json")
    kinds = {q["id"]: (q["correct"], q["error_kind"]) for q in doc["questions"]}
    assert kinds == {"v001": (True, None), "v002": (False, "infra_crash"), "v003": (True, None)}


def test_no_backend_is_left_running(
    pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    private = _private(pytester)
    cache = tmp_path / "own-cache"
    monkeypatch.setenv("HERON_CACHE_DIR", str(cache))
    pytester.makepyfile(dying=DYING)
    died = pytester.runpytest_subprocess(
        "--heron-adapter=dying:Dying", IN_PROCESS, f"--heron-questions={private}", *FAST
    )
    assert died.ret == 3  # killed mid-run: it could not stop the server itself
    pytester.runpytest_subprocess(
        "--heron-adapter=gold", f"--heron-questions={private}", "-n", "2", *FAST
    ).assert_outcomes(passed=3)
    pgdata = str((cache / "pg16").resolve())
    assert (cache / "pg16" / "PG_VERSION").exists()
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True)
    assert [line for line in ps.stdout.splitlines() if pgdata in line] == []


SAMPLED = (
    GOLD
    + """
class Sampled:
    '''Right only on sample 1 for v001 and on every sample for v002; bills 10 + 2 tokens each.'''
    name = "sampled"
    version = "1"
    def prepare(self, ctx):
        self.seen = []
    def generate(self, q, sample=0):
        self.seen.append(sample)
        right = q.id == "v002" or (q.id == "v001" and sample == 1)
        sql = GOLD[q.id] if right else "SELECT 0 AS x"
        return {"sql": sql, "usage": {"prompt_tokens": 10, "completion_tokens": 2}}
"""
)


def test_samples_give_ex_at_k_summed_usage_and_cost(pytester: pytest.Pytester) -> None:
    private = _private(pytester)
    pytester.makepyfile(sampled=SAMPLED)
    result = pytester.runpytest_subprocess(
        "--heron-adapter=sampled:Sampled",
        f"--heron-questions={private}",
        "--heron-samples=3",
        "--heron-model=openai/gpt-4o-mini",
        "--heron-output=out.json",
        *FAST,
    )
    doc = _results(pytester.path / "out.json")
    by_id = {q["id"]: q for q in doc["questions"]}
    # v001: sample 0 is wrong (EX@1 counts sample 0), one of three samples is right.
    assert [s["correct"] for s in by_id["v001"]["samples"]] == [False, True, False]
    assert [s["sample"] for s in by_id["v001"]["samples"]] == [0, 1, 2]
    assert by_id["v001"]["correct"] is False and by_id["v002"]["correct"] is True
    # pass@1 per question: v001 1/3, v002 1, v003 0 -> mean 4/9; pass@3: 1, 1, 0 -> 2/3.
    assert doc["metrics"]["ex_at_k"] == {"1": round(400 / 9, 4), "3": round(200 / 3, 4)}
    assert doc["metrics"]["ex_multistate"] == round(100 / 3, 4)
    # every sample was billed: 3 questions x 3 samples x (10 + 2)
    assert by_id["v001"]["usage"] == {"prompt_tokens": 30, "completion_tokens": 6}
    assert doc["metrics"]["tokens_prompt"] == 90 and doc["metrics"]["tokens_completion"] == 18
    price = doc["conditions"]["price"]
    assert price["model"] == "gpt-4o-mini"
    expected = (90 * price["prompt"] + 18 * price["completion"]) / 1e6
    assert doc["metrics"]["cost_usd"] == pytest.approx(expected)
    text = result.stdout.str()
    assert "EX@1 44.4%, EX@3 66.7% (pass@k over 3 samples" in text
    assert f"cost: ${expected:.6f} (gpt-4o-mini list price" in text


def test_price_table_option(pytester: pytest.Pytester) -> None:
    private = _private(pytester)
    pytester.makepyfile(sampled=SAMPLED)
    (pytester.path / "prices.yaml").write_text(
        "models:\n  house-model: {prompt: 1000000, completion: 0}\n"
    )
    common = ["--heron-adapter=sampled:Sampled", f"--heron-questions={private}", *FAST]
    pytester.runpytest_subprocess(
        *common, "--heron-model=house-model", "--heron-prices=prices.yaml", "--heron-output=o.json"
    )
    doc = _results(pytester.path / "o.json")
    assert doc["metrics"]["cost_usd"] == 30.0  # 30 prompt tokens at $1 each
    unknown = pytester.runpytest_subprocess(*common, "--heron-model=mystery-7b")
    assert "cost: n/a (no price for 'mystery-7b'; see --heron-prices)" in unknown.stdout.str()


WIDE = (
    GOLD
    + """
class Wide:
    '''v001 with an extra column (superset-correct, not EX-correct); v002 plainly wrong.'''
    name = "wide"
    def prepare(self, ctx): pass
    def generate(self, q):
        if q.id == "v001":
            return ("SELECT x, x * 10 AS tens FROM (VALUES (1), (2), (3)) AS t(x) "
                    "WHERE x % 2 = 1 ORDER BY x")
        if q.id == "v002":
            return "SELECT 'z' AS letter, 9 AS n, 0 AS more"
        return GOLD[q.id]
"""
)


def test_superset_mode_is_its_own_figure_never_ex(pytester: pytest.Pytester) -> None:
    private = _private(pytester)
    pytester.makepyfile(wide=WIDE)
    result = pytester.runpytest_subprocess(
        "--heron-adapter=wide:Wide", f"--heron-questions={private}", "--heron-output=o.json", *FAST
    )
    doc = _results(pytester.path / "o.json")
    by_id = {q["id"]: q for q in doc["questions"]}
    assert by_id["v001"]["correct"] is False and by_id["v001"]["correct_superset"] is True
    assert by_id["v002"]["correct_superset"] is False  # extra columns, but wrong values
    assert by_id["v003"]["correct"] is True and by_id["v003"]["correct_superset"] is True
    assert doc["metrics"]["ex_multistate"] == round(100 / 3, 4)
    assert doc["metrics"]["ex_superset"] == round(200 / 3, 4)
    assert "superset EX (extra columns allowed; not EX): 66.7%" in result.stdout.str()
