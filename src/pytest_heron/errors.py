"""The error hierarchy: every message says what went wrong, where, and what to do."""

from __future__ import annotations


class HeronError(Exception):
    """Base class of every error pytest-heron raises on purpose."""


class ConfigError(HeronError):
    """An option or ini value is invalid."""


class QuestionFileError(HeronError):
    """A question file is malformed; the message names the file, the question and the field."""

    def __init__(self, path: str, qid: str | None, field: str | None, problem: str) -> None:
        where = path
        if qid:
            where += f", question {qid!r}"
        if field:
            where += f", field {field!r}"
        super().__init__(f"{where}: {problem}")
        self.path = path
        self.qid = qid
        self.field = field


class SpecError(HeronError):
    """A generation spec or DDL file in heron_data is inconsistent."""


class BackendError(HeronError):
    """No PostgreSQL server could be obtained with the chosen backend."""


class AdapterLookupError(HeronError):
    """An adapter name could not be resolved."""


class AdapterError(HeronError):
    """An adapter failed while answering a question (recorded as ``adapter_error``)."""


class InvalidPrediction(AdapterError):
    """An adapter returned something that is not a usable prediction (``invalid_prediction``)."""
