"""The price table behind the cost metric (``heron_data/prices.yaml`` or ``--heron-prices``)."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path
from typing import Any

import yaml

from pytest_heron.core.errors import ConfigError


def load_prices(path: Path | None = None) -> dict[str, Any]:
    """The table as a dict, checked: ``models`` maps names to ``{prompt, completion}`` numbers
    (USD per million tokens), optionally ``cached_prompt`` (the price of prompt tokens the
    provider served from its cache). Raises ConfigError naming the file and entry on a bad
    table."""
    where = str(path) if path is not None else "the built-in price table"
    try:
        text = (
            path.read_text(encoding="utf-8")
            if path is not None
            else files("heron_data").joinpath("prices.yaml").read_text(encoding="utf-8")
        )
        table = yaml.safe_load(text)
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"--heron-prices: cannot read {where}: {exc}") from None
    models = table.get("models") if isinstance(table, dict) else None
    if not isinstance(models, dict):
        raise ConfigError(f"--heron-prices: {where} has no 'models' mapping")
    for name, entry in models.items():
        ok = (
            isinstance(entry, dict)
            and all(
                isinstance(entry.get(k), (int, float)) and entry[k] >= 0
                for k in ("prompt", "completion")
            )
            and (
                entry.get("cached_prompt") is None
                or (
                    isinstance(entry["cached_prompt"], (int, float))
                    and not isinstance(entry["cached_prompt"], bool)
                    and entry["cached_prompt"] >= 0
                )
            )
        )
        if not ok:
            raise ConfigError(
                f"--heron-prices: {where}, model {name!r}: expected "
                "{prompt: N, completion: N} and optionally cached_prompt: N "
                "(USD per million tokens, >= 0)"
            )
    return dict(table, source=where)


def price_for(model: str | None, table: dict[str, Any]) -> dict[str, Any] | None:
    """The price of ``model``: exact name first, then the part after the last ``/``.

    >>> t = {"models": {"gpt-4o": {"prompt": 2.5, "completion": 10}}, "source": "x"}
    >>> price_for("openai/gpt-4o", t)["prompt"], price_for("llama3", t)
    (2.5, None)
    """
    if not model:
        return None
    models = table["models"]
    for name in (model, model.rsplit("/", 1)[-1]):
        if name in models:
            cached = models[name].get("cached_prompt")
            return {
                "model": name,
                "prompt": float(models[name]["prompt"]),
                "completion": float(models[name]["completion"]),
                "cached_prompt": None if cached is None else float(cached),
                "as_of": table.get("as_of"),
                "source": table.get("source"),
            }
    return None
