"""Question files: the built-in set, and clear errors for malformed files."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from pytest_heron import audit
from pytest_heron.core.errors import QuestionFileError
from pytest_heron.core.types import RETRIEVALS, SHAPES
from pytest_heron.dataset import load_questions
from pytest_heron.generate import load_bundle

GOOD = """\
id: p001
question: How many?
gold_sql: SELECT 1
gold_tables: []
shape: single
retrieval: named
"""


def _write(tmp_path: Path, text: str, name: str = "q.yaml") -> Path:
    (tmp_path / name).write_text(textwrap.dedent(text))
    return tmp_path


def test_builtin_questions_are_valid_and_use_known_tables() -> None:
    questions = load_questions()
    assert len(questions) >= 10
    tables = set(load_bundle().tables)
    for q in questions:
        assert q.shape in SHAPES and q.retrieval in RETRIEVALS
        assert q.gold_tables, q.id
        assert set(q.gold_tables) <= tables, q.id


def test_builtin_questions_pass_the_static_audit() -> None:
    questions = load_questions()
    problems = {q.id: audit.static_problems(q) for q in questions}
    problems.update({k: {"duplicate": v} for k, v in audit.duplicate_problems(questions).items()})
    assert {k: v for k, v in problems.items() if v} == {}


def test_sorted_by_id_and_several_files(tmp_path: Path) -> None:
    _write(tmp_path, GOOD.replace("p001", "p009"), "b.yaml")
    _write(tmp_path, f"- {GOOD.replace(chr(10), chr(10) + '  ')}", "a.yaml")
    assert [q.id for q in load_questions(tmp_path)] == ["p001", "p009"]


@pytest.mark.parametrize(
    ("text", "qid", "field", "problem"),
    [
        (GOOD.replace("shape: single", "shape: round"), "p001", "shape", "must be one of"),
        (GOOD.replace("id: p001", "id: P-1"), "P-1", "id", "must match"),
        (GOOD.replace("gold_sql: SELECT 1\n", ""), "p001", "gold_sql", "is required"),
        (GOOD + "colour: red\n", "p001", "colour", "unknown field"),
        (
            GOOD.replace("gold_tables: []", "gold_tables: [orders]"),
            "p001",
            "gold_tables",
            "not a schema.table",
        ),
        (GOOD + "empty_probe: maybe\n", "p001", "empty_probe", "true or false"),
    ],
)
def test_malformed_question_names_file_id_and_field(
    tmp_path: Path, text: str, qid: str, field: str, problem: str
) -> None:
    _write(tmp_path, text)
    with pytest.raises(QuestionFileError) as info:
        load_questions(tmp_path)
    err = info.value
    assert err.path.endswith("q.yaml") and err.qid == qid and err.field == field
    assert problem in str(err) and "q.yaml" in str(err)


def test_invalid_yaml_names_the_line(tmp_path: Path) -> None:
    _write(tmp_path, "id: [unclosed\nquestion: x\n")
    with pytest.raises(QuestionFileError, match=r"q\.yaml: is not valid YAML at line"):
        load_questions(tmp_path)


def test_duplicate_ids_across_files(tmp_path: Path) -> None:
    _write(tmp_path, GOOD, "a.yaml")
    _write(tmp_path, GOOD, "b.yaml")
    with pytest.raises(QuestionFileError, match="duplicate id; also in"):
        load_questions(tmp_path)


def test_empty_folder_and_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(QuestionFileError, match="holds no question files"):
        load_questions(tmp_path)
    with pytest.raises(QuestionFileError, match="is not a folder"):
        load_questions(tmp_path / "nope")


_ONE = (
    "id: q1\nquestion: How many tenants?\ngold_sql: SELECT count(*) FROM core.tenants\n"
    "gold_tables: [core.tenants]\nshape: single\nretrieval: named\n"
)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (_ONE.replace("id: q1", 'id: "q1\\n"'), "field 'id': must match"),
        (_ONE + "shape: join\n", "duplicate key 'shape'"),
        ("a: &a [x, x, x, x]\nb: &b [*a, *a, *a]\nc: [*b, *b, *b]\n", "aliases (*name) are not"),
        (_ONE + "1: x\n", "field '1': unknown field"),
        (_ONE.replace("shape: single", "shape: " + "s" * 5000), "got 'sss"),
        ("x" * 1_000_001, "is larger than 1,000,000 bytes"),
    ],
    ids=["trailing-newline-id", "duplicate-key", "alias-bomb", "int-key", "huge-value", "huge"],
)
def test_broken_question_files_get_one_short_sentence(
    tmp_path: Path, text: str, problem: str
) -> None:
    (tmp_path / "x.yaml").write_text(text)
    with pytest.raises(QuestionFileError) as info:
        load_questions(tmp_path)
    message = str(info.value)
    assert problem in message and len(message) < 400


def test_a_broken_link_is_a_question_file_error(tmp_path: Path) -> None:
    (tmp_path / "x.yaml").symlink_to(tmp_path / "missing.yaml")
    with pytest.raises(QuestionFileError, match="cannot be read"):
        load_questions(tmp_path)
