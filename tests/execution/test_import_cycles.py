"""No module of the execution layer imports another that imports it back, however indirectly:
every import counts (module level, inside functions, for type checking only)."""

from __future__ import annotations

import ast
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import statectl.execution

LAYER = Path(statectl.execution.__file__).parent
PACKAGE = "statectl.execution"


def imported_modules(path: Path) -> set[str]:
    """The modules of the layer that `path` imports."""
    modules = {f"{PACKAGE}.{p.stem}" for p in LAYER.glob("*.py") if p.stem != "__init__"}
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found & modules


def test_the_execution_layer_imports_in_no_circle() -> None:
    graph = {
        f"{PACKAGE}.{path.stem}": imported_modules(path)
        for path in LAYER.glob("*.py")
        if path.stem != "__init__"
    }
    try:
        tuple(TopologicalSorter(graph).static_order())
    except CycleError as cycle:
        raise AssertionError(f"import cycle: {' → '.join(cycle.args[1])}") from None
