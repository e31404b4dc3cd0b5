"""The lock on the layers: imports inside the package only go down the Layout table of the README.

Every ``import`` in ``src/pytest_heron`` and ``adapters/`` is read from the source (module level
and inside functions alike: a lazy import is still a dependency). Each module belongs to a unit
(a stage package such as ``compare``, or a top-level module such as ``plugin``) and each unit to
a layer. The rules, each failing with a sentence that names the file, the line and the fix:

1. no import climbs: a unit imports only its own layer or the layers below it;
2. no circles between units;
3. a stage is entered through its door: another unit imports ``pytest_heron.<stage>`` (its
   ``__init__``), never ``pytest_heron.<stage>.<module>``; ``core`` is the exception, its small
   leaves are imported by name;
4. the field's adapters (``adapters/``, installed as ``heron_adapters``) use the public API only,
   as a third-party adapter would;
5. no circle between the modules of one unit (rooms see inside: a split file whose halves import
   each other is one responsibility in two files);
6. no private name (``_x``) is imported from another module, in ``src/`` or ``adapters/``: what
   two modules share is public in one of them;
7. each door's two name lists (the ``TYPE_CHECKING`` imports and the ``_DOOR`` map) agree.

A module over 600 lines is a warning naming it, not a failure: split it along a responsibility,
never trim a comment to fit.

The checker is pure (:func:`problems` takes the sources); the last tests feed it a climbing
import, a circle and a reach past a door to show it fails.
"""

from __future__ import annotations

import ast
import re
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "pytest_heron"

# Top layer first. The README's Layout table states the same ("may import" column).
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("wiring", ("plugin", "hookspecs", "run", "cli", "options")),
    ("publishing", ("site", "board", "browser")),
    ("results", ("results",)),
    ("scoring", ("scoring", "audit")),
    ("systems", ("systems",)),
    ("data", ("database", "generate")),
    ("stages", ("dataset", "sandbox", "compare")),
    ("leaves", ("core",)),
)
RANK = {unit: len(LAYERS) - i for i, (_, units) in enumerate(LAYERS) for unit in units}
LAYER_OF = {unit: name for name, units in LAYERS for unit in units}
ROOT_UNIT = "__init__"  # pytest_heron itself: the public API, it may import the leaves only
OPEN_UNITS = ("core",)  # imported module by module
# The public faces of the systems stage for adapter authors are doors of it too.
ALIASES = {"llm": "systems", "retrieval": "systems"}
EXTRA_DOORS = {"systems": ("pytest_heron.llm", "pytest_heron.retrieval")}
# What an adapter may import: the public API a third-party adapter sees.
PUBLIC = ("pytest_heron", "pytest_heron.llm", "pytest_heron.retrieval", "pytest_heron.sandbox")

Import = tuple[str, int, str]  # (importing module, line, imported module)


