"""Typed reads of JSON records that may come from elsewhere (a journal, a results file, a
submission). Every failure is a :class:`~.errors.ResultsFileError` naming the record
and the field, so a bad file gets one specific sentence, not a traceback."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from pytest_heron.core.errors import ErrorKind, ResultsFileError

JSON = Any  # a value made of dict, list, str, int, float, bool and None only
_REQUIRED: Any = object()


class RecordReader:
    """Typed reads of one JSON object; every failure names the record and the field."""

    def __init__(self, data: Any, where: str) -> None:
        if not isinstance(data, Mapping):
            raise ResultsFileError(f"{where}: expected an object, got {type(data).__name__}")
        self.data: Mapping[str, Any] = data
        self.where = where

    def bad(self, name: str, expected: str) -> ResultsFileError:
        value = repr(self.data.get(name))
        return ResultsFileError(
            f"{self.where}, field {name!r}: expected {expected}, got {value[:80]}"
        )

    def _get(self, name: str, default: Any) -> Any:
        if name in self.data:
            return self.data[name]
        if default is _REQUIRED:
            raise ResultsFileError(f"{self.where}: missing field {name!r}")
        return default

    def text(self, name: str, default: Any = _REQUIRED) -> str:
        value = self._get(name, default)
        if not isinstance(value, str):
            raise self.bad(name, "a string")
        return value

    def opt_text(self, name: str) -> str | None:
        value = self._get(name, None)
        if value is not None and not isinstance(value, str):
            raise self.bad(name, "a string or null")
        return value

    def flag(self, name: str, default: Any = _REQUIRED) -> bool:
        value = self._get(name, default)
        if not isinstance(value, bool):
            raise self.bad(name, "true or false")
        return value

    def integer(self, name: str, default: Any = _REQUIRED, *, low: int = 0) -> int:
        value = self._get(name, default)
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise self.bad(name, f"an integer >= {low}")
        return value

    def opt_integer(self, name: str, *, low: int = 0) -> int | None:
        return None if self._get(name, None) is None else self.integer(name, low=low)

    def opt_number(self, name: str, high: float | None = None) -> float | None:
        value = self._get(name, None)
        if value is None:
            return None
        if (
            not isinstance(value, (int, float))
            or isinstance(value, bool)
            or not math.isfinite(value)
            or value < 0
            or (high is not None and value > high)
        ):
            limit = f" and at most {high:g}" if high is not None else ""
            raise self.bad(name, f"a finite number >= 0{limit}, or null")
        return float(value)

    def texts(self, name: str, default: Any = ()) -> tuple[str, ...]:
        value = self._get(name, default)
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            raise self.bad(name, "a list of strings")
        return tuple(value)

    def opt_texts(self, name: str) -> tuple[str, ...] | None:
        return None if self._get(name, None) is None else self.texts(name)

    def integers(self, name: str) -> tuple[int, ...]:
        value = self._get(name, _REQUIRED)
        if not isinstance(value, (list, tuple)) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in value
        ):
            raise self.bad(name, "a list of integers")
        return tuple(value)

    def verdicts(self, name: str) -> dict[str, bool]:
        value = self._get(name, {})
        if not isinstance(value, Mapping) or not all(
            isinstance(k, str) and isinstance(v, bool) for k, v in value.items()
        ):
            raise self.bad(name, "an object of seed to true/false")
        return dict(value)

    def counters(self, name: str) -> dict[str, int | float] | None:
        value = self._get(name, None)
        if value is None:
            return None
        if not isinstance(value, Mapping) or not all(
            isinstance(k, str)
            and isinstance(v, (int, float))
            and not isinstance(v, bool)
            and math.isfinite(v)
            and v >= 0
            for k, v in value.items()
        ):
            raise self.bad(name, "an object of counter name to a number >= 0, or null")
        return dict(value)

    def scalars(self, name: str) -> dict[str, str | int | float | bool | None]:
        value = self._get(name, {})
        if not isinstance(value, Mapping) or not all(
            isinstance(k, str)
            and (v is None or isinstance(v, (str, int, float, bool)))
            and not (isinstance(v, float) and not math.isfinite(v))
            for k, v in value.items()
        ):
            raise self.bad(name, "an object of name to a string, number, true/false or null")
        return dict(value)

    def kind(self, name: str) -> ErrorKind | None:
        value = self._get(name, None)
        if value is None:
            return None
        try:
            return ErrorKind(value)
        except ValueError:
            known = ", ".join(k.value for k in ErrorKind)
            raise self.bad(name, f"one of {known}, or null") from None
