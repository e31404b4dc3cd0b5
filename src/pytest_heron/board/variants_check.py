"""The verifier's variant check: the submitted system, run again on never-published variants.

A submission's SQL was written for the public questions, whose gold is public. When the
submission names a runnable system (an installed ``pytest_heron.adapters`` entry point, never a
``module:attr`` of the submitter's choosing) and the verifier has an endpoint to give it, the
verifier runs that adapter in a child ``pytest`` on the protocol's states with
``--heron-variants=SEED:1``, SEED being the verifier's hidden seed (so the variants are ones
nobody has seen). The verdict then shows public EX (the reproduced submission) and variant EX
side by side; a public EX more than the protocol's ``variant_max_gap`` points above the variant
EX is a reason to reject (a system that memorised or pasted the public answers). Without an
endpoint, or for an adapter not installed here, the check is "not run" and says why: the
figures stand as reproduced.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pytest_heron.board.protocol import Protocol
from pytest_heron.board.replay import protocol_run
from pytest_heron.core.records import JSON

CHECK_TIMEOUT_S = 3 * 3600


@dataclass
class VariantCheck:
    """What the variant check found (``verdict.json``: ``variants``)."""

    status: str  # "run", "not run" or "failed"
    detail: str
    reasons: list[str] = field(default_factory=list)
    seed: int | None = None
    count: int = 1
    public_ex: float | None = None
    variant_ex: float | None = None
    max_gap: float | None = None

    def to_json(self) -> dict[str, JSON]:
        return {
            "status": self.status,
            "detail": self.detail,
            "seed": self.seed,
            "count": self.count,
            "public_ex": self.public_ex,
            "variant_ex": self.variant_ex,
            "max_gap": self.max_gap,
        }


def check_variants(
    adapter: str,
    protocol: Protocol,
    seed: int,
    public_ex: float | None,
    *,
    endpoint: str | None,
    model: str | None,
    strategy: str | None = None,
    questions_dir: Path | None = None,
    backend: str = "auto",
    dsn: str | None = None,
    count: int = 1,
    progress: Callable[[str], None] | None = None,
) -> VariantCheck:
    """Run ``adapter`` on variants at ``seed`` and compare its EX with ``public_ex``."""
    from pytest_heron.systems import known_adapters

    gap = protocol.variant_max_gap
    base = VariantCheck("not run", "", seed=seed, count=count, public_ex=public_ex, max_gap=gap)
    if not endpoint:
        base.detail = "the variant check was not run: the verifier was given no endpoint"
        return base
    if adapter not in known_adapters():
        base.detail = (
            f"the variant check was not run: adapter {adapter!r} is not an installed "
            "pytest_heron.adapters entry point here"
        )
        return base
    say = progress or (lambda _msg: None)
    say(f"asking {adapter} {count} variant(s) per question at the hidden seed")
    with tempfile.TemporaryDirectory(prefix="heron-variants-") as tmp:
        work = Path(tmp)
        # a fresh cache in work: every variant is asked
        cmd = protocol_run(
            adapter,
            protocol,
            work,
            "variants.json",
            [f"--heron-variants={seed}:{count}"],
            model=model,
            strategy=strategy,
            endpoint=endpoint,
            questions_dir=questions_dir,
            backend=backend,
            dsn=dsn,
        )
        env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
        try:
            done = subprocess.run(
                cmd, cwd=work, capture_output=True, text=True, timeout=CHECK_TIMEOUT_S, env=env
            )
        except subprocess.TimeoutExpired:
            base.status, base.detail = "failed", f"the variant run ran over {CHECK_TIMEOUT_S} s"
            return base
        results = work / "variants.json"
        if not results.is_file():
            tail = (done.stdout + done.stderr).strip().splitlines()[-3:]
            base.status = "failed"
            base.detail = f"the variant run wrote no results (exit {done.returncode}): {tail}"
            return base
        from pytest_heron.results import read_results

        summary = read_results(results).metrics
    base.status = "run"
    base.variant_ex = summary.ex_multistate
    base.detail = f"public EX {public_ex} against variant EX {base.variant_ex}"
    if public_ex is not None and base.variant_ex is not None and public_ex - base.variant_ex > gap:
        base.reasons.append(
            f"multi-state EX on the public questions ({public_ex}) is more than {gap:g} points "
            f"above EX on unseen variants at the hidden seed ({base.variant_ex}): the answers do "
            "not carry over to questions nobody has seen"
        )
    return base
