"""The adapter registry and the built-in adapters (``gold`` and ``cli``).

Lookup order for ``--heron-adapter NAME``: the ``pytest_heron.adapters`` entry-point group, then
the firstresult hook ``pytest_heron_make_adapter(config, name)`` (so a conftest.py can provide an
adapter without packaging), then ``module:attr``. Only the name crosses process boundaries; each
xdist worker builds its own instance. How the instance is then run (in a process of its own, by
default) is :mod:`pytest_heron.systems.answerers`'s business; ``gold`` and ``cli`` are answered
there by the harness itself.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from importlib.metadata import entry_points
from typing import Any

from pytest_heron.core.errors import AdapterLookupError, InvalidPrediction
from pytest_heron.core.types import Adapter, Prediction

GROUP = "pytest_heron.adapters"


def known_adapters() -> list[str]:
    return sorted({ep.name for ep in entry_points(group=GROUP)})


def instantiate(obj: Any, where: str) -> Adapter:
    """``obj`` as an adapter instance: a class is instantiated, a factory called."""
    needed = ("name", "prepare", "generate")
    if isinstance(obj, type):
        instance = obj()
    elif all(hasattr(obj, a) for a in needed) or not callable(obj):
        instance = obj
    else:  # a factory function
        instance = obj()
    missing = [a for a in needed if not hasattr(instance, a)]
    if missing:
        raise AdapterLookupError(
            f"{where} is not an adapter: it lacks {', '.join(missing)} (see pytest_heron.Adapter)"
        )
    return instance  # type: ignore[no-any-return]


def make_adapter(name: str, hook: Callable[[str], Any] | None = None) -> Adapter:
    """Build the adapter called ``name`` (see the module docstring for the lookup order)."""
    for ep in entry_points(group=GROUP):
        if ep.name == name:
            return instantiate(ep.load(), f"entry point {name!r} ({ep.value})")
    if hook is not None:
        made = hook(name)
        if made is not None:
            return instantiate(made, f"the adapter made by pytest_heron_make_adapter({name!r})")
    if ":" in name:
        module_name, _, attr = name.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise AdapterLookupError(
                f"adapter {name!r}: cannot import module {module_name!r}: {exc}"
            ) from None
        try:
            obj = getattr(module, attr)
        except AttributeError:
            raise AdapterLookupError(
                f"adapter {name!r}: module {module_name!r} has no attribute {attr!r}"
            ) from None
        return instantiate(obj, f"adapter {name!r}")
    raise AdapterLookupError(
        f"unknown adapter {name!r}. Known adapters: {', '.join(known_adapters()) or 'none'}; "
        "or give module:Class, or provide one with the pytest_heron_make_adapter hook."
    )


def wrong_type(type_name: str) -> InvalidPrediction:
    """The error for a ``generate`` that returned a ``type_name``, which is no prediction."""
    return InvalidPrediction(
        f"the adapter returned {type_name}; expected a Prediction, a SQL string "
        "or a mapping with 'sql'"
    )


def reported_tables(raw: Any) -> tuple[list[str] | None, list[str] | None]:
    """``(tables_ranked, tables_in_context)`` of what ``generate`` returned, SQL or not (a
    retrieval-only answer: a Prediction or a mapping with tables and no SQL); ``(None, None)``
    for anything that reports no tables.

    >>> reported_tables({"tables_ranked": ["a.b"]}), reported_tables("SELECT 1")
    ((['a.b'], None), (None, None))
    """

    def texts(value: Any) -> list[str] | None:
        return [str(t) for t in value] if isinstance(value, (list, tuple)) else None

    if isinstance(raw, Prediction):
        return texts(raw.tables_ranked), texts(raw.tables_in_context)
    if isinstance(raw, Mapping):
        context = raw.get("tables", raw.get("tables_in_context"))
        return texts(raw.get("tables_ranked")), texts(context)
    return None, None


def to_prediction(raw: Any) -> Prediction:
    """Normalise what ``generate`` returned; raise AdapterError for anything unusable."""
    if isinstance(raw, Prediction):
        pred = raw
    elif isinstance(raw, str):
        pred = Prediction(sql=raw)
    elif isinstance(raw, Mapping):
        if not isinstance(raw.get("sql"), str):
            raise InvalidPrediction("the adapter returned a mapping without a string 'sql'")
        tables = raw.get("tables", raw.get("tables_in_context"))
        ranked = raw.get("tables_ranked")
        usage = raw.get("usage")
        pred = Prediction(
            sql=raw["sql"],
            tables_in_context=[str(t) for t in tables] if isinstance(tables, list) else None,
            tables_ranked=[str(t) for t in ranked] if isinstance(ranked, list) else None,
            usage={str(k): int(v) for k, v in usage.items()}
            if isinstance(usage, Mapping)
            else None,
        )
    else:
        raise wrong_type(type(raw).__name__)
    if not isinstance(pred.sql, str) or not pred.sql.strip():
        raise InvalidPrediction("the adapter returned an empty SQL string")
    return pred
