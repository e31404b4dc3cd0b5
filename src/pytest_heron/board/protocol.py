"""The board protocol (``board/protocol.yaml``): the conditions every published result ran under.

A run given ``--heron-protocol PATH`` refuses to start when its settings differ from the
protocol's, and records the protocol's name and digest in its conditions; the verifier rejects a
submission whose conditions differ. Pure logic apart from :func:`load_protocol`.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from pytest_heron.core.errors import ConfigError

MAX_PROTOCOL_BYTES = 64 * 1024
SCALES = ("tiny", "small", "bench", "large")
FIELDS = ("name", "model", "temperature", "scale", "seeds", "states", "samples", "tolerance")
BUILTIN_PRICES = "builtin"
# The verifier's own policy: it shapes no run, so its lines are left out of the digest a run
# records (changing the policy must not turn every earlier run into a protocol mismatch).
VERIFIER_FIELDS = ("max_gold_share_unreplayed", "adapter_isolation", "variant_max_gap")
DEFAULT_MAX_GOLD_SHARE_UNREPLAYED = 0.2
_VERIFIER_LINE = re.compile(r"(?:" + "|".join(VERIFIER_FIELDS) + r")\s*:")
ISOLATION_LEVELS = ("user", "namespace", "none", "not-needed")  # see systems/jail.py


@dataclass(frozen=True)
class Protocol:
    """One board protocol. ``seeds`` are consecutive (a run's seeds are N, N+1, ...) and there
    are ``states`` of them; ``tolerance`` is in percentage points; ``prices`` names the price
    table (``builtin``: the one shipped with heron, as of ``prices_as_of``)."""

    name: str
    model: str
    temperature: float
    scale: str
    seeds: tuple[int, ...]
    states: int
    samples: int
    tolerance: float
    prices: str
    prices_as_of: str | None
    digest: str  # 16 hex of SHA-256 over the file's bytes but the lines of VERIFIER_FIELDS
    # the largest share (0..1) of predictions equal to the public gold SQL a ranked row may have
    # without an offline replay that confirms its SQL came from the model
    max_gold_share_unreplayed: float = DEFAULT_MAX_GOLD_SHARE_UNREPLAYED
    # how a run's adapter must have been kept from the harness's files (conditions'
    # adapter_isolation, see systems/jail.py); None: the protocol does not say
    adapter_isolation: tuple[str, ...] | None = None

    def isolation_problem(self, level: str | None) -> str | None:
        """Why a run whose adapter was isolated so (``level``) is refused, or None."""
        if self.adapter_isolation is None or level in self.adapter_isolation:
            return None
        return (
            f"adapter_isolation: the protocol {self.name!r} accepts "
            f"{', '.join(self.adapter_isolation)}, the run has {level!r} (the adapter was not "
            "isolated from the harness's files: run as root, where it gets a user of its own)"
        )

    # how far (points) public multi-state EX may exceed EX on unseen variants (board/variants_check)
    variant_max_gap: float = 10.0

    def mismatches(
        self,
        *,
        scale: str,
        seeds: tuple[int, ...],
        states: int,
        model: str | None,
        temperature: float,
        samples: int,
    ) -> list[str]:
        """Every field of a run's conditions that differs from the protocol, as sentences."""
        wanted: dict[str, Any] = {
            "scale": self.scale,
            "seeds": list(self.seeds),
            "states": self.states,
            "model": self.model,
            "temperature": self.temperature,
            "samples": self.samples,
        }
        got: dict[str, Any] = {
            "scale": scale,
            "seeds": list(seeds),
            "states": states,
            "model": model,
            "temperature": float(temperature),
            "samples": samples,
        }
        return [
            f"{name}: the protocol {self.name!r} says {wanted[name]!r}, the run has {got[name]!r}"
            for name in wanted
            if wanted[name] != got[name]
        ]


def parse_protocol(text: str, where: str) -> Protocol:
    """A protocol from the text of its YAML file; ConfigError names the file and the field."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{where}: not valid YAML ({str(exc)[:200]})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected a mapping of protocol fields")
    missing = [f for f in FIELDS if f not in data]
    if missing:
        raise ConfigError(f"{where}: missing field(s) {', '.join(missing)}")

    def bad(name: str, expected: str) -> ConfigError:
        return ConfigError(f"{where}, field {name!r}: expected {expected}, got {data[name]!r}")

    def number(name: str) -> float:
        value = data[name]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise bad(name, "a number")
        if not math.isfinite(value) or value < 0:
            raise bad(name, "a finite number >= 0")
        return float(value)

    def count(name: str) -> int:
        value = data[name]
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise bad(name, "an integer >= 1")
        return value

    for name in ("name", "model"):
        if not isinstance(data[name], str) or not data[name].strip():
            raise bad(name, "a non-empty string")
    if data["scale"] not in SCALES:
        raise bad("scale", f"one of {', '.join(SCALES)}")
    seeds = data["seeds"]
    if (
        not isinstance(seeds, list)
        or not seeds
        or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in seeds)
    ):
        raise bad("seeds", "a non-empty list of integers >= 0")
    states = count("states")
    if len(seeds) != states or seeds != list(range(seeds[0], seeds[0] + states)):
        raise bad("seeds", f"{states} consecutive seeds (one per state, as a run numbers them)")
    prices = data.get("prices", BUILTIN_PRICES)
    if not isinstance(prices, str):
        raise ConfigError(f"{where}, field 'prices': expected a string, got {prices!r}")
    as_of = data.get("prices_as_of")
    share = data.get("max_gold_share_unreplayed", DEFAULT_MAX_GOLD_SHARE_UNREPLAYED)
    if (
        isinstance(share, bool)
        or not isinstance(share, (int, float))
        or not (math.isfinite(share) and 0 <= share <= 1)
    ):
        raise ConfigError(
            f"{where}, field 'max_gold_share_unreplayed': expected a share from 0 to 1, "
            f"got {share!r}"
        )
    isolation = data.get("adapter_isolation")
    if isolation is not None and (
        not isinstance(isolation, list)
        or not isolation
        or not all(isinstance(v, str) and v in ISOLATION_LEVELS for v in isolation)
    ):
        raise ConfigError(
            f"{where}, field 'adapter_isolation': expected a list of "
            f"{', '.join(ISOLATION_LEVELS)}, got {isolation!r}"
        )
    gap = data.get("variant_max_gap", 10.0)
    if isinstance(gap, bool) or not isinstance(gap, (int, float)) or not 0 <= gap <= 100:
        raise ConfigError(f"{where}, field 'variant_max_gap': expected 0 to 100, got {gap!r}")
    return Protocol(
        name=data["name"],
        model=data["model"],
        temperature=number("temperature"),
        scale=data["scale"],
        seeds=tuple(seeds),
        states=states,
        samples=count("samples"),
        tolerance=number("tolerance"),
        prices=prices,
        prices_as_of=None if as_of is None else str(as_of),
        digest=run_digest(text),
        max_gold_share_unreplayed=float(share),
        adapter_isolation=None if isolation is None else tuple(isolation),
        variant_max_gap=float(gap),
    )


def run_digest(text: str) -> str:
    r"""16 hex of SHA-256 over a protocol file's text without its verifier-only lines (those
    starting with a key of :data:`VERIFIER_FIELDS`), the digest a run under it records.

    >>> run_digest("name: x\n") == run_digest("name: x\nmax_gold_share_unreplayed: 0.5\n")
    True
    """
    kept = "".join(
        line for line in text.splitlines(keepends=True) if not _VERIFIER_LINE.match(line)
    )
    return hashlib.sha256(kept.encode("utf-8")).hexdigest()[:16]


def load_protocol(path: Path) -> Protocol:
    """Read and check a protocol file."""
    try:
        if path.stat().st_size > MAX_PROTOCOL_BYTES:
            raise ConfigError(f"{path}: a protocol file is at most {MAX_PROTOCOL_BYTES} bytes")
        text = path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        shipped = shipped_protocol_path() if isinstance(exc, FileNotFoundError) else None
        hint = f" (the board's protocol is installed at {shipped})" if shipped else ""
        raise ConfigError(f"cannot read the protocol {path}: {exc}{hint}") from None
    return parse_protocol(text, str(path))


def shipped_protocol_path() -> Path | None:
    """The board's ``protocol.yaml`` as this install ships it (the package ``heron_board``,
    which is the repository's ``board/`` folder); None when the install has none."""
    from importlib import resources

    try:
        found = resources.files("heron_board") / "protocol.yaml"
    except ModuleNotFoundError:
        return None
    return Path(str(found)) if found.is_file() else None


def default_protocol_path() -> Path:
    """``board/protocol.yaml`` of the working directory (a checkout of the repository), else
    the copy this install ships (outside the clone, as a vendor runs it); ConfigError that
    suggests ``--protocol`` when there is neither."""
    here = Path("board") / "protocol.yaml"
    if here.is_file():
        return here
    shipped = shipped_protocol_path()
    if shipped is not None:
        return shipped
    raise ConfigError(
        f"no board protocol: there is no {here} in {Path.cwd()} and this install ships none; "
        "pass --protocol FILE (the board's protocol.yaml, from the repository's board/ folder)"
    )
