"""Counterexample text: short, capped renderings of values and rows."""

from __future__ import annotations

import datetime as dt
import decimal
import uuid
from collections.abc import Sequence
from typing import Final

REPR_CAP: Final = 200


def cap(text: str, limit: int = REPR_CAP) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def fmt_value(v: object, depth: int = 0) -> str:
    if depth > 4:
        return "…"
    if v is None:
        return "NULL"
    if isinstance(v, str):
        return repr(v[:REPR_CAP] + "…" if len(v) > REPR_CAP else v)
    if isinstance(v, (bytes, bytearray, memoryview)):
        raw = bytes(v[:REPR_CAP])
        return repr(raw) + ("…" if len(v) > REPR_CAP else "")
    if isinstance(v, bool):
        return repr(v)
    if isinstance(v, decimal.Decimal):
        return str(v)
    if isinstance(v, dt.datetime):
        return v.isoformat(sep=" ")
    if isinstance(v, (dt.date, dt.time)):
        return v.isoformat()
    if isinstance(v, (dt.timedelta, uuid.UUID)):
        return str(v)
    if isinstance(v, list):
        return "[" + ", ".join(fmt_value(x, depth + 1) for x in v[:20]) + "]"
    if isinstance(v, tuple):
        return fmt_row(v, depth + 1)
    if isinstance(v, dict):
        items = list(v.items())[:20]
        inner = ", ".join(f"{fmt_value(k, depth + 1)}: {fmt_value(x, depth + 1)}" for k, x in items)
        return "{" + inner + "}"
    return cap(repr(v))


def fmt_row(row: Sequence[object], depth: int = 0) -> str:
    parts = [fmt_value(v, depth) for v in row[:50]]
    if len(row) > 50:
        parts.append("…")
    body = ", ".join(parts) + ("," if len(parts) == 1 else "")
    return cap("(" + body + ")")