def module_name(path: Path, base: Path, package: str) -> str:
    parts = list(path.relative_to(base).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([package, *parts])


def imports_of(name: str, source: str, is_package: bool) -> Iterator[tuple[int, str, str]]:
    """(line, module, name) for every import in one module's source, relative ones resolved
    (``import a.b`` gives module ``a.b`` and an empty name)."""
    here = name.split(".") if is_package else name.split(".")[:-1]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, ""
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = here[: len(here) - node.level + 1]
                base = ".".join([*anchor, base]) if base else ".".join(anchor)
            for alias in node.names:
                yield node.lineno, base, alias.name


def unit_of(module: str) -> str | None:
    """The unit of a ``pytest_heron`` module (None outside the package)."""
    parts = module.split(".")
    if parts[0] != "pytest_heron":
        return None
    if len(parts) == 1:
        return ROOT_UNIT
    return ALIASES.get(parts[1], parts[1])


def bound_names(source: str) -> set[str]:
    """Names a module binds at its top level (definitions, assignments, imports)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return names


def resolve(module: str, name: str, known: Mapping[str, str]) -> str:
    """The module an import reaches: ``from a.b import NAME`` reaches ``a.b``, unless ``a.b.NAME``
    is a module that ``a.b``'s own source does not bind as a name (then it reaches that one)."""
    sub = f"{module}.{name}"
    if name and sub in known and not (module in known and name in bound_names(known[module])):
        return sub
    return module


def problems(sources: Mapping[str, str], packages: frozenset[str]) -> list[str]:
    """Every broken rule, one sentence each. ``sources``: module name -> source text;
    ``packages``: the module names that are packages (``__init__``)."""
    found: list[str] = []
    edges: dict[str, set[str]] = {}
    rooms: dict[str, set[str]] = {}  # module -> modules of the same unit it imports
    for name in sorted(sources):
        found.extend(door_problems(name, sources[name]) if name in packages else [])
        for line, module, imported in imports_of(name, sources[name], name in packages):
            target = resolve(module, imported, sources)
            if (
                imported.startswith("_")
                and not imported.startswith("__")
                and target in sources
                and target != name
            ):
                found.append(
                    f"{name}:{line} imports the private name {imported} from {target}: make it "
                    "public where it lives (or move it to the module both need)"
                )
            same = unit_of(name) is not None and unit_of(name) == unit_of(target)
            # a door is the unit's own face, not a room: only module-to-module imports count
            rooms_only = name not in packages and target not in packages
            if same and rooms_only and target in sources and target != name:
                rooms.setdefault(name, set()).add(target)
            if name.startswith("heron_adapters"):
                if target.startswith("pytest_heron") and target not in PUBLIC:
                    found.append(
                        f"{name}:{line} imports {target}: an adapter uses the public API only "
                        f"({', '.join(PUBLIC)}); export what it needs there"
                    )
                continue
            src_unit, dst_unit = unit_of(name), unit_of(target)
            if src_unit is None or dst_unit is None or src_unit == dst_unit:
                continue
            if src_unit == ROOT_UNIT:
                if dst_unit not in OPEN_UNITS:
                    found.append(
                        f"{name}:{line} imports {target}: the package root re-exports leaves only"
                    )
                continue
            edges.setdefault(src_unit, set()).add(dst_unit)
            if dst_unit != ROOT_UNIT and RANK[dst_unit] > RANK[src_unit]:
                found.append(
                    f"{name}:{line} imports {target}: {src_unit} ({LAYER_OF[src_unit]}) may not "
                    f"import {dst_unit} ({LAYER_OF[dst_unit]}), a layer above it; move the shared "
                    "piece down or pass it in"
                )
            door = f"pytest_heron.{dst_unit}"
            doors = (door, *EXTRA_DOORS.get(dst_unit, ()))
            if dst_unit not in OPEN_UNITS and target not in doors and door in packages:
                found.append(
                    f"{name}:{line} imports {target}: use the door, `from {door} import ...` "
                    f"(add the name to {door}'s __init__ if it is missing)"
                )
    found.extend(f"circle between units: {' -> '.join(c)}" for c in circles(edges))
    found.extend(
        f"circle between modules of {unit_of(c[0])}: {' -> '.join(c)} (one responsibility in "
        "two files: merge them, or move what both need to a module of its own)"
        for c in circles(rooms)
    )
    return found


def door_problems(name: str, source: str) -> list[str]:
    """A door whose ``TYPE_CHECKING`` imports and ``_DOOR`` map name different things."""
    tree = ast.parse(source)
    typed: dict[str, str] = {}
    door: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for inner in node.body:
                if isinstance(inner, ast.ImportFrom) and inner.module:
                    for alias in inner.names:
                        typed[alias.asname or alias.name] = inner.module
        named = isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "_DOOR" for t in node.targets
        )
        if named and isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict):
            for key, value in zip(node.value.keys, node.value.values, strict=True):
                if isinstance(key, ast.Constant) and isinstance(value, ast.Constant):
                    door[str(key.value)] = f"{name}.{value.value}"
    if not door:
        return []
    out = []
    for missing in sorted(set(typed) - set(door)):
        out.append(f"{name}: {missing} is typed in the door but missing from _DOOR")
    for missing in sorted(set(door) - set(typed)):
        out.append(f"{name}: {missing} is in _DOOR but not among the TYPE_CHECKING imports")
    for both in sorted(set(door) & set(typed)):
        if door[both] != typed[both]:
            out.append(f"{name}: {both} comes from {typed[both]} when typed, {door[both]} in _DOOR")
    return out


