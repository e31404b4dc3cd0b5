"""Load and validate question files.

A question file is YAML holding one question (a mapping) or several (a list of mappings, or a
mapping with a ``questions`` list). Every problem is reported as a :class:`QuestionFileError`
naming the file, the question id and the field.

Question files are trusted input (their author writes the gold SQL the harness runs as its
admin role), but a broken one must still fail with one short sentence, never a traceback: the
reader refuses files over :data:`MAX_FILE_BYTES`, YAML aliases (so an alias bomb cannot
expand), duplicate keys (which YAML would silently merge), unreadable files and broken links,
and quotes at most a few dozen characters of a bad value.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

import yaml

from pytest_heron.core.errors import QuestionFileError
from pytest_heron.core.types import RETRIEVALS, SHAPES, Question
from pytest_heron.dataset.params import (
    Parameter,
    ParameterError,
    defaults,
    parse_parameters,
    placeholders,
    render,
)

ID_PATTERN = re.compile(r"[a-z0-9_]+")  # always used with fullmatch: no trailing newline
TABLE_PATTERN = re.compile(r"[a-z_][a-z0-9_]*\.[a-z_][a-z0-9_]*")
MAX_FILE_BYTES = 1_000_000
FIELDS = {
    "id",
    "question",
    "gold_sql",
    "gold_tables",
    "shape",
    "retrieval",
    "traps",
    "empty_probe",
    "variants_empty_probe",
    "parameters",
    "parameters_none_reason",
    "rules_out",
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
    # parameters (dataset/params.py): ``question`` and ``gold_sql`` are the templates rendered
    # with the defaults; a variant keeps the templates and names its ``parent``
    parameters: tuple[Parameter, ...] = ()
    template_question: str = ""
    template_sql: str = ""
    parameters_none_reason: str = ""
    rules_out: str = ""
    parent: str | None = None
    # whether the variants are empty probes too (the file's ``variants_empty_probe``, default
    # ``empty_probe``): an empty probe whose only constant cannot vary while staying empty
    variants_empty_probe: bool = False
    # read from a sealed file (dataset/sealed.py): its English goes to the adapter and nowhere
    # else, its gold SQL and rows never leave the harness's memory (docs/sealed.md)
    sealed: bool = False

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


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# libyaml's parser where it is installed (about 10x faster than the pure-Python one, same
# documents: see DECISIONS.md, 2026-12-02); the pure-Python loader otherwise.
_SAFE_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _first_alias(root: Any) -> Any:
    """The first node reached twice from ``root`` (an alias repeats its anchor's node), or None.

    Checked on the composed node graph, before anything is constructed, so an alias bomb is
    refused while it is still a handful of shared nodes."""
    seen: set[int] = set()  # membership only; never iterated
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            return node
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            for key, value in reversed(node.value):
                stack.extend((value, key))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(reversed(node.value))
    return None


class StrictLoader(_SAFE_LOADER):  # type: ignore[misc,valid-type]
    """YAML's safe loader without aliases and without duplicate keys."""

    def get_single_node(self) -> Any:
        node = super().get_single_node()
        alias = None if node is None else _first_alias(node)
        if alias is not None:
            raise yaml.composer.ComposerError(
                None, None, "aliases (*name) are not allowed in question files", alias.start_mark
            )
        return node

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        seen: list[Any] = []
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {_short(key)}", key_node.start_mark
                )
            seen.append(key)
        return super().construct_mapping(node, deep=deep)


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

    unknown = sorted(_short(k) if not isinstance(k, str) else k for k in raw if k not in FIELDS)
    if unknown:
        raise bad(unknown[0], f"unknown field; allowed: {', '.join(sorted(FIELDS))}")
    for name in REQUIRED:
        if name not in raw or raw[name] in (None, ""):
            raise bad(name, "is required")
    if not isinstance(qid, str) or not ID_PATTERN.fullmatch(qid):
        raise bad("id", f"must match [a-z0-9_]+, got {_short(qid)}")
    for name in ("question", "gold_sql"):
        if not isinstance(raw[name], str) or not raw[name].strip():
            raise bad(name, "must be a non-empty string")
    tables = raw["gold_tables"]
    if not isinstance(tables, list) or not all(isinstance(t, str) for t in tables):
        raise bad("gold_tables", "must be a list of schema.table names")
    for t in tables:
        if not TABLE_PATTERN.fullmatch(t):
            raise bad("gold_tables", f"{_short(t)} is not a schema.table name")
    if raw["shape"] not in SHAPES:
        raise bad("shape", f"must be one of {', '.join(SHAPES)}, got {_short(raw['shape'])}")
    if raw["retrieval"] not in RETRIEVALS:
        choices = ", ".join(RETRIEVALS)
        raise bad("retrieval", f"must be one of {choices}, got {_short(raw['retrieval'])}")
    traps = raw.get("traps", [])
    if not isinstance(traps, list) or not all(
        isinstance(t, str) and ID_PATTERN.fullmatch(t) for t in traps
    ):
        raise bad("traps", "must be a list of names matching [a-z0-9_]+")
    empty_probe = raw.get("empty_probe", False)
    if not isinstance(empty_probe, bool):
        raise bad("empty_probe", "must be true or false")
    for name in ("parameters_none_reason", "rules_out"):
        if name in raw and (not isinstance(raw[name], str) or not raw[name].strip()):
            raise bad(name, "must be a non-empty string")
    if "parameters" in raw and "parameters_none_reason" in raw:
        raise bad("parameters", "give parameters or parameters_none_reason, not both")
    variants_empty_probe = raw.get("variants_empty_probe", empty_probe)
    if not isinstance(variants_empty_probe, bool):
        raise bad("variants_empty_probe", "must be true or false")
    if "variants_empty_probe" in raw and "parameters" not in raw:
        raise bad("variants_empty_probe", "needs parameters (it describes the variants)")
    template_question = raw["question"].strip()
    template_sql = raw["gold_sql"].strip()
    params: tuple[Parameter, ...] = ()
    question, gold = template_question, template_sql
    if "parameters" in raw:
        try:
            params = parse_parameters(raw["parameters"])
            declared = {p.name for p in params}
            drawn = {p.name for p in params if p.derived is None}
            derived_from = {p.name: set(placeholders(p.derived)) for p in params if p.derived}
            named_anywhere: set[str] = set()
            for field, template in (("question", template_question), ("gold_sql", template_sql)):
                named = set(placeholders(template))
                if named - declared:
                    raise ParameterError(
                        f"{field} names undeclared {{{sorted(named - declared)[0]}}}"
                    )
                named_anywhere |= named
                # a drawn value must be stated in the English and used by gold (there, also
                # through a derived parameter computed from it); a derived one in either
                reached = set(named)
                todo = sorted(named) if field == "gold_sql" else []
                while todo:
                    for m in sorted(derived_from.get(todo.pop(), ())):
                        if m not in reached:
                            reached.add(m)
                            todo.append(m)
                if drawn - reached:
                    missing = sorted(drawn - reached)[0]
                    raise ParameterError(f"{field} does not name parameter {{{missing}}}")
            if declared - named_anywhere:
                unused = sorted(declared - named_anywhere)[0]
                raise ParameterError(f"neither question nor gold_sql names {{{unused}}}")
            question = render(template_question, defaults(params), sql=False)
            gold = render(template_sql, defaults(params), sql=True)
        except ParameterError as exc:
            raise bad("parameters", str(exc)) from None
    # no gold is refused for its ORDER BY: keys that are not output columns are recovered from
    # gold's result when it is scored (pytest_heron.compare.order)
    return GoldQuestion(
        id=qid,
        question=question,
        gold_sql=gold,
        gold_tables=tuple(tables),
        shape=raw["shape"],
        retrieval=raw["retrieval"],
        traps=tuple(traps),
        empty_probe=empty_probe,
        source=path,
        parameters=params,
        template_question=template_question if params else "",
        template_sql=template_sql if params else "",
        parameters_none_reason=str(raw.get("parameters_none_reason", "")).strip(),
        rules_out=str(raw.get("rules_out", "")).strip(),
        variants_empty_probe=variants_empty_probe,
    )


