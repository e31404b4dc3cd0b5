"""Files from elsewhere are read with bounds, and their figures are recomputed (issue 29, items
4, 5 and 9): nesting, size, duplicate keys and YAML aliases are refused with one sentence; a
results file whose stated figures differ from its questions is refused; the site writes only
under --out; a bad journal or report folder stops the run before any work."""

from __future__ import annotations

import importlib
import json
import os
import socket
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_heron import cli
from pytest_heron.board.protocol import default_protocol_path, load_protocol
from pytest_heron.board.submission import CLAIMED, DIGEST, META, PREDICTIONS
from pytest_heron.core.errors import ConfigError, HeronError, ResultsFileError
from pytest_heron.core.outside import (
    Limits,
    OutsideFileError,
    json_depth,
    loads_json,
    loads_json_lines,
    loads_yaml,
    read_json,
)
from pytest_heron.dataset import load_questions
from pytest_heron.results.conditions import Conditions
from pytest_heron.results.document import read_results, results_document, write_results
from pytest_heron.results.journal import read_journal
from pytest_heron.scoring.outcome import Outcome
from pytest_heron.site.build import build_site, write_files
from pytest_heron.systems.predictions import load_predictions

DEEP = "[" * 100_000  # 100 KB, under every size cap, far over any recursion limit

# -- the reader itself (pure) -------------------------------------------------------------------

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=30,
)

# the module, not the function the board's door also names `verify`
verify_module = importlib.import_module("pytest_heron.board.verifier")


@settings(max_examples=200, deadline=None)
@given(json_values)
def test_any_json_within_the_limits_reads_back_as_written(value: Any) -> None:
    text = json.dumps(value)
    assert loads_json(text, "x") == value
    assert loads_json_lines(text + "\n\n" + text, "x") == [value, value]


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=1, max_value=3000), st.sampled_from(["[", '{"k":', '[{"a":']))
def test_nesting_beyond_the_limit_is_refused_never_a_recursion_error(
    levels: int, opener: str
) -> None:
    text = opener * levels
    limits = Limits(max_depth=20)
    depth = json_depth(text)
    if depth <= 20:
        with pytest.raises(OutsideFileError, match="not JSON"):  # unterminated, but shallow
            loads_json(text, "deep.json", limits)
    else:
        with pytest.raises(OutsideFileError, match=r"deep\.json: nested .* over the limit of 20"):
            loads_json(text, "deep.json", limits)


def test_brackets_inside_strings_do_not_count_as_nesting() -> None:
    text = json.dumps({"sql": "[" * 5000 + '\\"{' * 100})
    assert json_depth(text) == 1 and loads_json(text, "x")["sql"].startswith("[[[")


@pytest.mark.parametrize(
    ("text", "limits", "message"),
    [
        (DEEP, Limits(), "nested 100000 levels deep, over the limit of 64"),
        ('{"a": 1, "a": 2}', Limits(), "duplicate key 'a'"),
        ("[1, 2, 3, 4]", Limits(max_items=3), "a container of 4 entries, over the limit of 3"),
        ('{"a": 1, "b": 2}', Limits(max_items=1), "an object of 2 keys, over the limit of 1"),
        ("[[1, 2], [3, 4]]", Limits(max_nodes=5), "over the limit of 5 values"),
        ("x" * 20, Limits(max_bytes=10), "20 characters, over the limit"),
        ("{not json", Limits(), "not JSON"),
    ],
)
def test_each_json_limit_is_a_sentence_naming_the_file(
    text: str, limits: Limits, message: str
) -> None:
    with pytest.raises(OutsideFileError, match=r"^f\.json: ") as caught:
        loads_json(text, "f.json", limits)
    assert message in str(caught.value) and "\n" not in str(caught.value)
    assert isinstance(caught.value, ResultsFileError) and isinstance(caught.value, HeronError)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: &x [1, 2]\nb: *x\n", "YAML aliases (*name) are not allowed (line 2)"),
        ("a: 1\nb: 2\na: 3\n", "duplicate key 'a' (line 3)"),
        ("a: " + "[" * 100_000, "nested more than 64 levels deep"),
        ("".join("  " * i + "k:\n" for i in range(200)), "nested more than 64 levels deep"),
        ("a: !!python/object:os.system x\n", "not valid YAML"),
        ("a: [1\n", "not valid YAML"),
    ],
)
def test_yaml_is_refused_for_aliases_duplicates_depth_and_unsafe_tags(
    text: str, message: str
) -> None:
    with pytest.raises(OutsideFileError, match=r"^s\.yaml: ") as caught:
        loads_yaml(text, "s.yaml")
    assert message in str(caught.value)


