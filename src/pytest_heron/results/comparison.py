"""Two runs side by side, paired question by question: what ``heron compare A B`` prints and
what ``--heron-compare`` prints at the end of a session (pure: no I/O).

:func:`compare_runs` builds a :class:`Comparison`; :meth:`Comparison.lines` is the table and the
pairing (regressed, fixed, both right, both wrong, McNemar's exact p);
:attr:`Comparison.mismatched` names the conditions that make the two runs' numbers not
comparable as they stand; :meth:`Comparison.drop` is how many points a metric fell from A to B,
which :func:`parse_fail` thresholds (``--heron-compare-fail=ex:2``) gate.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pytest_heron.core.errors import ConfigError, HeronError
from pytest_heron.core.records import JSON
from pytest_heron.core.safe_text import one_line
from pytest_heron.results.document import Results
from pytest_heron.scoring import Summary, mcnemar_exact

# key of --heron-compare-fail -> (label, the metric); all are 0-100, higher is better
METRICS: dict[str, tuple[str, Callable[[Summary], float | None]]] = {
    "ex": ("multi-state EX@1", lambda m: m.ex_multistate),
    "ex1": ("EX@1 (first state)", lambda m: m.ex1),
    "soft_f1": ("Soft-F1", lambda m: m.soft_f1),
    "superset": ("superset EX", lambda m: m.ex_superset),
    "ves": ("VES", lambda m: m.ves),
    "grade": ("Grade", lambda m: m.grade),
}


LABELS = 28  # the width of the label column
COLUMN_A = 36  # the narrowest column A


def _figures(r: Results) -> dict[str, JSON]:
    return {"metrics": r.metrics.to_json(), "questions": len(r.outcomes)}


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}%"


def _adapter(r: Results) -> str:
    c = r.conditions
    named = "" if c.adapter_name in (None, c.adapter) else f" ({c.adapter_name})"
    return f"{c.adapter}{named} {c.adapter_version or ''}"


def _at_k(r: Results) -> str:
    at_k = r.metrics.set_recall_at_k
    return "n/a" if not at_k else " / ".join(_pct(v) for v in at_k.values())


def _seeds(r: Results) -> str:
    return ",".join(str(s) for s in r.conditions.seeds)


@dataclass(frozen=True)
class Comparison:
    a: Results
    b: Results
    a_name: str
    b_name: str
    mismatched: tuple[str, ...]  # conditions that differ (scale, seeds, data version, ...)
    common: tuple[str, ...]  # question ids in both
    wins: tuple[str, ...]  # A right, B wrong: "regressed" when B is the newer run
    losses: tuple[str, ...]  # B right, A wrong: "fixed"

    def cells(self) -> list[tuple[str, str, str]]:
        """The side-by-side table: (label, A's cell, B's cell), each cell one line of text."""
        first, second = self.a, self.b
        shows: list[tuple[str, Callable[[Results], str]]] = [
            ("", lambda r: "A" if r is first else "B"),
            ("file", lambda r: self.a_name if r is first else self.b_name),
            ("adapter", _adapter),
            ("model", lambda r: r.conditions.model or "n/a"),
            ("scale, seeds", lambda r: f"{r.conditions.scale} {_seeds(r)}"),
            ("data version", lambda r: r.conditions.data_version or "n/a"),
            (
                "questions (digest)",
                lambda r: f"{len(r.outcomes)} ({r.conditions.questions_digest or 'n/a'})",
            ),
            ("multi-state EX@1", lambda r: _pct(r.metrics.ex_multistate)),
            ("EX@1 (first state)", lambda r: _pct(r.metrics.ex1)),
            ("Soft-F1", lambda r: _pct(r.metrics.soft_f1)),
            ("superset EX", lambda r: _pct(r.metrics.ex_superset)),
            ("VES", lambda r: "n/a" if r.metrics.ves is None else f"{r.metrics.ves:.1f}"),
            ("Set-Recall@5/@10/@20", _at_k),
            ("errors", lambda r: str(r.metrics.errors)),
            ("Grade", lambda r: "n/a" if r.metrics.grade is None else f"{r.metrics.grade:.1f}"),
            ("not in the file", lambda r: ", ".join(r.metrics.absent) or "-"),
        ]
        # results-file text: one line each
        return [(label, one_line(show(first)), one_line(show(second))) for label, show in shows]

    def both_wrong(self) -> list[str]:
        ca = {o.id: o.correct for o in self.a.outcomes}
        return [q for q in self.common if not ca[q] and q not in self.losses + self.wins]

    def lines(self) -> list[str]:
        cells = self.cells()
        # column A is as wide as its widest cell (a long run name included) and two spaces more,
        # so B's column never runs into it; at least the width it always had
        width = max(COLUMN_A, *(len(a) + 2 for _label, a, _b in cells))
        table = [f"{label:<{LABELS}}{a:<{width}}{b}".rstrip() for label, a, b in cells]
        only_a = len({o.id for o in self.a.outcomes} - set(self.common))
        only_b = len({o.id for o in self.b.outcomes} - set(self.common))
        both_wrong = self.both_wrong()
        both_right = len(self.common) - len(self.wins) - len(self.losses) - len(both_wrong)
        return [
            *table,
            "",
            f"questions compared: {len(self.common)} (only in A: {only_a}, only in B: {only_b})",
            f"regressed (A right, B wrong): {len(self.wins)} {' '.join(self.wins)}".rstrip(),
            f"fixed (B right, A wrong): {len(self.losses)} {' '.join(self.losses)}".rstrip(),
            f"both right: {both_right}",
            f"both wrong: {len(both_wrong)} {' '.join(both_wrong)}".rstrip(),
            f"McNemar exact p = {mcnemar_exact(len(self.wins), len(self.losses)):.4g}",
        ]

    def to_json(self) -> dict[str, JSON]:
        """What :meth:`lines` says, for a program (``heron compare --json``): each run's file,
        conditions and metrics; the pairing; the drop of every gated metric (A minus B)."""

        def side(r: Results, name: str) -> dict[str, JSON]:
            return {"file": name, "conditions": r.conditions.to_json(), **_figures(r)}

        both_wrong = self.both_wrong()
        return {
            "a": side(self.a, self.a_name),
            "b": side(self.b, self.b_name),
            "mismatched": list(self.mismatched),
            "compared": len(self.common),
            "only_in_a": sorted({o.id for o in self.a.outcomes} - set(self.common)),
            "only_in_b": sorted({o.id for o in self.b.outcomes} - set(self.common)),
            "regressed": list(self.wins),
            "fixed": list(self.losses),
            "both_right": len(self.common) - len(self.wins) - len(self.losses) - len(both_wrong),
            "both_wrong": both_wrong,
            "mcnemar_p": mcnemar_exact(len(self.wins), len(self.losses)),
            "drop": {key: self.drop(key) for key in METRICS},
        }

    def warning(self) -> str | None:
        if not self.mismatched:
            return None
        return (
            f"the runs differ in {', '.join(self.mismatched)}: their numbers are not comparable "
            "as they stand"
        )

    def verdict(self, strict: bool, max_drop: float | None) -> tuple[int, list[str]]:
        """``heron compare``'s exit status and the lines it writes to stderr: 2 when the runs'
        conditions differ and ``strict``; 1 when B's multi-state EX is more than ``max_drop``
        points below A's; else 0 (a warning when the conditions differ)."""
        said = []
        warning = self.warning()
        if warning:
            said.append(f"warning: {warning}")
            if strict:
                return 2, [*said, "heron: refusing (--strict)"]
        ex_a, ex_b = self.a.metrics.ex_multistate or 0.0, self.b.metrics.ex_multistate or 0.0
        if max_drop is not None and ex_b < ex_a - max_drop:
            said.append(
                f"heron: B's multi-state EX {ex_b:.1f}% is {ex_a - ex_b:.1f} points below A's "
                f"{ex_a:.1f}% (more than --max-drop {max_drop:g})"
            )
            return 1, said
        return 0, said

    def drop(self, key: str) -> float | None:
        """Points metric ``key`` (a key of :data:`METRICS`) fell from A to B; None when either
        run has no value for it."""
        _label, of = METRICS[key]
        a, b = of(self.a.metrics), of(self.b.metrics)
        return None if a is None or b is None else a - b

    def failures(self, limits: dict[str, float]) -> list[str]:
        """One sentence per metric that fell by more than its limit (``--heron-compare-fail``)."""
        out = []
        for key, limit in limits.items():
            drop = self.drop(key)
            if drop is not None and drop > limit:
                label, of = METRICS[key]
                a, b = of(self.a.metrics), of(self.b.metrics)
                out.append(
                    f"{label} fell {drop:.1f} points ({a:.1f} -> {b:.1f}), "
                    f"more than {key}:{limit:g}"
                )
        return out


