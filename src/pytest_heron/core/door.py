"""A stage's door: the names its package lets other stages use, loaded on first use.

A stage package's ``__init__`` lists what others may import from it and where each name lives;
``from pytest_heron.compare import compare_results`` then imports ``compare`` and the one module
that defines the name, nothing else, so the door adds no start-up cost (``pytest --help`` and a
warm benchmark session import only what they touch). For the type checker the same names are
imported under ``if TYPE_CHECKING:`` in the ``__init__``.

>>> import types
>>> pkg = types.ModuleType("pkg")
>>> getattr_ = opener(pkg.__dict__, {"dumps": "json"}, package="")
>>> getattr_("dumps").__name__
'dumps'
>>> "dumps" in pkg.__dict__  # cached: the next lookup does not come back here
True
>>> getattr_("nothing")
Traceback (most recent call last):
...
AttributeError: module 'pkg' has no attribute 'nothing' (not in its door)
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any


def opener(
    namespace: MutableMapping[str, Any], names: Mapping[str, str], package: str | None = None
) -> Callable[[str], Any]:
    """The module ``__getattr__`` of a door: ``names`` maps each name to the module (relative to
    the package, dotted) that defines it. ``package`` defaults to the namespace's ``__name__``."""
    base = namespace["__name__"] if package is None else package

    def __getattr__(name: str) -> Any:
        where = names.get(name)
        if where is None:
            raise AttributeError(
                f"module {namespace['__name__']!r} has no attribute {name!r} (not in its door)"
            )
        value = getattr(importlib.import_module(f"{base}.{where}" if base else where), name)
        namespace[name] = value
        return value

    return __getattr__