def test_yaml_within_the_limits_reads_as_the_safe_loader_does() -> None:
    assert loads_yaml("a: [1, {b: c}]\nd: null\n", "s.yaml") == {"a": [1, {"b": "c"}], "d": None}


def test_a_file_over_the_size_or_not_utf8_is_refused_before_parsing(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    big.write_text("[" + "1," * 100 + "1]")
    with pytest.raises(OutsideFileError, match=r"big.json: 203 bytes, over the limit of 100"):
        read_json(big, limits=Limits(max_bytes=100))
    bad = tmp_path / "bad.json"
    bad.write_bytes(b'{"a": "\xff"}')
    with pytest.raises(OutsideFileError, match=r"bad.json: not UTF-8 \(byte 7\)"):
        read_json(bad)


# -- the verifier: a verdict, never a traceback -------------------------------------------------


def _folder(tmp_path: Path, **files: str) -> Path:
    folder = tmp_path / "some-tool"
    folder.mkdir()
    defaults = {
        META: "format: 1\nname: some-tool\n",
        PREDICTIONS: "",
        CLAIMED: '{"metrics": {}}',
        DIGEST: "0" * 64,
    }
    for name, text in (defaults | {k.replace("_", "."): v for k, v in files.items()}).items():
        (folder / name).write_text(text)
    return folder


@pytest.mark.parametrize(
    ("files", "reason"),
    [
        ({"claimed_json": DEEP}, f"{CLAIMED}: nested 100000 levels deep"),
        ({"submission_yaml": "a: " + "[" * 50_000}, f"{META}: nested more than 16 levels deep"),
        ({"submission_yaml": "a: &x 1\nb: *x\n"}, f"{META}: YAML aliases"),
        ({"predictions_jsonl": "[" * 60_000}, f"{PREDICTIONS}, line 1: nested 60000 levels"),
        ({"claimed_json": '{"metrics": {}, "metrics": {}}'}, f"{CLAIMED}: duplicate key"),
    ],
)
def test_a_hostile_submission_file_gets_a_rejected_verdict_with_the_reason(
    tmp_path: Path, files: dict[str, str], reason: str
) -> None:
    folder = _folder(tmp_path, **files)
    verdict = verify_module.verify(
        folder, load_protocol(default_protocol_path()), load_questions(), hidden_seed=123_456
    )
    assert not verdict.accepted
    assert any(r.startswith(reason) for r in verdict.reasons), verdict.reasons


def test_an_unforeseen_failure_of_the_verifier_is_a_rejected_verdict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_args: Any) -> Any:
        raise KeyError("\x1b[2J not seen")

    monkeypatch.setattr(verify_module, "check_folder", broken)
    verdict = verify_module.verify(
        _folder(tmp_path), load_protocol(default_protocol_path()), load_questions()
    )
    assert not verdict.accepted and verdict.hidden_seed_source == "auto"
    assert verdict.reasons[0].startswith("the verifier could not complete on this submission")
    assert "KeyError" in verdict.reasons[0] and "\x1b" not in verdict.reasons[0]
    json.dumps(verdict.to_json())  # writable as verdict.json


def test_the_cli_writes_a_verdict_for_a_deeply_nested_claim(tmp_path: Path) -> None:
    folder = _folder(tmp_path, claimed_json=DEEP)
    assert cli.main(["verify-submission", str(folder), "--hidden-seed", "123456"]) == 1
    written = json.loads((folder / "verdict.json").read_text())
    assert written["accepted"] is False and any("nested" in r for r in written["reasons"])


# -- results files: bounded, recomputed, ids checked --------------------------------------------


def _results(tmp_path: Path, name: str = "run.json", *, right: bool = True) -> Path:
    questions = load_questions()[:3]
    conditions = Conditions(
        adapter="gold", scale="tiny", seeds=(42,), states=1, n_questions=len(questions)
    )
    outcomes = [
        Outcome(q.id, correct=right, correct_by_state={"42": right}, pred_sql="SELECT 1")
        for q in questions
    ]
    path = tmp_path / name
    write_results(path, results_document(conditions, outcomes))
    return path


def _edit(path: Path, change: Any) -> Path:
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))
    return path


def test_a_results_file_reads_back_with_the_same_figures(tmp_path: Path) -> None:
    path = _results(tmp_path)
    back = read_results(path)
    assert back.to_json() == json.loads(path.read_text())