def entries_of(doc: Any, path: str) -> Iterable[Any]:
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


def load_folder(folder: Traversable | Path | None = None) -> list[GoldQuestion]:
    """Every question in the question folder ``folder`` (default: the built-in set), sorted by
    id. :func:`pytest_heron.dataset.sealed.load_questions` also reads a sealed file."""
    folder = builtin_dir() if folder is None else folder
    return from_entries(_read_folder(folder), str(folder))


def _read_folder(folder: Traversable | Path) -> list[tuple[str, Any]]:
    """(path, raw mapping) for every entry of every question file in ``folder``."""
    entries: list[tuple[str, Any]] = []
    for file in _files(folder):
        path = str(file)
        try:
            data = file.read_bytes()
            if len(data) > MAX_FILE_BYTES:
                too_big = f"is larger than {MAX_FILE_BYTES:,} bytes"
                raise QuestionFileError(path, None, None, too_big)
            doc = yaml.load(data.decode("utf-8"), Loader=StrictLoader)  # a SafeLoader
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1}" if mark is not None else ""
            problem = getattr(exc, "problem", None)
            detail = f": {problem}" if problem else ""
            raise QuestionFileError(path, None, None, f"is not valid YAML{where}{detail}") from None
        except UnicodeDecodeError:
            raise QuestionFileError(path, None, None, "is not UTF-8 text") from None
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
            raise QuestionFileError(path, None, None, f"cannot be read ({reason})") from None
        entries.extend((path, raw) for raw in entries_of(doc, path))
    return entries


