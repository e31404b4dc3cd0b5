"""The option resolver: CLI over ini over environment over default; clear errors."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_heron.core.errors import ConfigError
from pytest_heron.options import OPTIONS, resolve


def _resolve(cli: dict[str, Any] | None = None, ini: dict[str, Any] | None = None):  # type: ignore[no-untyped-def]
    cli, ini = cli or {}, ini or {}
    return resolve(lambda dest: cli.get(dest), lambda name: ini.get(name))


def test_defaults() -> None:
    s = _resolve({"heron_adapter": "gold"})
    assert (s.scale, s.seed, s.states, s.backend) == ("small", 42, 3, "auto")
    assert s.seeds == (42, 43, 44)
    assert s.timeout == 120 and s.statement_timeout == 30 and s.min_ex is None


def test_cli_wins_over_ini() -> None:
    s = _resolve({"heron_scale": "tiny"}, {"heron_scale": "bench", "heron_seed": "7"})
    assert s.scale == "tiny" and s.seed == 7


def test_dsn_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HERON_DSN", "host=/tmp dbname=x")
    assert _resolve().dsn == "host=/tmp dbname=x"
    assert _resolve({"heron_dsn": "host=elsewhere"}).dsn == "host=elsewhere"


@pytest.mark.parametrize(
    ("cli", "message"),
    [
        ({"heron_scale": "huge"}, "--heron-scale: expected one of tiny, small, bench, large"),
        ({"heron_seed": "abc"}, "--heron-seed: expected a number, got 'abc'"),
        ({"heron_states": "0"}, "--heron-states: must be at least 1"),
        ({"heron_backend": "cloud"}, "--heron-backend: expected one of"),
        ({"heron_backend": "dsn"}, "--heron-backend=dsn needs --heron-dsn"),
        ({"heron_min_ex": "lots"}, "--heron-min-ex: expected a number"),
    ],
)
def test_bad_values_name_the_option(
    cli: dict[str, Any], message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HERON_DSN", raising=False)
    with pytest.raises(ConfigError, match=message.replace("-", r"\-").replace(".", r"\.")):
        _resolve(cli)


def test_every_help_text_ends_with_its_default() -> None:
    for opt in OPTIONS:
        assert "default: " in opt.help and opt.help.endswith(")"), opt.name
