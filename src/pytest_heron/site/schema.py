"""The schema as the site shows it: modules, their tables and comments, and a foreign-key
diagram per module, all read from the shipped DDL (no database needed).

:func:`schema_modules` reads the bundle; :func:`parse_foreign_keys` reads the ``ALTER TABLE ...
FOREIGN KEY ... REFERENCES`` statements of a module's constraint section into
:class:`~pytest_heron.database.introspect.ForeignKey` records (the same records the live reader
gives); :func:`diagram` lays one module out as SVG. Everything but :func:`schema_modules` is pure.

Layout: a module's tables are put in columns by foreign-key depth (a table that references no
other table of its module is in the first column; a table that references one in column k is in
column k + 1 or later), with the tables of other modules it references in a column of their own
on the left. Arrows go from the referencing table to the referenced one. Keys to
``core.tenants`` (every tenant-owned table has one) are counted, not drawn, outside ``core``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

from pytest_heron.database import ForeignKey
from pytest_heron.dataset import TableInfo, parse_ddl
from pytest_heron.site.charts import text_width

TENANTS = "core.tenants"
_FK = re.compile(
    r"ALTER\s+TABLE\s+([\w.]+)\s+ADD\s+CONSTRAINT\s+\w+\s+FOREIGN\s+KEY\s*\(([^)]*)\)\s*"
    r"REFERENCES\s+([\w.]+)\s*\(([^)]*)\)",
    re.I,
)
_NOT_NULL = re.compile(r"\bNOT\s+NULL\b|\bPRIMARY\s+KEY\b", re.I)


@dataclass(frozen=True)
class SchemaModule:
    """One module (a PostgreSQL schema) of the benchmark."""

    name: str
    comment: str
    tables: tuple[TableInfo, ...]
    foreign_keys: tuple[ForeignKey, ...]  # the keys whose referencing table is in this module


def parse_foreign_keys(ddl: str, tables: dict[str, TableInfo]) -> tuple[ForeignKey, ...]:
    """Every column pair of the DDL's ``FOREIGN KEY`` constraints, sorted. ``not_null`` is read
    from the referencing column's definition in ``tables`` (False when the table is unknown).

    >>> t = TableInfo("s.c", "", ())
    >>> parse_foreign_keys(
    ...     "ALTER TABLE s.c ADD CONSTRAINT fk FOREIGN KEY (p_id) REFERENCES s.p(id);", {"s.c": t})
    (ForeignKey(table='s.c', column='p_id', ref_table='s.p', ref_column='id', not_null=False, \
width=1),)
    """
    out = []
    for m in _FK.finditer(ddl):
        table, ref = m.group(1).lower(), m.group(3).lower()
        cols = [c.strip().lower() for c in m.group(2).split(",")]
        refs = [c.strip().lower() for c in m.group(4).split(",")]
        info = tables.get(table)
        for col, ref_col in zip(cols, refs, strict=False):
            definition = (
                next((c.definition for c in info.columns if c.name == col), "") if info else ""
            )
            out.append(
                ForeignKey(table, col, ref, ref_col, bool(_NOT_NULL.search(definition)), len(cols))
            )
    return tuple(sorted(out))


def schema_modules() -> tuple[SchemaModule, ...]:
    """The benchmark's modules in the bundle's order (reads the shipped DDL)."""
    from pytest_heron.generate import load_bundle

    bundle = load_bundle()
    out = []
    for m in bundle.modules:
        cat = parse_ddl(m.ddl_tables)
        fks = parse_foreign_keys(m.ddl_constraints, cat.tables)
        out.append(
            SchemaModule(
                name=m.name,
                comment=cat.schema_comments.get(m.name, ""),
                tables=tuple(cat.tables.values()),
                foreign_keys=fks,
            )
        )
    return tuple(out)


def module_of(table: str) -> str:
    return table.partition(".")[0]


def _levels(names: Sequence[str], edges: Iterable[tuple[str, str]]) -> dict[str, int]:
    """Column of each table: 0 without a parent in ``names``, else one past its deepest parent
    (a cycle is cut where it is met, in name order, so the result is deterministic)."""
    parents: dict[str, list[str]] = {n: [] for n in names}
    for child, parent in sorted(set(edges)):
        if child != parent and child in parents and parent in parents:
            parents[child].append(parent)
    level: dict[str, int] = {}
    visiting: set[str] = set()

    def visit(n: str) -> int:
        if n in level:
            return level[n]
        if n in visiting:
            return -1  # a cycle: this edge does not push the column
        visiting.add(n)
        depth = max([visit(p) for p in parents[n]] + [-1]) + 1
        visiting.discard(n)
        level[n] = depth
        return depth

    for n in names:
        visit(n)
    return level


def diagram(
    module: SchemaModule, *, highlight: frozenset[str] = frozenset(), link: str = ""
) -> Markup:
    """The module's foreign-key diagram as SVG. Tables in ``highlight`` are drawn marked; each
    box links to ``{link}#t-{table}`` when ``link`` is given (the module's schema page)."""
    own = [t.name for t in module.tables]
    own_set = set(own)
    drawn = [f for f in module.foreign_keys if module.name == "core" or f.ref_table != TENANTS]
    external = sorted({f.ref_table for f in drawn if f.ref_table not in own_set})
    level = _levels(own, ((f.table, f.ref_table) for f in drawn))
    columns: list[list[str]] = []
    if external:
        columns.append(external)
    for depth in range(max(level.values(), default=-1) + 1):
        columns.append([n for n in own if level[n] == depth])
    # order each column by the mean row of the tables it references (fewer crossings)
    row_of: dict[str, float] = {n: float(i) for i, n in enumerate(columns[0])} if columns else {}
    for col in columns[1:]:

        def key(n: str) -> tuple[float, str]:
            refs = [row_of[f.ref_table] for f in drawn if f.table == n and f.ref_table in row_of]
            return (sum(refs) / len(refs) if refs else -1.0, n)

        col.sort(key=key)
        row_of.update({n: float(i) for i, n in enumerate(col)})
    box_h, gap_y, gap_x, top, pad = 22, 10, 70, 10, 10
    widths = [max(text_width(n) for n in col) + 2 * pad for col in columns]
    xs = []
    x = 10.0
    for w in widths:
        xs.append(x)
        x += w + gap_x
    width = max(x - gap_x + 10, 200.0)
    height = top + max([len(c) for c in columns] + [1]) * (box_h + gap_y) + 10
    where: dict[str, tuple[float, float, float]] = {}  # table -> x, y, width
    for ci, col in enumerate(columns):
        for ri, n in enumerate(col):
            where[n] = (xs[ci], top + ri * (box_h + gap_y), widths[ci])
    body: list[str] = []
    for f in drawn:
        if f.table not in where or f.ref_table not in where:
            continue
        cx, cy, _ = where[f.table]
        px_, py_, pw = where[f.ref_table]
        cls = "fk hl" if f.table in highlight and f.ref_table in highlight else "fk"
        tip = escape(f"{f.table}.{f.column} → {f.ref_table}.{f.ref_column}")
        if f.table == f.ref_table:
            body.append(
                f'<path class="{cls}" d="M{cx + 8:.1f},{cy:.1f} c-4,-10 16,-10 12,0">'
                f"<title>{tip}</title></path>"
            )
            continue
        x1, y1 = cx, cy + box_h / 2
        x2, y2 = px_ + pw, py_ + box_h / 2
        mid = (x1 + x2) / 2
        body.append(
            f'<path class="{cls}" d="M{x1:.1f},{y1:.1f} C{mid:.1f},{y1:.1f} {mid:.1f},{y2:.1f} '
            f'{x2 + 4:.1f},{y2:.1f}" marker-end="url(#arrow-{escape(module.name)})">'
            f"<title>{tip}</title></path>"
        )
    for n, (bx, by, bw) in where.items():
        cls = "table" + (" hl" if n in highlight else "") + ("" if n in own_set else " ext")
        box = (
            f'<rect x="{bx:.1f}" y="{by:.1f}" width="{bw:.1f}" height="{box_h}" rx="3"/>'
            f'<text x="{bx + pad:.1f}" y="{by + 15:.1f}">{escape(n)}</text>'
        )
        if link and n in own_set:
            box = f'<a href="{escape(link)}#t-{escape(n)}">{box}</a>'
        body.append(f'<g class="{cls}" data-table="{escape(n)}">{box}</g>')
    defs = (
        f'<defs><marker id="arrow-{escape(module.name)}" viewBox="0 0 8 8" refX="7" refY="4" '
        'markerWidth="7" markerHeight="7" orient="auto">'
        '<path d="M0,0 L8,4 L0,8 z" class="arrowhead"/></marker>'
        "</defs>"
    )
    label = f"foreign keys of {module.name}"
    return Markup(
        f'<svg class="fkmap" role="img" aria-label="{escape(label)}" width="{width:.0f}" '
        f'height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}" '
        f"><title>{escape(label)}</title>{defs}" + "".join(body) + "</svg>"
    )


def tenant_keys(module: SchemaModule) -> int:
    """How many of the module's tables have a key to ``core.tenants`` (not drawn)."""
    return len({f.table for f in module.foreign_keys if f.ref_table == TENANTS})
