"""Row counts from the specs alone, for scales too big to plan exactly in a test."""

from __future__ import annotations

from functools import cache

from pytest_heron.generate.spec import TENANT_TABLE, Bundle


def expected_rows(bundle: Bundle, scale: str) -> int:
    """Expected total rows of a scale: exact for counted and lookup tables, the mean number of
    children for ``per:`` tables."""
    factors = bundle.scales[scale]

    @cache
    def rows(fq: str) -> float:
        spec = bundle.table(fq)
        if spec.data is not None:
            return float(len(spec.data))
        assert spec.rows is not None
        if "per" in spec.rows:
            lo, hi = int(spec.rows.get("min", 1)), int(spec.rows.get("max", 1))
            return rows(str(spec.rows["per"])) * (lo + hi) / 2
        grow = spec.rows.get("grow", "rows")
        factor = 1 if grow == "fixed" else factors[grow]
        return float(int(spec.rows["count"]) * factor)

    rows(TENANT_TABLE)
    return round(sum(rows(fq) for fq in bundle.tables))
