"""Parameterised questions and their seeded variants (dataset/params.py, audit/variants.py)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_heron import compare
from pytest_heron.audit.gold import run_gold, state_problems
from pytest_heron.audit.static import static_problems
from pytest_heron.audit.variants import (
    Variant,
    draw_variants,
    json_lines,
    parse_spec,
    variant_id,
    variant_ids,
)
from pytest_heron.core.errors import ConfigError, QuestionFileError
from pytest_heron.database.server import Server
from pytest_heron.dataset import load_questions
from pytest_heron.dataset.params import (
    ParameterError,
    draw_values,
    parse_parameters,
    pick,
    render,
    sql_literal,
)
from pytest_heron.dataset.questions import builtin_dir

pytest_plugins = ["pytester"]

# one of each parameter style: tenant id, derived tenant name, queried tenant name, year, both
SAMPLE = ("q001", "q017", "q038", "q003", "q015", "q098")
ID = re.compile(r"[a-z0-9_]+")
RUN = ("q001", "q038", "q015")  # the plugin runs: tenant id, derived name, year


# -- pure ---------------------------------------------------------------------------------------


def test_literals_are_typed_and_quoted() -> None:
    assert sql_literal(7) == "7"
    assert sql_literal("O'Brien") == "'O''Brien'"
    assert sql_literal(dt.date(2024, 2, 29)) == "DATE '2024-02-29'"
    values = {"t": 3, "n": "O'Brien", "y": 2024, "d": dt.date(2024, 1, 31)}
    sql = render("{t} {n} '{y:raw}-01-01' {y+1} {d+1} {d:raw}", values, sql=True)
    assert sql == "3 'O''Brien' '2024-01-01' 2025 DATE '2024-02-01' 2024-01-31"
    assert render("tenant {t}, '{n}', {d}", values, sql=False) == "tenant 3, 'O'Brien', 2024-01-31"
    with pytest.raises(ParameterError, match="lowercase words"):
        render("'{n:raw}'", values, sql=True)  # text can never leave its quotes
    # a lowercase word may be written raw (a unit in an alias); nothing else that is text
    assert render("AS mttr_{u:raw}", {"u": "minutes"}, sql=True) == "AS mttr_minutes"
    for bad in ("Hours", "x y", "a;b", "1a", "", "a'"):
        with pytest.raises(ParameterError, match="lowercase words"):
            render("{u:raw}", {"u": bad}, sql=True)
    with pytest.raises(ParameterError, match="names no declared parameter"):
        render("{other}", values, sql=True)


@settings(max_examples=60, deadline=None)
@given(st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")))
def test_a_text_literal_reads_back_as_itself(server: Server, value: str) -> None:
    with psycopg.connect(server.admin_dsn) as conn:
        row = conn.execute("SELECT " + sql_literal(value)).fetchone()  # type: ignore[arg-type]
    assert row is not None and row[0] == value


def test_draws_are_pinned_and_independent_of_the_python_hash_seed() -> None:
    # BLAKE2b of fixed bytes: these numbers may never change (they name published variants)
    assert [pick(7, "q001", d, "tenant", 25) for d in range(5)] == [11, 21, 13, 7, 8]
    params = parse_parameters({"tenant": {"kind": "tenant", "default": 1, "range": [1, 25]}})
    first = draw_values(params, 7, "q001", 0, {"tenant": params[0].values})
    assert first == {"tenant": 12}  # as `heron variants --seed 7` prints for q001's first


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ({"t": {"kind": "tenant", "default": 1}}, "exactly one of"),
        ({"t": {"kind": "planet", "default": 1, "values": [1]}}, "kind must be"),
        ({"t": {"kind": "tenant", "values": [1]}}, "default is required"),
        ({"t": {"kind": "tenant", "default": 1, "range": [5, 1]}}, "range must be"),
        ({"t": {"kind": "tenant", "default": "a", "values": [1, 2]}}, "differ in type"),
        ({"T": {"kind": "tenant", "default": 1, "values": [1]}}, "must match"),
        ({"t": {"kind": "tenant", "default": 1, "values": [1], "x": 1}}, "unknown key"),
    ],
)
def test_bad_parameter_specs_are_refused(spec: Any, problem: str) -> None:
    with pytest.raises(ParameterError, match=problem):
        parse_parameters(spec)


def test_date_ranges_step_by_month() -> None:
    (p,) = parse_parameters(
        {
            "d": {
                "kind": "date",
                "default": dt.date(2024, 1, 1),
                "range": [dt.date(2024, 1, 1), dt.date(2024, 4, 1)],
                "step": "month",
            }
        }
    )
    assert [v.isoformat() for v in p.values] == [  # type: ignore[union-attr]
        "2024-01-01",
        "2024-02-01",
        "2024-03-01",
        "2024-04-01",
    ]


QFILE = """\
id: p001
question: How many customers does tenant {tenant} have?
gold_sql: SELECT count(*) FROM orders.customers WHERE tenant_id = {tenant}
gold_tables: [orders.customers]
shape: single
retrieval: named
"""


@pytest.mark.parametrize(
    ("extra", "problem"),
    [
        ("", None),  # no parameters: the braces stay as they are
        ("parameters:\n  tenant: {kind: tenant, default: 1, range: [1, 5]}\n", None),
        (
            "parameters:\n  tenant: {kind: tenant, default: 1, range: [1, 5]}\n"
            "  year: {kind: year, default: 2024, range: [2022, 2025]}\n",
            "does not name",
        ),
        (
            "parameters:\n  tenant: {kind: tenant, default: 1, range: [1, 5]}\n"
            "parameters_none_reason: none\n",
            "not both",
        ),
        (
            "parameters:\n  tenant: {kind: tenant, default: 1, range: [1, 5]}\n"
            '  other: {kind: tenant, default: 2, derived: "SELECT {tenant} + 1"}\n',
            "neither question nor gold_sql names {other}",
        ),
        ("variants_empty_probe: false\n", "needs parameters"),
        (
            "parameters:\n  tenant: {kind: tenant, default: 1, range: [1, 5]}\n"
            "variants_empty_probe: maybe\n",
            "true or false",
        ),
    ],
)
def test_the_loader_checks_parameters(tmp_path: Path, extra: str, problem: str | None) -> None:
    (tmp_path / "q.yaml").write_text(QFILE + extra)
    if problem is None:
        (q,) = load_questions(tmp_path)
        if extra:
            assert q.question == "How many customers does tenant 1 have?"
            assert q.gold_sql.endswith("tenant_id = 1") and q.template_sql.endswith("{tenant}")
        else:
            assert "{tenant}" in q.question
    else:
        with pytest.raises(QuestionFileError, match=problem):
            load_questions(tmp_path)


def test_a_derived_parameter_may_appear_in_gold_alone(tmp_path: Path) -> None:
    # the English states the unit; the seconds in it are derived and only gold needs them
    (tmp_path / "q.yaml").write_text(
        QFILE.replace("count(*)", "count(*) * {secs} AS in_{unit:raw}").replace(
            "have?", "have, counted in {unit}?"
        )
        + "parameters:\n  tenant: {kind: tenant, default: 1, range: [1, 5]}\n"
        "  unit: {kind: code, default: minutes, values: [minutes, hours]}\n"
        "  secs: {kind: count, default: 60,"
        " derived: \"SELECT CASE {unit} WHEN 'minutes' THEN 60 ELSE 3600 END\"}\n"
    )
    (q,) = load_questions(tmp_path)
    assert q.question == "How many customers does tenant 1 have, counted in minutes?"
    assert q.gold_sql.startswith("SELECT count(*) * 60 AS in_minutes FROM")
    # the drawn unit may reach gold only through the seconds derived from it ...
    text = (tmp_path / "q.yaml").read_text()
    (tmp_path / "q.yaml").write_text(text.replace(" AS in_{unit:raw}", ""))
    (q,) = load_questions(tmp_path)
    assert q.gold_sql.startswith("SELECT count(*) * 60 FROM")
    # ... but must reach it somehow
    (tmp_path / "q.yaml").write_text(text.replace(" * {secs} AS in_{unit:raw}", ""))
    with pytest.raises(QuestionFileError, match=r"gold_sql does not name parameter \{unit\}"):
        load_questions(tmp_path)


def test_every_builtin_question_has_parameters() -> None:
    questions = load_questions()
    for q in questions:
        assert q.parameters and not q.parameters_none_reason, q.id
        assert "{" not in q.question, q.id  # the defaults fill every placeholder
        # a variant is an empty probe when its parent is, unless the file says otherwise
        assert q.variants_empty_probe == q.empty_probe or q.id == "q089", q.id
    assert len(questions) == 100


def test_variant_ids_and_spec() -> None:
    qs = [q for q in load_questions() if q.id in ("q001", "q010")]
    ids = variant_ids(qs, 7, 2)
    assert ids == sorted(variant_id(p, 7, k) for p in ("q001", "q010") for k in (0, 1))
    assert ids[0] == "v634452523d" and all("q0" not in i for i in ids)  # pinned: published
    bare = dataclasses.replace(qs[0], parameters=())
    assert variant_ids([bare, qs[1]], 7, 1) == [variant_id("q010", 7, 0)]  # no parameters
    assert all(ID.fullmatch(i) for i in variant_ids(qs, 123, 3))
    assert parse_spec("7") == (7, 1) and parse_spec("7:3") == (7, 3)
    for bad in ("x", "7:0", "-1", "7:101", "7:3:1"):
        with pytest.raises(ConfigError, match="--heron-variants"):
            parse_spec(bad)


# -- on the tiny states ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def dsns(server: Server) -> list[str]:
    from pytest_heron.database.states import ensure_state

    return [ensure_state(server, "tiny", s).admin_dsn for s in (42, 43, 44)]


@pytest.fixture(scope="module")
def sample(dsns: list[str]) -> tuple[list[Variant], dict[str, str]]:
    qs = [q for q in load_questions() if q.id in SAMPLE]
    return draw_variants(qs, 7, 2, dsns)


def test_sample_variants_pass_the_audit_and_differ_from_their_parents(
    dsns: list[str], sample: tuple[list[Variant], dict[str, str]]
) -> None:
    variants, short = sample
    assert short == {}
    assert [v.question.id for v in variants] == variant_ids(
        [q for q in load_questions() if q.id in SAMPLE], 7, 2
    )
    parents = {q.id: q for q in load_questions()}
    for v in variants:
        q = v.question
        parent = parents[q.parent or ""]
        assert ID.fullmatch(q.id) and q.question != parent.question
        assert q.gold_tables == parent.gold_tables and static_problems(q) == {}
        runs = [run_gold(d, q.gold_sql) for d in dsns]
        assert state_problems(q, dsns, runs) == {}
        for run, d in zip(runs, dsns, strict=True):
            assert not compare.compare(run.rows, run_gold(d, parent.gold_sql).rows).equal
    for parent in SAMPLE:  # listed in id order: the two of a parent are found by parent
        a, b = [v for v in variants if v.question.parent == parent]
        assert a.question.question != b.question.question
    derived = [v for v in variants if v.question.parent == "q038"]
    with psycopg.connect(dsns[0]) as conn:  # the derived name is the drawn tenant's name
        for v in derived:
            values = dict(v.values)
            row = conn.execute(
                "SELECT name FROM core.tenants WHERE id = %s", (values["tenant"],)
            ).fetchone()
            assert row is not None and values["tenant_name"] == row[0]
            assert f"'{row[0]}' (tenant {values['tenant']})" in v.question.question


def test_the_same_seed_draws_the_same_bytes(
    dsns: list[str], sample: tuple[list[Variant], dict[str, str]]
) -> None:
    qs = [q for q in load_questions() if q.id in SAMPLE[:3]]
    again, _ = draw_variants(qs, 7, 2, dsns)
    first = [v for v in sample[0] if v.question.parent in SAMPLE[:3]]
    assert json_lines(again) == json_lines(first)
    other, _ = draw_variants(qs, 8, 2, dsns)
    assert json_lines(other) != json_lines(first)
    for line in json_lines(first).splitlines():
        doc = json.loads(line)
        assert doc["id"] == variant_id(doc["parent"], 7, doc["index"])


def test_a_draw_that_fails_the_audit_is_redrawn(tmp_path: Path, dsns: list[str]) -> None:
    # tenants above 25 do not exist at tiny: their draws return no rows and are skipped
    (tmp_path / "q.yaml").write_text(
        QFILE.replace("count(*)", "count(*), tenant_id").replace(
            "= {tenant}", "= {tenant} GROUP BY tenant_id"
        )
        + "parameters:\n  tenant: {kind: tenant, default: 1, values: [1, 900, 901, 902, 3, 4]}\n"
    )
    (q,) = load_questions(tmp_path)
    variants, short = draw_variants([q], 5, 2, dsns)
    assert short == {} and [dict(v.values)["tenant"] for v in variants] in (
        [3, 4],
        [4, 3],
    )
    assert all(v.draw >= v.index for v in variants)
    three, short = draw_variants([q], 5, 3, dsns)
    assert len(three) == 2 and "2 of 3 variants" in short["p001"]  # never filled with a broken one


# the questions that had no variants (q010, q089: empty probes; q086: a platform aggregate) or
# one (q092 at tiny) before every question got three at seed 7
FORMER = ("q010", "q086", "q089", "q092")


@pytest.fixture(scope="module")
def former(dsns: list[str]) -> tuple[list[Variant], dict[str, str]]:
    return draw_variants([q for q in load_questions() if q.id in FORMER], 7, 3, dsns)


def test_the_former_exceptions_get_three_audited_variants(
    dsns: list[str], former: tuple[list[Variant], dict[str, str]]
) -> None:
    variants, short = former
    assert short == {}
    assert [v.question.id for v in variants] == sorted(
        variant_id(q, 7, k) for q in FORMER for k in range(3)
    )
    parents = {q.id: q for q in load_questions()}
    for v in variants:
        q = v.question
        parent = parents[q.parent or ""]
        assert static_problems(q) == {} and q.gold_tables == parent.gold_tables
        runs = [run_gold(d, q.gold_sql) for d in dsns]
        assert state_problems(q, dsns, runs) == {}
        if q.parent == "q010":
            continue  # the empty probe: next test
        assert not q.empty_probe and all(r.rows for r in runs)  # q089's variants have rows
        for run, d in zip(runs, dsns, strict=True):
            assert not compare.compare(run.rows, run_gold(d, parent.gold_sql).rows).equal
    for v in (v for v in variants if v.question.parent == "q086"):
        values = dict(v.values)  # the unit in the English, its seconds and the alias agree
        seconds = {"minutes": 60, "hours": 3600, "days": 86400}[str(values["unit"])]
        assert values["unit_seconds"] == seconds
        assert f"expressed in {values['unit']}, rounded to {values['decimals']} dec" in (
            v.question.question
        )
        assert f"/ {seconds}, {values['decimals']}) AS mttr_{values['unit']}" in v.question.gold_sql


def test_empty_probe_variants_are_empty_everywhere_and_distinct(
    dsns: list[str], former: tuple[list[Variant], dict[str, str]]
) -> None:
    parent = next(q for q in load_questions() if q.id == "q010")
    probes = [v.question for v in former[0] if v.question.parent == "q010"]
    assert len(probes) == 3 and all(q.empty_probe for q in probes)
    for q in probes:
        for d in dsns:
            got = run_gold(d, q.gold_sql)
            assert got.ok and got.rows == [], (q.id, d)
    # the English and the SQL differ from the parent's and from one another's
    assert len({parent.question, *(q.question for q in probes)}) == 4
    assert len({parent.gold_sql, *(q.gold_sql for q in probes)}) == 4


def test_an_empty_probe_variant_with_rows_is_refused(tmp_path: Path, dsns: list[str]) -> None:
    # q010 with years inside the history: every draw has orders, none may be published
    raw = (Path(str(builtin_dir())) / "q010.yaml").read_text(encoding="utf-8")
    wrong = raw.replace("range: [2018, 2022]", "range: [2025, 2026]")
    assert wrong != raw
    (tmp_path / "q010.yaml").write_text(wrong, encoding="utf-8")
    got, short = draw_variants(load_questions(tmp_path), 7, 1, dsns)
    assert got == [] and "0 of 1 variants" in short["q010"]
    assert "an empty probe returned rows" in short["q010"]


# -- running on variants ------------------------------------------------------------------------

INNER = ["-p", "no:cacheprovider", "-p", "no:randomly", "--heron-scale=tiny"]


@pytest.fixture
def folder(pytester: pytest.Pytester) -> Iterator[Path]:
    out = pytester.mkdir("qs")
    for qid in RUN:
        shutil.copy(Path(str(builtin_dir())) / f"{qid}.yaml", out / f"{qid}.yaml")
    yield out


def test_gold_scores_100_on_variants_and_pasted_public_gold_fails(
    pytester: pytest.Pytester, folder: Path
) -> None:
    res = pytester.runpytest_subprocess(
        "--heron-adapter=gold",
        f"--heron-questions={folder}",
        "--heron-variants=11:2",
        "--heron-output=gold.json",
        *INNER,
    )
    assert res.ret == 0, res.stdout.str()
    res.stdout.fnmatch_lines(["adapter=gold scale=tiny * variants=11:2 n=*"])  # not public
    doc = json.loads((pytester.path / "gold.json").read_text())
    assert doc["conditions"]["variants"] == {"seed": 11, "count": 2}
    ids = sorted(q["id"] for q in doc["questions"])
    assert ids == sorted(variant_id(q, 11, k) for q in RUN for k in (0, 1))
    assert doc["metrics"]["ex_multistate"] == 100.0
    public = {q.id: q.gold_sql for q in load_questions(folder)}
    parent_of = {variant_id(q, 11, k): q for q in RUN for k in (0, 1)}  # the id names none
    lines = [json.dumps({"id": i, "sql": public[parent_of[i]]}) for i in ids]
    (pytester.path / "pasted.jsonl").write_text("\n".join(lines) + "\n")
    res = pytester.runpytest_subprocess(
        "--heron-adapter=file",
        "--heron-predictions=pasted.jsonl",
        f"--heron-questions={folder}",
        "--heron-variants=11:2",
        "--heron-output=pasted.json",
        *INNER,
    )
    doc = json.loads((pytester.path / "pasted.json").read_text())
    assert doc["metrics"]["ex_multistate"] <= 10.0
    assert doc["metrics"]["ex1"] <= 10.0  # wrong on the first state alone too
    # a file keyed by the public ids: one short line that says how to key it
    lines = [json.dumps({"id": q, "sql": sql}) for q, sql in sorted(public.items())]
    (pytester.path / "public.jsonl").write_text("\n".join(lines) + "\n")
    res = pytester.runpytest_subprocess(
        "--heron-adapter=file",
        "--heron-predictions=public.jsonl",
        f"--heron-questions={folder}",
        "--heron-variants=11:2",
        *INNER,
    )
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    said = [line for line in res.stderr.str().splitlines() if line.strip()]
    assert len(said) == 1 and "key by variant id" in said[0], said
    shown = said[0].replace(str(pytester.path), "")  # the folder's length is the machine's
    first = sorted(public)[0]
    assert f"{variant_id(first, 11, 0)!r} for {first!r}" in said[0] and len(shown) < 400


@given(
    st.lists(st.sampled_from(["q001", "q002", "q003", "zzz"]), unique=True, min_size=1),
    st.integers(0, 99),
)
def test_a_file_keyed_by_public_ids_on_variants_gets_the_variant_id_hint(
    ids: list[str], seed: int
) -> None:
    """The hint comes exactly when every unknown id is the public parent of an asked variant."""
    import tempfile

    from pytest_heron.systems import load_predictions

    public = ("q001", "q002", "q003")
    known = [variant_id(q, seed, k) for q in public for k in (0, 1)]
    parents = {q: variant_id(q, seed, 0) for q in public}
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "p.jsonl"
        path.write_text("".join(json.dumps({"id": i, "sql": "SELECT 1"}) + "\n" for i in ids))
        with pytest.raises(ConfigError) as err:
            load_predictions(path, known, parents=parents)
        with pytest.raises(ConfigError) as plain:  # no parents told: no hint, the usual lines
            load_predictions(path, known)
    hinted = "key by variant id" in str(err.value)
    assert hinted == ("zzz" not in ids)
    assert "key by variant id" not in str(plain.value)
    if hinted:
        assert f"here {variant_id(ids[0], seed, 0)!r} for {ids[0]!r}" in str(err.value)


# -- the release gate ---------------------------------------------------------------------------


@pytest.mark.audit
def test_three_variants_of_every_question_pass_the_audit(dsns: list[str]) -> None:
    questions = load_questions()
    variants, short = draw_variants(questions, 7, 3, dsns)
    assert short == {}  # issue 30's "done when": 300 variants, every one audited on 3 states
    assert len(variants) == 300
    assert [v.question.id for v in variants] == variant_ids(questions, 7, 3)
