"""The error hierarchy: every message says what went wrong, where, and what to do."""

from __future__ import annotations

from enum import StrEnum


class ErrorKind(StrEnum):
    """Why a question has no usable answer (the ``error_kind`` of an outcome; the JSON holds the
    value). ``None`` in an outcome means the answer ran: right or wrong, it is not an error."""

    ADAPTER_ERROR = "adapter_error"  # the adapter raised, or could not be prepared
    ADAPTER_TIMEOUT = "adapter_timeout"  # the adapter did not answer within --heron-timeout
    INVALID_PREDICTION = "invalid_prediction"  # what the adapter returned is not a prediction
    REJECTED = "rejected"  # the guard refused the SQL (not exactly one read-only query)
    DB_ERROR = "db_error"  # PostgreSQL refused or failed the query
    TIMEOUT = "timeout"  # the query ran past --heron-statement-timeout
    RESULT_TOO_LARGE = "result_too_large"  # the result passed a row, cell or byte cap
    INFRA_CRASH = "infra_crash"  # the harness failed (never the adapter's fault)


# how an LLM adapter's message starts when nothing listened at the endpoint (the client's
# wording); a resumed run asks such questions again (the endpoint was down, not the model wrong)
ENDPOINT_REFUSED = "cannot connect to the endpoint "


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


class OutOfTime(AdapterError, TimeoutError):
    """An adapter ran out of the question's time (``adapter_timeout``). Being a TimeoutError too,
    it is classified like the harness's own deadline and like a plain TimeoutError raised by an
    adapter: every adapter's "out of time" is one kind."""


def adapter_failure_kind(exc: BaseException) -> ErrorKind:
    """The one classification of an adapter's exception: any TimeoutError (an
    :class:`OutOfTime` included) is ``adapter_timeout``; an InvalidPrediction is
    ``invalid_prediction``; anything else ``adapter_error``.

    >>> adapter_failure_kind(OutOfTime("out of time")), adapter_failure_kind(AdapterError("x"))
    (<ErrorKind.ADAPTER_TIMEOUT: 'adapter_timeout'>, <ErrorKind.ADAPTER_ERROR: 'adapter_error'>)
    """
    if isinstance(exc, TimeoutError):
        return ErrorKind.ADAPTER_TIMEOUT
    if isinstance(exc, InvalidPrediction):
        return ErrorKind.INVALID_PREDICTION
    return ErrorKind.ADAPTER_ERROR


class ResultsFileError(HeronError):
    """A results file, journal record or submission file is not what it claims to be; the
    message names the record and the field."""


class AdapterTimeout(Exception):
    """The adapter did not answer within ``--heron-timeout`` (``adapter_timeout``). Not a
    :class:`HeronError`: raised by the answerers (systems/answerers.py, systems/process.py) and
    read by the scorer."""
