"""The JSON form of result rows shared by the Python and JavaScript comparator tests.

Plain JSON cannot tell an integer from a float or a numeric, nor carry dates or bytes, so every
value that is not null, a boolean or a string is an object with one tag::

    {"int": "12"}  {"float": "0.1"}  {"decimal": "12.50"}  {"bytes": "00ff"}
    {"uuid": "..."}  {"timestamp": "2024-01-01T12:00:00+02:00"}  {"date": "2024-01-01"}
    {"time": "10:30:00"}  {"interval_us": "86400000000"}  {"list": [...]}  {"json": {...}}
    {"set": [...]}  (Python only)

A row is a JSON array of values; anything else stands for a malformed row.
tests/js/wire.mjs reads the same form into the values the JavaScript comparator takes.
"""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal
from typing import Any


def encode(v: Any) -> Any:
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, int):
        return {"int": str(v)}
    if isinstance(v, float):
        return {"float": repr(v)}
    if isinstance(v, Decimal):
        return {"decimal": str(v)}
    if isinstance(v, bytes):
        return {"bytes": v.hex()}
    if isinstance(v, uuid.UUID):
        return {"uuid": str(v)}
    if isinstance(v, dt.datetime):
        return {"timestamp": v.isoformat()}
    if isinstance(v, dt.date):
        return {"date": v.isoformat()}
    if isinstance(v, dt.time):
        return {"time": v.isoformat()}
    if isinstance(v, dt.timedelta):
        return {"interval_us": str(v // dt.timedelta(microseconds=1))}
    if isinstance(v, list):
        return {"list": [encode(x) for x in v]}
    if isinstance(v, dict):
        return {"json": {str(k): encode(x) for k, x in v.items()}}
    if isinstance(v, (set, frozenset)):
        return {"set": sorted((encode(x) for x in v), key=repr)}
    raise TypeError(f"no JSON form for {type(v).__name__}")


def decode(v: Any) -> Any:
    if v is None or isinstance(v, (bool, str)):
        return v
    if not isinstance(v, dict) or len(v) != 1:
        raise ValueError(f"not a tagged value: {v!r}")
    ((tag, x),) = v.items()
    if tag == "int":
        return int(x)
    if tag == "float":
        return float(x)
    if tag == "decimal":
        return Decimal(x)
    if tag == "bytes":
        return bytes.fromhex(x)
    if tag == "uuid":
        return uuid.UUID(x)
    if tag == "timestamp":
        return dt.datetime.fromisoformat(x)
    if tag == "date":
        return dt.date.fromisoformat(x)
    if tag == "time":
        return dt.time.fromisoformat(x)
    if tag == "interval_us":
        return dt.timedelta(microseconds=int(x))
    if tag == "list":
        return [decode(e) for e in x]
    if tag == "json":
        return {k: decode(e) for k, e in x.items()}
    if tag == "set":
        return {decode(e) for e in x}
    raise ValueError(f"unknown tag {tag!r}")


def encode_rows(rows: Any) -> Any:
    return [list(map(encode, r)) if isinstance(r, tuple) else encode(r) for r in rows]


def decode_rows(rows: Any) -> Any:
    return [tuple(map(decode, r)) if isinstance(r, list) else decode(r) for r in rows]
