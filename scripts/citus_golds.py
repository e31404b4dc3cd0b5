"""How heron_data/citus_golds.yaml was made (docs/citus.md): print a gold query with
``a.tenant_id = b.tenant_id`` added to every join between two distributed tables of its
SELECTs. Correlated subqueries (q046's EXISTS) are not handled and were edited by hand; every
output was checked against the original gold on both layouts before it was recorded.

    python scripts/citus_golds.py < query.sql
"""

from __future__ import annotations

import sys

import sqlglot
from sqlglot import exp

from pytest_heron.generate import load_bundle
from pytest_heron.generate.citus import placement

DIST = set(placement(load_bundle()).distributed)


def rewrite(sql: str) -> str:
    """``sql`` with the tenant_id equalities added (pretty-printed by sqlglot)."""
    tree = sqlglot.parse_one(sql, read="postgres")
    for select in tree.find_all(exp.Select):
        # alias -> table of this select's FROM and JOINs
        aliases = {}
        sources = []
        if select.args.get("from_"):
            sources.append(select.args["from_"].this)
        sources += [j.this for j in select.args.get("joins") or []]
        for s in sources:
            if isinstance(s, exp.Table):
                fq = f"{s.db}.{s.name}"
                aliases[s.alias_or_name] = fq
        for j in select.args.get("joins") or []:
            on = j.args.get("on")
            if on is None or not isinstance(j.this, exp.Table):
                continue
            right = j.this.alias_or_name
            if aliases.get(right) not in DIST:
                continue
            others = set()
            for eq in on.find_all(exp.EQ):
                cols = [c for c in (eq.left, eq.right) if isinstance(c, exp.Column)]
                if len(cols) != 2:
                    continue
                tabs = {c.table for c in cols}
                if right in tabs and len(tabs) == 2:
                    other = (tabs - {right}).pop()
                    if aliases.get(other) in DIST:
                        if "tenant_id" in {c.name for c in cols}:
                            others.discard(other)
                            continue
                        others.add(other)
            for other in sorted(others):
                cond = exp.EQ(
                    this=exp.column("tenant_id", table=right),
                    expression=exp.column("tenant_id", table=other),
                )
                on = exp.and_(on, cond)
            j.set("on", on)
    return tree.sql(dialect="postgres", pretty=True)


if __name__ == "__main__":
    print(rewrite(sys.stdin.read()))
