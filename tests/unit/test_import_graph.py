"""Imports go one way: the layer table, no import cycle of any kind, no module too long.

The modules are read, not run: every ``import`` and ``from … import`` anywhere
in a file counts (module level, inside functions, under ``if TYPE_CHECKING:``),
and so does a string constant that is exactly the dotted name of a kstream
module (what ``importlib.import_module`` loads on first use). A cycle closed by
an import inside a function is a cycle all the same.

The tables are those of the internals docs (:ref:`layers-layout`).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import kstream

ROOT = Path(kstream.__file__).resolve().parent

#: What each unit of kstream may import besides itself.
LAYERS: dict[str, frozenset[str]] = {
    "errors": frozenset(),
    "protocol": frozenset({"errors"}),
    "infra": frozenset({"errors"}),
    "dataflow": frozenset({"protocol", "errors"}),
    "runtime": frozenset({"dataflow", "protocol", "infra", "errors"}),
    "audit": frozenset({"protocol", "infra", "errors"}),
    "connectors": frozenset({"runtime", "dataflow", "protocol", "infra", "errors"}),
    # The front door: `connectors` only by name, loaded on first use.
    "kstream": frozenset({"dataflow", "protocol", "errors", "connectors"}),
    "testing": frozenset(
        {"kstream", "connectors", "runtime", "dataflow", "protocol", "infra", "errors"}
    ),
    "examples": frozenset({"kstream", "testing"}),
    "tools": frozenset(
        {
            "kstream",
            "testing",
            "examples",
            "connectors",
            "audit",
            "runtime",
            "dataflow",
            "protocol",
            "infra",
            "errors",
        }
    ),
    "__main__": frozenset({"tools"}),
}

#: Inside `kstream.runtime`: what each side may import of the others. The worker
#: side and the runner side never import each other.
RUNTIME_SIDES: dict[str, frozenset[str]] = {
    "root": frozenset(),
    "state": frozenset({"root"}),
    "checkpoint": frozenset({"state", "root"}),
    "channels": frozenset({"state", "root"}),
    "worker": frozenset({"channels", "checkpoint", "state", "root"}),
    "runner": frozenset({"checkpoint", "root"}),
}

MAX_LINES = 700


@dataclass(frozen=True)
class Module:
    name: str
    lines: int
    imports: frozenset[str]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def read_modules() -> dict[str, Module]:
    """Every module of kstream (connectors through the link), with what it imports."""
    # rglob does not enter the link to the top-level connectors/: walk it apart.
    linked = ROOT / "connectors"
    paths = sorted(ROOT.rglob("*.py")) + [
        linked / p.relative_to(linked.resolve()) for p in sorted(linked.resolve().rglob("*.py"))
    ]
    names = {module_name(p) for p in paths}
    modules = {}
    for path in paths:
        source = path.read_text()
        tree = ast.parse(source)
        modules[module_name(path)] = Module(
            module_name(path), len(source.splitlines()), frozenset(imports_of(tree, names))
        )
    return modules


def imports_of(tree: ast.AST, names: set[str]) -> Iterable[str]:
    """The kstream modules a file names: imports anywhere, and dotted module names as strings."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield from _known(alias.name, names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                yield from _known(full if full in names else node.module, names)
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and node.value in names
            and "." in node.value
        ):
            yield node.value


def _known(name: str, names: set[str]) -> Iterable[str]:
    while name and name not in names:
        name = name.rpartition(".")[0]
    if name.startswith("kstream"):
        yield name


def unit_of(module: str) -> str:
    parts = module.split(".")
    return "kstream" if len(parts) == 1 else parts[1]


def side_of(module: str, packages: set[str]) -> str | None:
    """The side of a `kstream.runtime` module: its subpackage, or "root"."""
    parts = module.split(".")
    if parts[:2] != ["kstream", "runtime"] or len(parts) < 3:
        return None
    return parts[2] if ".".join(parts[:3]) in packages else "root"


def violations(modules: Mapping[str, Module]) -> set[tuple[str, str]]:
    """(importer, imported) pairs that the two tables do not allow."""
    packages = {m for m in modules if any(o.startswith(m + ".") for o in modules)}
    found = set()
    for module in modules.values():
        unit = unit_of(module.name)
        for imported in module.imports:
            other = unit_of(imported)
            if other != unit and other not in LAYERS[unit]:
                found.add((module.name, imported))
            elif unit == other == "runtime":
                mine, theirs = side_of(module.name, packages), side_of(imported, packages)
                if mine and theirs and mine != theirs and theirs not in RUNTIME_SIDES[mine]:
                    found.add((module.name, imported))
    return found


def cycles(modules: Mapping[str, Module]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(name: str) -> None:
        index[name] = low[name] = len(index)
        stack.append(name)
        on_stack.add(name)
        for other in sorted(modules[name].imports):
            if other not in modules:
                continue
            if other not in index:
                visit(other)
                low[name] = min(low[name], low[other])
            elif other in on_stack:
                low[name] = min(low[name], index[other])
        if low[name] == index[name]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == name:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for name in sorted(modules):
        if name not in index:
            visit(name)
    return found


def test_imports_follow_the_layer_table() -> None:
    assert sorted(violations(read_modules())) == [], "imports against the layer table"


def test_no_import_cycle() -> None:
    assert cycles(read_modules()) == []


def test_no_module_over_the_line_limit() -> None:
    long = sorted(m.name for m in read_modules().values() if m.lines > MAX_LINES)
    assert long == [], f"modules over {MAX_LINES} lines"


def test_the_layer_check_can_fail() -> None:
    modules = read_modules()
    planted = dict(modules)
    barrier = modules["kstream.protocol.barrier"]
    planted[barrier.name] = Module(
        barrier.name, barrier.lines, barrier.imports | {"kstream.runtime.kafka"}
    )
    assert ("kstream.protocol.barrier", "kstream.runtime.kafka") in violations(planted)
    store = modules["kstream.runtime.checkpoint.storage"]
    planted[store.name] = Module(
        store.name, store.lines, store.imports | {"kstream.runtime.worker.chain"}
    )
    assert ("kstream.runtime.checkpoint.storage", "kstream.runtime.worker.chain") in violations(
        planted
    )


def test_the_cycle_check_can_fail() -> None:
    modules = read_modules()
    coordinator = modules["kstream.protocol.coordinator"]
    ids = modules["kstream.protocol.snapshot_id"]
    assert ids.name in coordinator.imports
    planted = dict(modules)
    planted[ids.name] = Module(ids.name, ids.lines, ids.imports | {coordinator.name})
    assert any({ids.name, coordinator.name} <= set(c) for c in cycles(planted))


def test_the_reader_sees_imports_inside_functions_and_by_name() -> None:
    names = {"kstream.a", "kstream.b", "kstream.c"}
    tree = ast.parse(
        "def f():\n    from kstream.a import x\n"
        "if TYPE_CHECKING:\n    import kstream.b\n"
        "LAZY = 'kstream.c'\n"
    )
    assert set(imports_of(tree, names)) == names
