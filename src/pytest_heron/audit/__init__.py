"""The gold audit: checks that every question's gold SQL is right, stable and discriminating.

Static checks need no database (:mod:`.static`: tables read, volatile functions, ordering,
duplicates); dynamic checks run gold on every state (:mod:`.gold`: executes, returns rows unless
an empty probe, same columns and types in every state, no ties at a LIMIT boundary); mutants of
gold made with sqlglot rewrites must give a different result on at least one state
(:mod:`.mutants`). ``pytest -m audit`` runs all of it (tests/test_audit.py);
``python -m pytest_heron.audit`` runs it on a question folder for authors (:mod:`.cli`).
"""

from __future__ import annotations

from pytest_heron.audit.gold import limit_ties, state_problems
from pytest_heron.audit.mutants import (
    KillRate,
    MutantResult,
    join_equivalence,
    kill_rate,
    mutant_results,
    mutants,
)
from pytest_heron.audit.static import duplicate_problems, static_problems

__all__ = [
    "KillRate",
    "MutantResult",
    "duplicate_problems",
    "join_equivalence",
    "kill_rate",
    "limit_ties",
    "mutant_results",
    "mutants",
    "state_problems",
    "static_problems",
]

from typing import TYPE_CHECKING

from pytest_heron.core.door import opener

# The door: what other stages may import from this one, each name loaded on first use
# (tests/test_layers.py holds every other stage to these names).
if TYPE_CHECKING:
    from pytest_heron.audit.gold import run_gold as run_gold
    from pytest_heron.audit.seal import add_seal_parser as add_seal_parser
    from pytest_heron.audit.seal import seal_folder as seal_folder
    from pytest_heron.audit.variants import draw_variants as draw_variants
    from pytest_heron.audit.variants import from_payload as from_payload
    from pytest_heron.audit.variants import json_lines as json_lines
    from pytest_heron.audit.variants import parse_spec as parse_spec
    from pytest_heron.audit.variants import variant_id as variant_id
    from pytest_heron.audit.variants import variant_ids as variant_ids

_DOOR = {
    "add_seal_parser": "seal",
    "seal_folder": "seal",
    "draw_variants": "variants",
    "from_payload": "variants",
    "json_lines": "variants",
    "parse_spec": "variants",
    "run_gold": "gold",
    "variant_id": "variants",
    "variant_ids": "variants",
}
__getattr__ = opener(globals(), _DOOR)
