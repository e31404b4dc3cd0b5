"""The adapter registry and the built-in adapters (``gold`` and ``cli``).

Lookup order for ``--heron-adapter NAME``: the ``pytest_heron.adapters`` entry-point group, then
the firstresult hook ``pytest_heron_make_adapter(config, name)`` (so a conftest.py can provide an
adapter without packaging), then ``module:attr`` (or ``path/to/file.py:attr``, a file). Only the
name crosses process boundaries; each xdist worker builds its own instance. How the instance is
then run (in a process of its own, by default) is :mod:`pytest_heron.systems.answerers`'s
business; ``gold`` and ``cli`` are answered there by the harness itself.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Callable, Mapping
from importlib.metadata import entry_points
from pathlib import Path
from types import ModuleType
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
        module_name, _, attr = name.rpartition(":")
        module = _import(name, module_name)
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


def is_file_path(module_name: str) -> bool:
    """``./my_adapter.py`` or ``adapters/tool.py`` (a file), not ``my_pkg.adapter`` (a module).

    >>> is_file_path("./my_adapter.py"), is_file_path("sub/tool"), is_file_path("my_pkg.tool")
    (True, True, False)
    """
    return module_name.endswith(".py") or "/" in module_name or os.sep in module_name


def _import(name: str, module_name: str) -> ModuleType:
    """The module of ``--heron-adapter MODULE:ATTR``: an importable module, or a Python file
    named by its path (relative to the current folder), loaded as a script is, with its own
    folder first on the import path so that it can import the modules beside it."""
    if not is_file_path(module_name):
        try:
            return importlib.import_module(module_name)
        except (ImportError, TypeError, ValueError) as exc:  # TypeError: a relative name
            raise AdapterLookupError(
                f"adapter {name!r}: cannot import module {module_name!r}: {exc}"
            ) from None
    path = Path(module_name).expanduser().absolute()
    if path.suffix != ".py" or not path.is_file():
        raise AdapterLookupError(
            f"adapter {name!r}: no Python file {path} (a path is FILE.py:Class, relative to "
            f"{Path.cwd()}; or give module:Class)"
        )
    key = f"heron_adapter_file.{path.stem}"  # never shadows an installed module of that name
    spec = importlib.util.spec_from_file_location(key, path)
    if spec is None or spec.loader is None:
        raise AdapterLookupError(f"adapter {name!r}: {path} cannot be loaded as Python")
    if str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))
    module = importlib.util.module_from_spec(spec)
    sys.modules[key] = module  # dataclasses and pickling find it by name
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[key]
        raise AdapterLookupError(
            f"adapter {name!r}: importing {path} failed: {type(exc).__name__}: {exc}"
        ) from exc
    return module


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