def compare_runs(a: Results, b: Results, a_name: str, b_name: str) -> Comparison:
    """Pair ``a`` and ``b`` question by question; HeronError when they share no question."""
    ca = {o.id: o.correct for o in a.outcomes}
    cb = {o.id: o.correct for o in b.outcomes}
    common = tuple(sorted(set(ca) & set(cb)))
    if not common:
        raise HeronError("the two results files have no question in common")
    checks: tuple[tuple[str, Callable[[Results], object]], ...] = (
        ("scale", lambda r: r.conditions.scale),
        ("seeds", lambda r: r.conditions.seeds),
        ("data version", lambda r: r.conditions.data_version),
        ("question set", lambda r: sorted(o.id for o in r.outcomes)),
        ("question digest", lambda r: r.conditions.questions_digest),
    )
    return Comparison(
        a=a,
        b=b,
        a_name=a_name,
        b_name=b_name,
        mismatched=tuple(name for name, of in checks if of(a) != of(b)),
        common=common,
        wins=tuple(q for q in common if ca[q] and not cb[q]),
        losses=tuple(q for q in common if cb[q] and not ca[q]),
    )


def parse_fail(text: str, option: str = "--heron-compare-fail") -> dict[str, float]:
    """``ex:2,grade:5`` as ``{"ex": 2.0, "grade": 5.0}``: each metric may fall at most that
    many points. ConfigError naming the part that is wrong.

    >>> parse_fail("ex:2, soft_f1:0.5")
    {'ex': 2.0, 'soft_f1': 0.5}
    """
    limits: dict[str, float] = {}
    for part in (p.strip() for p in text.split(",")):
        key, sep, value = part.partition(":")
        key = key.strip()
        if not sep or key not in METRICS:
            raise ConfigError(
                f"{option}: expected KEY:POINTS[,KEY:POINTS...] with KEY one of "
                f"{', '.join(METRICS)}; got {part!r}"
            )
        try:
            points = float(value)
        except ValueError:
            points = float("nan")
        if not points >= 0 or points == float("inf"):
            raise ConfigError(f"{option}: {key}: expected a number of points >= 0, got {value!r}")
        limits[key] = points
    return limits
