"""The package's layers only point down: formats → savepoint → execution → operations → api →
cli and spark (the clients of the public API).

Every `statectl` import of every module (at module level, inside functions, or for type
checking only) must name a module of its own layer or one below; `make lint` runs this test.
The package's `__init__` is the one exception: it is the facade of `api`, which it loads on
first use (its other imports must still be leaves).

The CLI goes further: it is built on the public API alone, so its modules import nothing of
statectl below `api` (only `statectl`, `statectl.api…`, their own `statectl.cli…` and the
shared leaves).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "statectl"

# Shared leaves (errors, progress, the version) sit below everything.
LAYERS = {
    "__init__": 0,
    "errors": 0,
    "progress": 0,
    "formats": 1,
    "savepoint": 2,
    "execution": 3,
    "operations": 4,
    "api": 5,
    "cli": 6,
    "spark": 6,
    "__main__": 7,
}
FACADE = PACKAGE / "__init__.py"
# What the CLI may import of statectl: the public API (`statectl` is its facade), the CLI's own
# modules, and the shared leaves.
CLI_MAY_IMPORT = {"__init__", "api", "cli", "errors", "progress"}
# Heavy or JVM-backed libraries, and the lowest layer that may import them.
LIBRARIES = {"pyspark": "execution", "rocksdict": "savepoint", "typer": "cli", "rich": "cli"}


def _layer_of(module: str) -> str:
    """The layer name of `statectl.a.b` (`statectl` and its attributes: `__init__`)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else "__init__"


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import in the file, relative ones resolved."""
    module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module.split(".")[: -node.level]
                base = ".".join([*package, base] if base else package)
            names = [f"{base}.{alias.name}" for alias in node.names]
            found += (
                [(node.lineno, name) for name in names]
                if base == "statectl"
                else [(node.lineno, base)]
            )
    return found


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_point_down(path: Path) -> None:
    own = _layer_of(".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts))
    upward = []
    for line, name in _imports(path):
        root = name.split(".")[0]
        if root == "statectl":
            target = _layer_of(name)
            if path == FACADE and target == "api":
                continue
            if LAYERS[target] > LAYERS[own]:
                upward.append(f"line {line}: {name} ({own} must not import {target})")
        elif root in LIBRARIES and LAYERS[own] < LAYERS[LIBRARIES[root]]:
            upward.append(f"line {line}: {name} (only {LIBRARIES[root]} and above may)")
    assert not upward, "\n".join(upward)


def test_every_layer_is_known() -> None:
    tops = {p.relative_to(PACKAGE).parts[0].removesuffix(".py") for p in _modules()}
    assert tops <= LAYERS.keys()


@pytest.mark.parametrize(
    "path", sorted((PACKAGE / "cli").rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE))
)
def test_cli_imports_only_the_public_api(path: Path) -> None:
    below = [
        f"line {line}: {name} (the CLI imports only statectl, statectl.api and the leaves)"
        for line, name in _imports(path)
        if name.split(".")[0] == "statectl" and _layer_of(name) not in CLI_MAY_IMPORT
    ]
    assert not below, "\n".join(below)
