"""Sealed question sets (issue 41, item 2): a split nobody outside can read, and a run of it that
writes nothing of it.

The demo split (examples/sealed-demo, four questions written for this) is sealed at test time
with a key made here, then run through the real harness as a user runs it (subprocesses, tiny
scale, one state): once with the gold adapter and once with a copier that keeps every public
template (tests/template_keeper.py). Gold scores 100 %, the copier at most 10 %, and every byte
either run wrote (results file, journal, report folder, pytest's temporary folders, stdout and
stderr) is searched for the split's English, gold SQL, gold values and original ids.
"""

from __future__ import annotations

import json
import os
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml

import template_keeper
from inner import Scenario, shared
from pytest_heron.cli import main as heron
from pytest_heron.core.errors import ConfigError
from pytest_heron.database.server import Server
from pytest_heron.dataset import load_questions, new_key, params
from pytest_heron.dataset.sealed import MAGIC, load_sealed

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "examples" / "sealed-demo"
FAST = ["--heron-scale=tiny", "--heron-states=1", "-p", "no:cacheprovider", "-rA", "-v"]
KEY_ENV = "DEMO_SPLIT_KEY"  # named with --heron-sealed-key-env in the runs
OPAQUE = re.compile(r"s[0-9a-f]{10}")


def _seal(folder: Path, out: Path, identity: str, *extra: str) -> int:
    old = os.environ.get("HERON_SEALED_KEY")
    os.environ["HERON_SEALED_KEY"] = identity
    try:
        return heron(["seal", str(folder), "--out", str(out), *extra])
    finally:
        if old is None:
            del os.environ["HERON_SEALED_KEY"]
        else:
            os.environ["HERON_SEALED_KEY"] = old


def test_a_sealed_file_reads_back_only_with_its_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    identity, _ = new_key()
    out = tmp_path / "split.sealed"
    assert _seal(DEMO, out, identity) == 0
    printed = capsys.readouterr()
    digest = re.search(r"sha256:[0-9a-f]{64}", printed.out)
    assert digest is not None and printed.out.startswith("sealed 4 question(s)")
    data = out.read_bytes()
    assert data.startswith(MAGIC)
    for q in load_questions(DEMO):  # nothing of the folder in the clear
        assert q.question[:30].encode() not in data and q.gold_sql[:30].encode() not in data
        assert q.id.encode() not in data

    monkeypatch.setenv("HERON_SEALED_KEY", identity)
    sealed = load_questions(out)
    public = load_questions(DEMO)
    assert len(sealed) == 4 and all(q.sealed and q.source == out.name for q in sealed)
    assert all(OPAQUE.fullmatch(q.id) for q in sealed)
    assert sorted(q.gold_sql for q in sealed) == sorted(q.gold_sql for q in public)
    assert sorted(q.question for q in sealed) == sorted(q.question for q in public)
    # sealing again gives other ids: nothing links two seals of one folder
    assert _seal(DEMO, tmp_path / "again.sealed", identity) == 0
    assert {q.id for q in load_questions(tmp_path / "again.sealed")}.isdisjoint(
        q.id for q in sealed
    )

    monkeypatch.delenv("HERON_SEALED_KEY")
    with pytest.raises(ConfigError, match="environment variable HERON_SEALED_KEY"):
        load_questions(out)
    monkeypatch.setenv("OTHER", new_key()[0])
    with pytest.raises(ConfigError, match="cannot be opened with the key in OTHER") as err:
        load_sealed(out, key_env="OTHER")
    assert digest.group(0) in str(err.value)
    monkeypatch.setenv("OTHER", "not a key")
    with pytest.raises(ConfigError, match="does not hold an age identity"):
        load_sealed(out, key_env="OTHER")
    (tmp_path / "cut.sealed").write_bytes(data[:-20])
    monkeypatch.setenv("OTHER", identity)
    with pytest.raises(ConfigError, match="cannot be opened"):
        load_sealed(tmp_path / "cut.sealed", key_env="OTHER")


