"""How a board row was checked, and so whether it is ranked (issue 41): three tiers.

- :data:`RERUN`, *re-run on unseen questions*: the verifier ran the submitted system itself on
  questions nobody outside had seen (a sealed split, or variants drawn at verification time),
  so its figure cannot come from the public files. Only these rows are ranked.
- :data:`REPLAYED`: the offline replay of the shipped model transcript gave back every
  submitted SQL (the transcript's origin is not proven: docs/verification.md).
- :data:`REEXECUTED`: the submitted SQL was run again and scored; nothing shows what wrote it.

The tier is read from the verdict (pure, no I/O), so the board decides it again on every build.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

RERUN = "re-run on unseen questions"
REPLAYED = "replayed"
REEXECUTED = "re-executed"
TIERS = (RERUN, REPLAYED, REEXECUTED)  # strongest first
RANKED_TIERS = (RERUN,)


def _status(verdict: Mapping[str, Any], name: str) -> str | None:
    part = verdict.get(name)
    status = part.get("status") if isinstance(part, Mapping) else None
    return status if isinstance(status, str) else None


def tier(verdict: Mapping[str, Any]) -> str:
    """The strongest check the verdict records.

    >>> tier({"variants": {"status": "run"}, "replay": {"status": "confirmed"}})
    're-run on unseen questions'
    >>> tier({"sealed": {"status": "run"}}), tier({"replay": {"status": "confirmed"}})
    ('re-run on unseen questions', 'replayed')
    >>> tier({"variants": {"status": "not run"}, "replay": None}), tier({})
    ('re-executed', 're-executed')
    """
    if _status(verdict, "sealed") == "run" or _status(verdict, "variants") == "run":
        return RERUN
    if _status(verdict, "replay") == "confirmed":
        return REPLAYED
    return REEXECUTED


def ranked_tier(name: str) -> bool:
    """Whether a row of this tier may be ranked."""
    return name in RANKED_TIERS