def raw_entries(folder: Path) -> list[tuple[str, Any]]:
    """The raw mappings of a question folder, each with the file it came from, after every
    question in it has loaded (so a broken folder fails here with the loader's sentence)."""
    entries = _read_folder(folder)
    from_entries(entries, str(folder))
    return entries


def from_entries(entries: Iterable[tuple[str, Any]], where: str) -> list[GoldQuestion]:
    """The questions of (path, raw mapping) entries, checked and sorted by id."""
    questions: dict[str, GoldQuestion] = {}
    index: dict[str, int] = {}
    for path, raw in entries:
        i = index[path] = index.get(path, -1) + 1
        q = _parse(raw, path, i)
        if q.id in questions:
            raise QuestionFileError(
                path, q.id, "id", f"duplicate id; also in {questions[q.id].source}"
            )
        questions[q.id] = q
    if not questions:
        raise QuestionFileError(where, None, None, "holds no question files (*.yaml)")
    return [questions[k] for k in sorted(questions)]


def questions_digest(questions: Mapping[str, GoldQuestion]) -> str:
    """16 hex of SHA-256 over every question's id and gold SQL, in id order."""
    digest = hashlib.sha256()
    for q in questions.values():
        digest.update(f"{q.id}\x1f{q.gold_sql}\x1e".encode())
    return digest.hexdigest()[:16]


def citus_golds() -> dict[str, tuple[str, str]]:
    """The built-in questions' Citus-valid gold SQL: ``{id: (gold_sql, reason)}``, from
    ``heron_data/citus_golds.yaml`` (trusted; see its header and docs/citus.md)."""
    text = resources.files("heron_data").joinpath("citus_golds.yaml").read_text("utf-8")
    doc = yaml.safe_load(text) or {}
    return {str(k): (str(v["gold_sql"]), str(v["reason"])) for k, v in doc.items()}


def for_layout(questions: list[GoldQuestion], layout: str) -> list[GoldQuestion]:
    """The built-in questions as scored on ``layout``: on ``citus``, the questions
    :func:`citus_golds` lists get their Citus-valid gold; the others, and every question on
    ``standard``, are returned as they are."""
    if layout != "citus":
        return questions
    golds = citus_golds()
    return [
        dataclasses.replace(q, gold_sql=golds[q.id][0]) if q.id in golds else q for q in questions
    ]