def circles(edges: Mapping[str, set[str]]) -> list[list[str]]:
    """One representative path per circle in a small directed graph (sorted, deterministic)."""
    out: list[list[str]] = []
    seen: set[tuple[str, ...]] = set()

    def visit(node: str, path: list[str]) -> None:
        for nxt in sorted(edges.get(node, ())):
            if nxt in path:
                cycle = path[path.index(nxt) :]
                start = cycle.index(min(cycle))
                key = tuple(cycle[start:] + cycle[:start])
                if key not in seen:
                    seen.add(key)
                    out.append([*key, key[0]])
            elif len(path) < len(edges) + 1:
                visit(nxt, [*path, nxt])

    for node in sorted(edges):
        visit(node, [node])
    return out


def tree_sources() -> tuple[dict[str, str], frozenset[str]]:
    sources: dict[str, str] = {}
    packages: set[str] = set()
    for base, package in ((PACKAGE, "pytest_heron"), (ROOT / "adapters", "heron_adapters")):
        for path in sorted(base.rglob("*.py")):
            name = module_name(path, base, package)
            sources[name] = path.read_text(encoding="utf-8")
            if path.name == "__init__.py":
                packages.add(name)
    return sources, frozenset(packages)


def test_imports_go_down_the_layers_through_doors_with_no_circles() -> None:
    sources, packages = tree_sources()
    assert len(sources) > 100  # the whole tree was read
    found = problems(sources, packages)
    assert not found, "\n".join(found)


def test_every_unit_has_a_layer_and_the_readme_states_them() -> None:
    sources, _ = tree_sources()
    units = {unit_of(m) for m in sources if m.startswith("pytest_heron")} - {None, ROOT_UNIT}
    assert units <= set(RANK), f"units without a layer: {sorted(units - set(RANK))}"
    readme = (ROOT / "docs" / "layout.md").read_text(encoding="utf-8")
    for name, members in LAYERS:
        row = next((ln for ln in readme.splitlines() if ln.startswith(f"| {name} ")), "")
        assert row, f"docs/layout.md has no row for the {name} layer"
        for unit in members:
            assert f"`{unit}`" in row, f"docs/layout.md's {name} row does not name {unit}"


def test_no_door_names_one_of_its_own_submodules() -> None:
    """A lazy door name equal to a submodule's name is shadowed by the module as soon as the
    import system loads that submodule (it sets the package attribute): `from pkg import x`
    would then hand out the module, not the name."""
    for init in sorted(PACKAGE.glob("*/__init__.py")):
        names = re.findall(r'^    "(\w+)": "[\w.]+",$', init.read_text(encoding="utf-8"), re.M)
        subs = {p.stem for p in init.parent.glob("*.py")} | {
            p.name for p in init.parent.iterdir() if p.is_dir()
        }
        clash = sorted(set(names) & subs)
        assert not clash, f"{init.relative_to(ROOT)}: door names {clash} are also submodules"


def test_rooms_of_a_size_one_can_hold() -> None:
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= 8, f"{len(top)} modules at the top of pytest_heron: {top}"
    for path in sorted([*PACKAGE.rglob("*.py"), *(ROOT / "adapters").rglob("*.py")]):
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > 600:
            warnings.warn(
                f"{path.relative_to(ROOT)} has {lines} lines: split it along a responsibility "
                "when one shows; never trim a comment to fit",
                stacklevel=1,
            )


# -- the checker fails when it should -------------------------------------------------------------