def test_only_an_audited_folder_that_copies_no_public_gold_is_sealed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    identity, recipient = new_key()
    copied = tmp_path / "copied"
    copied.mkdir()
    q017 = next(q for q in load_questions(None) if q.id == "q017")
    mine = {
        "id": "mine",
        "question": "Per product status, how many of tenant 4's live variants are repriced?",
        "gold_sql": q017.gold_sql.replace("= 1\n", "= 4\n"),  # other values: the same template
        "gold_tables": list(q017.gold_tables),
        "shape": q017.shape,
        "retrieval": q017.retrieval,
    }
    assert mine["gold_sql"] != q017.gold_sql
    (copied / "mine.yaml").write_text(yaml.safe_dump(mine))
    assert _seal(copied, tmp_path / "x.sealed", identity) == 2
    err = capsys.readouterr().err
    assert "mine: public: gold has the fingerprint of public question q017" in err
    broken = tmp_path / "broken"
    broken.mkdir()
    text = (
        (DEMO / "d1.yaml").read_text().replace("[catalog.product_variants]", "[orders.customers]")
    )
    (broken / "d1.yaml").write_text(text)
    assert _seal(broken, tmp_path / "y.sealed", identity, "--recipient", recipient) == 2
    err = capsys.readouterr().err
    assert (
        "does not pass the audit" in err and "heavy_variant_value: gold_tables: gold reads" in err
    )
    assert not (tmp_path / "x.sealed").exists() and not (tmp_path / "y.sealed").exists()
    assert heron(["seal", "--keygen"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("# recipient: age1") and printed[1].startswith("AGE-SECRET-KEY-1")


def test_the_template_keeper_is_right_on_every_public_question_and_variant() -> None:
    """The copier is as strong as the issue says: the public set and its variants give it
    nothing to work out (no database needed: its SQL is the gold's text)."""
    template_keeper.TEMPLATES[:] = template_keeper.templates()
    questions = load_questions(None)
    assert all(template_keeper.answer(q.question) == q.gold_sql for q in questions)
    variants = 0
    for q in questions:
        listed = [p for p in q.parameters if p.values and p.derived is None]
        if not listed or any(p.derived for p in q.parameters):
            continue
        values = params.defaults(q.parameters)
        for p in listed:
            values[p.name] = next((v for v in p.values if v != p.default), p.default)
        english = params.render(q.template_question, values, sql=False)
        assert template_keeper.answer(english) == params.render(q.template_sql, values, sql=True)
        variants += 1
    assert variants >= 50


def _build(scenario: Scenario) -> dict[str, Any]:
    identity, _ = new_key()
    sealed = scenario.path / "split.sealed"
    assert _seal(DEMO, sealed, identity) == 0
    scenario.write("keeper.py", template_keeper.adapter_source())
    runs: dict[str, Any] = {}
    for name, adapter in (("gold", "gold"), ("keeper", "keeper:Keeper")):
        out = scenario.path / name
        runs[name] = scenario.run(
            f"--heron-adapter={adapter}",
            f"--heron-questions={sealed}",
            f"--heron-sealed-key-env={KEY_ENV}",
            f"--heron-output={out}/results.json",
            f"--heron-report={out}/report",
            *FAST,
            env={KEY_ENV: identity},
        )
    runs["control"] = scenario.run(  # the same split, not sealed: the search must find it
        "--heron-adapter=keeper:Keeper",
        f"--heron-questions={DEMO}",
        f"--heron-output={scenario.path}/control/results.json",
        f"--heron-report={scenario.path}/control/report",
        *FAST,
    )
    return runs


@pytest.fixture(scope="module")
def sealed_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Scenario, dict[str, Any]]:
    return shared(tmp_path_factory, "sealed-demo", _build)


def _ex(path: Path) -> float:
    doc = json.loads(path.read_text())
    return float(doc["metrics"]["ex_multistate"])


def test_gold_scores_everything_and_the_template_keeper_nothing_on_the_sealed_split(
    sealed_runs: tuple[Scenario, dict[str, Any]],
) -> None:
    scenario, runs = sealed_runs
    assert runs["gold"].ret == 0, runs["gold"].stdout.lines[-30:]
    assert _ex(scenario.path / "gold" / "results.json") == 100.0
    keeper = _ex(scenario.path / "keeper" / "results.json")
    assert keeper <= 10.0, keeper
    assert runs["keeper"].ret == 1  # its questions failed, with (withheld) failure reports
    assert any("a sealed question" in line for line in runs["keeper"].stdout.lines)
    doc = json.loads((scenario.path / "keeper" / "results.json").read_text())
    assert len(doc["questions"]) == 4
    assert all(OPAQUE.fullmatch(o["id"]) for o in doc["questions"])
    assert all(o["pred_sql"] is None and o["gold_tables"] == [] for o in doc["questions"])


def _needles(server: Server) -> dict[str, str]:
    """What must not be found: the English (whole, and every run of six words), every line of
    gold SQL with a constant or more than 24 characters, every gold value of at least six
    characters, and the original ids; each with what it is. What the public schema itself holds
    (a table's name after FROM, a CHECK's list of statuses) is not the split's: left out."""
    from pytest_heron import sandbox
    from pytest_heron.database.states import ensure_state

    state = ensure_state(server, "tiny", 42)
    found: dict[str, str] = {}
    for q in load_questions(DEMO):
        found[q.id] = f"{q.id}: its id"
        words = q.question.split()
        found[q.question] = f"{q.id}: its English"
        for i in range(len(words) - 5):
            found[" ".join(words[i : i + 6])] = f"{q.id}: its English"
        found[q.gold_sql.strip()] = f"{q.id}: its gold SQL"
        for line in q.gold_sql.splitlines():
            line = line.strip()
            if len(line) > 24 or re.search(r"[0-9']", line):
                found[line] = f"{q.id}: a line of its gold SQL"
        rows = sandbox.execute(state.admin_dsn, q.gold_sql, timeout_s=30, guard=False)
        assert rows.ok and rows.rows, q.id
        for row in rows.rows:
            for value in row:
                text = str(int(value)) if isinstance(value, Decimal) else str(value)
                if len(text) >= 6:
                    found[text] = f"{q.id}: a gold value"
    from pytest_heron.generate import ddl_script

    schema = ddl_script("standard").lower()  # public: the report's schema pages show it
    return {k: v for k, v in found.items() if k.lower() not in schema}


def test_nothing_of_the_sealed_split_is_in_any_byte_the_runs_wrote(
    sealed_runs: tuple[Scenario, dict[str, Any]], server: Server
) -> None:
    scenario, runs = sealed_runs
    needles = _needles(server)
    assert len(needles) > 60  # the search has something to find
    sources: dict[str, bytes] = {}
    for name, run in runs.items():
        sources[f"{name} stdout"] = "\n".join(run.stdout.lines).encode()
        sources[f"{name} stderr"] = "\n".join(run.stderr.lines).encode()
    roots = [scenario.path, *scenario.path.parent.glob(f"{scenario.path.name}-basetemp-*")]
    skip = {scenario.path / "split.sealed", scenario.path / "keeper.py"}
    for root in roots:
        for path in sorted(root.rglob("*")):
            if path.is_file() and path not in skip and "__pycache__" not in path.parts:
                sources[str(path)] = path.read_bytes()
    written = [s for s in sources if "results.json" in s or "report" in s]
    assert any(s.endswith("gold/results.json.jsonl") for s in written), sorted(sources)
    assert any(s.endswith("keeper/report/report.html") for s in written), sorted(sources)

    def hits(control: bool) -> list[str]:
        return [
            f"{what} in {where}"
            for needle, what in sorted(needles.items())
            for where, data in sources.items()
            if where.startswith(("control", str(scenario.path / "control"))) == control
            and (needle.encode() in data or needle.lower().encode() in data.lower())
        ]

    found = hits(control=True)  # the unsealed run shows its English and gold: the search works
    assert any("its English in control stdout" in h for h in found), found
    assert any("its gold SQL in" in h for h in found), found
    assert any("a gold value in" in h for h in found), found
    missed = hits(control=False)
    assert missed == [], "\n".join(missed)