def test_stated_metrics_that_differ_from_the_questions_are_refused(tmp_path: Path) -> None:
    path = _edit(
        _results(tmp_path, right=False),
        lambda d: d["metrics"].update(ex_multistate=100.0, ex1=100.0),
    )
    with pytest.raises(ResultsFileError) as caught:
        read_results(path)
    message = str(caught.value)
    assert "the stated figures differ" in message and "metrics, ex1: stated 100.0" in message
    assert "\n" not in message


def test_stated_breakdown_that_differs_is_refused(tmp_path: Path) -> None:
    def inflate(doc: dict[str, Any]) -> None:
        axis = next(iter(doc["breakdown"]))
        for bucket in doc["breakdown"][axis].values():
            bucket["ex_multistate"] = 100.0

    with pytest.raises(ResultsFileError, match=r"breakdown .*: stated 100\.0"):
        read_results(_edit(_results(tmp_path, right=False), inflate))


def test_a_file_without_stated_figures_gets_them_recomputed(tmp_path: Path) -> None:
    path = _edit(_results(tmp_path), lambda d: d.update(metrics={}, breakdown={}))
    back = read_results(path)
    assert back.metrics.ex_multistate == 100.0 and back.breakdown


def test_compare_gates_on_recomputed_figures_and_a_bad_file_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = str(_results(tmp_path, "a.json"))
    liar = _edit(
        _results(tmp_path, "b.json", right=False), lambda d: d["metrics"].update(ex_multistate=100)
    )
    assert cli.main(["compare", good, str(liar), "--max-drop", "1"]) == 2
    assert "the stated figures differ" in capsys.readouterr().err
    honest_bad = str(_results(tmp_path, "c.json", right=False))
    assert cli.main(["compare", good, honest_bad, "--max-drop", "1"]) == 1  # the gate's status
    nested = tmp_path / "n.json"
    nested.write_text(DEEP)
    assert cli.main(["compare", good, str(nested), "--max-drop", "1"]) == 2
    assert "nested 100000 levels deep" in capsys.readouterr().err


def test_a_question_id_off_the_pattern_is_refused(tmp_path: Path) -> None:
    def escape(doc: dict[str, Any]) -> None:
        doc["questions"][0]["id"] = "../../../x"

    path = _edit(_results(tmp_path), escape)
    with pytest.raises(ResultsFileError, match=r"question id '\.\./\.\./\.\./x' does not match"):
        read_results(path)
    out = tmp_path / "site"
    assert cli.main(["site", "--runs", str(path), "--out", str(out)]) == 2
    assert not out.exists() and not (tmp_path.parent / "x.html").exists()


def test_the_site_refuses_a_run_with_questions_outside_the_set(tmp_path: Path) -> None:
    def stranger(doc: dict[str, Any]) -> None:
        doc["questions"][0]["id"] = "zz_not_a_question"
        doc["questions"].sort(key=lambda q: q["id"])

    path = _edit(_results(tmp_path), lambda d: d.update(metrics={}, breakdown={}))
    path = _edit(path, stranger)
    with pytest.raises(ResultsFileError, match="'zz_not_a_question' is not in the question set"):
        build_site(tmp_path / "site", runs=[path])


def test_the_site_writes_no_page_outside_out(tmp_path: Path) -> None:
    out = tmp_path / "site"
    with pytest.raises(ResultsFileError, match="lies outside"):
        write_files(out, {"index.html": "ok", "../escaped.html": "no"})
    assert not (tmp_path / "escaped.html").exists() and not (out / "index.html").exists()


def test_the_site_and_compare_survive_a_nested_board_or_run(tmp_path: Path) -> None:
    board = tmp_path / "board"
    board.mkdir()
    (board / "leaderboard.json").write_text(DEEP)
    assert cli.main(["site", "--board", str(board), "--out", str(tmp_path / "s")]) == 2
    run = tmp_path / "run.json"
    run.write_text('{"version": 1, ' * 30_000)
    assert cli.main(["site", "--runs", str(run), "--out", str(tmp_path / "s")]) == 2


# -- the file adapter and the resume journal ----------------------------------------------------


