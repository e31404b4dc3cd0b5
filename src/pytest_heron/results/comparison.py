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

    def lines(self) -> list[str]:
        first, second = self.a, self.b

        def row(label: str, show: Callable[[Results], str]) -> str:  # results-file text: one line
            return f"{label:<28}{one_line(show(first)):<36}{one_line(show(second))}"

        only_a = len({o.id for o in first.outcomes} - set(self.common))
        only_b = len({o.id for o in second.outcomes} - set(self.common))
        ca = {o.id: o.correct for o in first.outcomes}
        both_wrong = [q for q in self.common if not ca[q] and q not in self.losses]
        both_wrong = [q for q in both_wrong if q not in self.wins]
        both_right = len(self.common) - len(self.wins) - len(self.losses) - len(both_wrong)
        return [
            row("", lambda r: "A" if r is first else "B"),
            row("file", lambda r: self.a_name if r is first else self.b_name),
            row("adapter", _adapter),
            row("model", lambda r: r.conditions.model or "n/a"),
            row("scale, seeds", lambda r: f"{r.conditions.scale} {_seeds(r)}"),
            row("data version", lambda r: r.conditions.data_version or "n/a"),
            row(
                "questions (digest)",
                lambda r: f"{len(r.outcomes)} ({r.conditions.questions_digest or 'n/a'})",
            ),
            row("multi-state EX@1", lambda r: _pct(r.metrics.ex_multistate)),
            row("EX@1 (first state)", lambda r: _pct(r.metrics.ex1)),
            row("Soft-F1", lambda r: _pct(r.metrics.soft_f1)),
            row("superset EX", lambda r: _pct(r.metrics.ex_superset)),
            row("VES", lambda r: "n/a" if r.metrics.ves is None else f"{r.metrics.ves:.1f}"),
            row("Set-Recall@5/@10/@20", _at_k),
            row("errors", lambda r: str(r.metrics.errors)),
            row("Grade", lambda r: "n/a" if r.metrics.grade is None else f"{r.metrics.grade:.1f}"),
            row("not in the file", lambda r: ", ".join(r.metrics.absent) or "-"),
            "",
            f"questions compared: {len(self.common)} (only in A: {only_a}, only in B: {only_b})",
            f"regressed (A right, B wrong): {len(self.wins)} {' '.join(self.wins)}".rstrip(),
            f"fixed (B right, A wrong): {len(self.losses)} {' '.join(self.losses)}".rstrip(),
            f"both right: {both_right}",
            f"both wrong: {len(both_wrong)} {' '.join(both_wrong)}".rstrip(),
            f"McNemar exact p = {mcnemar_exact(len(self.wins), len(self.losses)):.4g}",
        ]

    def warning(self) -> str | None:
        if not self.mismatched:
            return None
        return (
            f"the runs differ in {', '.join(self.mismatched)}: their numbers are not comparable "
            "as they stand"
        )

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
