"""Load and validate question files.

A question file is YAML holding one question (a mapping) or several (a list of mappings, or a
mapping with a ``questions`` list). Every problem is reported as a :class:`QuestionFileError`
naming the file, the question id and the field.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

import yaml

from pytest_heron.errors import QuestionFileError
from pytest_heron.types import RETRIEVALS, SHAPES, Question

ID_PATTERN = re.compile(r"^[a-z0-9_]+$")
TABLE_PATTERN = re.compile(r"^[a-z_][a-z0-9_]*\.[a-z_][a-z0-9_]*$")
FIELDS = {
    "id",
    "question",
    "gold_sql",
    "gold_tables",
    "shape",
    "retrieval",
    "traps",
    "empty_probe",
}
REQUIRED = ("id", "question", "gold_sql", "gold_tables", "shape", "retrieval")


@dataclass(frozen=True)
class GoldQuestion:
    """One benchmark question as the harness holds it: with its gold SQL, gold tables and the
    file it came from. Never handed to a system under test: adapters get :meth:`public`."""

    id: str
    question: str
    gold_sql: str
    gold_tables: tuple[str, ...]
    shape: str
    retrieval: str
    traps: tuple[str, ...] = ()
    empty_probe: bool = False
    source: str = ""

    @property
    def markers(self) -> tuple[str, ...]:
        """Marker names this question carries (besides ``heron``)."""
        return (
            f"shape_{self.shape}",
            f"retrieval_{self.retrieval}",
            *(f"trap_{t}" for t in self.traps),
        )

    def public(self) -> Question:
        """What a system under test may know of this question (see :class:`Question`)."""
        return Question(
            id=self.id,
            question=self.question,
            dialect="postgres",
            shape=self.shape,
            retrieval=self.retrieval,
            traps=tuple(self.traps),
        )


def builtin_dir() -> Traversable:
    return resources.files("heron_data").joinpath("questions")


def _files(folder: Traversable | Path) -> list[Traversable | Path]:
    if isinstance(folder, Path) and not folder.is_dir():
        raise QuestionFileError(str(folder), None, None, "is not a folder of question files")
    found = [p for p in folder.iterdir() if p.name.endswith((".yaml", ".yml"))]
    return sorted(found, key=lambda p: p.name)


def _parse(raw: Any, path: str, index: int) -> GoldQuestion:
    if not isinstance(raw, dict):
        raise QuestionFileError(path, None, None, f"entry {index + 1} is not a mapping")
    qid = raw.get("id")
    label = qid if isinstance(qid, str) else f"#{index + 1}"

    def bad(field: str, problem: str) -> QuestionFileError:
        return QuestionFileError(path, label, field, problem)

    unknown = sorted(set(raw) - FIELDS)
    if unknown:
        raise bad(unknown[0], f"unknown field; allowed: {', '.join(sorted(FIELDS))}")
    for name in REQUIRED:
        if name not in raw or raw[name] in (None, ""):
            raise bad(name, "is required")
    if not isinstance(qid, str) or not ID_PATTERN.match(qid):
        raise bad("id", f"must match [a-z0-9_]+, got {qid!r}")
    for name in ("question", "gold_sql"):
        if not isinstance(raw[name], str) or not raw[name].strip():
            raise bad(name, "must be a non-empty string")
    tables = raw["gold_tables"]
    if not isinstance(tables, list) or not all(isinstance(t, str) for t in tables):
        raise bad("gold_tables", "must be a list of schema.table names")
    for t in tables:
        if not TABLE_PATTERN.match(t):
            raise bad("gold_tables", f"{t!r} is not a schema.table name")
    if raw["shape"] not in SHAPES:
        raise bad("shape", f"must be one of {', '.join(SHAPES)}, got {raw['shape']!r}")
    if raw["retrieval"] not in RETRIEVALS:
        raise bad("retrieval", f"must be one of {', '.join(RETRIEVALS)}, got {raw['retrieval']!r}")
    traps = raw.get("traps", [])
    if not isinstance(traps, list) or not all(
        isinstance(t, str) and ID_PATTERN.match(t) for t in traps
    ):
        raise bad("traps", "must be a list of names matching [a-z0-9_]+")
    empty_probe = raw.get("empty_probe", False)
    if not isinstance(empty_probe, bool):
        raise bad("empty_probe", "must be true or false")
    return GoldQuestion(
        id=qid,
        question=raw["question"].strip(),
        gold_sql=raw["gold_sql"].strip(),
        gold_tables=tuple(tables),
        shape=raw["shape"],
        retrieval=raw["retrieval"],
        traps=tuple(traps),
        empty_probe=empty_probe,
        source=path,
    )


def _entries(doc: Any, path: str) -> Iterable[Any]:
    if isinstance(doc, dict) and "questions" in doc and "id" not in doc:
        doc = doc["questions"]
    if isinstance(doc, dict):
        return [doc]
    if isinstance(doc, list):
        return doc
    raise QuestionFileError(
        path,
        None,
        None,
        "expected a question, a list of questions, or a mapping with a 'questions' list",
    )


def load_questions(folder: Traversable | Path | None = None) -> list[GoldQuestion]:
    """Every question in ``folder`` (default: the built-in set), sorted by id."""
    folder = builtin_dir() if folder is None else folder
    questions: dict[str, GoldQuestion] = {}
    for file in _files(folder):
        path = str(file)
        try:
            doc = yaml.safe_load(file.read_text(encoding="utf-8"))
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1}" if mark is not None else ""
            raise QuestionFileError(path, None, None, f"is not valid YAML{where}") from None
        except UnicodeDecodeError:
            raise QuestionFileError(path, None, None, "is not UTF-8 text") from None
        for i, raw in enumerate(_entries(doc, path)):
            q = _parse(raw, path, i)
            if q.id in questions:
                raise QuestionFileError(
                    path, q.id, "id", f"duplicate id; also in {questions[q.id].source}"
                )
            questions[q.id] = q
    if not questions:
        raise QuestionFileError(str(folder), None, None, "holds no question files (*.yaml)")
    return [questions[k] for k in sorted(questions)]