BASE = {
    "pytest_heron": "",
    "pytest_heron.compare": "from pytest_heron.compare.rows import pair\n",
    "pytest_heron.compare.rows": "import numpy\n",
    "pytest_heron.scoring": "from pytest_heron.compare import pair\n",
    "pytest_heron.core": "",
    "pytest_heron.core.errors": "",
    "heron_adapters": "",
    "heron_adapters.x": "from pytest_heron import Prediction\nfrom .y import z\n",
}
PKGS = frozenset({"pytest_heron", "pytest_heron.compare", "pytest_heron.scoring",
                  "pytest_heron.core", "heron_adapters"})  # fmt: skip


def test_a_clean_tree_passes() -> None:
    assert problems(BASE, PKGS) == []


def test_a_climbing_import_fails_with_a_sentence() -> None:
    found = problems(
        {**BASE, "pytest_heron.compare.rows": "from pytest_heron.scoring import s"}, PKGS
    )
    assert any(
        re.search(r"compare\.rows:1 imports pytest_heron\.scoring: compare \(stages\) may not", f)
        for f in found
    ), found
    assert any(f.startswith("circle between units: compare -> scoring -> compare") for f in found)


def test_a_lazy_import_inside_a_function_counts() -> None:
    lazy = "def f():\n    from pytest_heron.scoring import s\n    return s\n"
    found = problems({**BASE, "pytest_heron.compare.rows": lazy}, PKGS)
    assert any("compare.rows:2 imports pytest_heron.scoring" in f for f in found), found


def test_reaching_past_a_door_fails() -> None:
    found = problems(
        {**BASE, "pytest_heron.scoring": "from pytest_heron.compare.rows import p"}, PKGS
    )
    assert found == [
        "pytest_heron.scoring:1 imports pytest_heron.compare.rows: use the door, "
        "`from pytest_heron.compare import ...` (add the name to pytest_heron.compare's "
        "__init__ if it is missing)"
    ]
    leaf = problems(
        {**BASE, "pytest_heron.scoring": "from pytest_heron.core.errors import E"}, PKGS
    )
    assert leaf == []


def test_an_adapter_reaching_inside_fails() -> None:
    inside = "from pytest_heron.systems.llm.client import ChatClient\n"
    found = problems({**BASE, "heron_adapters.x": inside}, PKGS)
    assert len(found) == 1 and "an adapter uses the public API only" in found[0]


def test_a_circle_inside_a_unit_fails() -> None:
    found = problems(
        {
            **BASE,
            "pytest_heron.compare.rows": "from pytest_heron.compare.cols import c\n",
            "pytest_heron.compare.cols": "def f():\n    from pytest_heron.compare.rows import r\n",
        },
        PKGS,
    )
    assert any(
        f.startswith(
            "circle between modules of compare: pytest_heron.compare.cols -> "
            "pytest_heron.compare.rows -> pytest_heron.compare.cols"
        )
        for f in found
    ), found


def test_a_private_name_from_another_module_fails() -> None:
    found = problems(
        {**BASE, "pytest_heron.compare.cols": "from pytest_heron.compare.rows import _pair\n"},
        PKGS,
    )
    assert found == [
        "pytest_heron.compare.cols:1 imports the private name _pair from "
        "pytest_heron.compare.rows: make it public where it lives (or move it to the module "
        "both need)"
    ]


def test_a_door_whose_two_lists_differ_fails() -> None:
    door = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from pytest_heron.compare.rows import pair as pair\n"
        "    from pytest_heron.compare.rows import only_typed as only_typed\n"
        '_DOOR = {"pair": "cols", "only_door": "rows"}\n'
    )
    found = problems({**BASE, "pytest_heron.compare": door}, PKGS)
    assert found == [
        "pytest_heron.compare: only_typed is typed in the door but missing from _DOOR",
        "pytest_heron.compare: only_door is in _DOOR but not among the TYPE_CHECKING imports",
        "pytest_heron.compare: pair comes from pytest_heron.compare.rows when typed, "
        "pytest_heron.compare.cols in _DOOR",
    ]