def test_the_file_adapter_names_a_deeply_nested_line(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text('{"id": "a", "sql": "SELECT 1"}\n' + DEEP + "\n")
    with pytest.raises(ConfigError, match="line 2: nested 100000 levels deep"):
        load_predictions(path, ["a"])


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"[1]\n", "is not a pytest-heron journal"),
        (b'{"journal": 1, "config": "scale=tiny"}\n', "the header's 'config' is not an object"),
        (b'{"journal": 1, "config": {}}\n{"id": "\xff"}\n', "not UTF-8"),
        (DEEP.encode() + b"\n", "nested 100000 levels deep"),
    ],
)
def test_a_bad_journal_is_a_one_line_config_error(
    tmp_path: Path, content: bytes, message: str
) -> None:
    path = tmp_path / "out.json.jsonl"
    path.write_bytes(content)
    with pytest.raises(ConfigError, match=r"^--heron-resume: ") as caught:
        read_journal(path)
    assert message in str(caught.value) and "\n" not in str(caught.value)


INNER = ("-p", "pytest_heron.plugin", "-p", "no:randomly", "-p", "no:cacheprovider")


WORKERS = pytest.mark.parametrize(
    "workers", [[], ["-p", "xdist.plugin", "-n", "2"]], ids=["n0", "n2"]
)


@WORKERS
@pytest.mark.parametrize(
    "content",
    [b"[1]\n", b'{"journal": 1, "config": "x"}\n', b'{"journal": 1, "config": {}}\n\xff\n'],
)
def test_resume_with_a_bad_journal_stops_before_any_work(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, content: bytes, workers: list[str]
) -> None:
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    (pytester.path / "out.json.jsonl").write_bytes(content)
    result = pytester.runpytest(
        *INNER, *workers, "--heron-adapter=gold", "--heron-output=out.json", "--heron-resume"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    text = result.stderr.str()
    assert "pytest-heron: --heron-resume:" in text and "INTERNALERROR" not in text
    assert "heron:" not in result.stdout.str()  # no state was built, no question asked


@WORKERS
def test_a_report_html_folder_stops_the_run_before_any_work(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, workers: list[str]
) -> None:
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    (pytester.path / "rep" / "report.html").mkdir(parents=True)
    result = pytester.runpytest(*INNER, *workers, "--heron-adapter=gold", "--heron-report=rep")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "report.html is a folder" in result.stderr.str()
    assert "heron:" not in result.stdout.str()


@pytest.mark.parametrize(
    ("conditions", "message"),
    [
        ({"seeds": []}, "field 'seeds': empty"),
        ({"price": {"prompt": "x", "completion": []}}, "its figures cannot be recomputed"),
    ],
)
def test_conditions_that_break_the_recomputation_are_a_sentence(
    tmp_path: Path, conditions: dict[str, Any], message: str
) -> None:
    def change(doc: dict[str, Any]) -> None:
        doc["conditions"].update(conditions)
        doc["questions"][0]["usage"] = {"prompt_tokens": 5, "completion_tokens": 3}

    with pytest.raises(ResultsFileError, match=message):
        read_results(_edit(_results(tmp_path), change))


# -- only regular files are opened (issue 40, item 3) --------------------------------------------


def _fifo(tmp_path: Path) -> Path:
    path = tmp_path / "run.fifo"
    os.mkfifo(path)
    return path


def _socket(tmp_path: Path) -> tuple[Path, socket.socket]:
    path = tmp_path / "run.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(1)
    return path, server


@pytest.mark.parametrize(
    ("make", "kind"),
    [("fifo", "a FIFO (named pipe)"), ("device", "a character device"), ("socket", "a socket")],
)
def test_compare_on_a_file_that_is_not_regular_exits_at_once_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], make: str, kind: str
) -> None:
    good = str(_results(tmp_path, "a.json"))
    server = None
    if make == "fifo":
        other = _fifo(tmp_path)
    elif make == "socket":
        other, server = _socket(tmp_path)
    else:
        other = Path("/dev/zero")
    link = tmp_path / "link.json"  # a symbolic link is judged by what it points to
    link.symlink_to(other)
    try:
        for path in (other, link):
            started = time.monotonic()
            assert cli.main(["compare", good, str(path)]) == 2
            assert time.monotonic() - started < 5  # a FIFO's open would wait forever
            err = capsys.readouterr().err.strip()
            assert err.count("\n") == 0, err
            assert f"{path}: {kind}, not a regular file; not read" in err
    finally:
        if server is not None:
            server.close()


def test_the_reader_refuses_a_directory_and_follows_a_link_to_a_regular_file(
    tmp_path: Path,
) -> None:
    with pytest.raises(OutsideFileError, match=r": a directory, not a regular file; not read$"):
        read_json(tmp_path)
    target = tmp_path / "t.json"
    target.write_text('{"a": 1}')
    link = tmp_path / "l.json"
    link.symlink_to(target)
    assert read_json(link) == {"a": 1}
