"""The generator's layers, read from its imports (every import statement, those inside functions too).

A module imports only from its own layer or lower ones, and no two units (a package, or a top-level module)
import each other, directly or round a longer circle. ARCHITECTURE.md draws the same layers.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.support.layers import LAYERS

GENERATOR = Path(__file__).resolve().parents[2] / "generator"

LAYER_OF = {unit: index for index, (_, units) in enumerate(LAYERS) for unit in units}
PACKAGES = {"generator.components", "generator.inventory", "generator.builders", "generator.files", "generator.plan",
            "generator.report"}


def module_name(path: Path) -> str:
    parts = path.relative_to(GENERATOR.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def unit_of(module: str) -> str:
    for package in PACKAGES:
        if module == package or module.startswith(package + "."):
            return package
    return module


def imports_of(path: Path) -> set[str]:
    """The generator modules `path` imports (`from generator.x import y` counts y when it is a module)."""
    modules: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            modules |= {alias.name for alias in node.names if alias.name.startswith("generator.")}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("generator"):
            for alias in node.names:
                candidate = f"{node.module}.{alias.name}"
                is_module = (GENERATOR.parent / Path(*candidate.split("."))).with_suffix(".py").is_file() or \
                    (GENERATOR.parent / Path(*candidate.split("."))).is_dir()
                modules.add(candidate if is_module else node.module)
    return modules - {"generator"}


def import_graph() -> dict[str, set[str]]:
    return {module_name(path): imports_of(path) for path in sorted(GENERATOR.rglob("*.py"))}


def test_every_unit_has_a_layer():
    units = {unit_of(module) for module in import_graph()} - {"generator"}
    assert units - set(LAYER_OF) == set(), "give each new unit a layer here and in ARCHITECTURE.md"


def test_no_import_runs_up_a_layer():
    upward = [f"{module} ({LAYERS[LAYER_OF[unit_of(module)]][0]}) imports {target} "
              f"({LAYERS[LAYER_OF[unit_of(target)]][0]})"
              for module, targets in import_graph().items() if module != "generator"
              for target in targets if LAYER_OF[unit_of(target)] > LAYER_OF[unit_of(module)]]
    assert upward == []


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected set of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            members = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                members.append(member)
                if member == node:
                    break
            if len(members) > 1:
                found.append(sorted(members))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_two_units_import_each_other():
    units: dict[str, set[str]] = {}
    for module, targets in import_graph().items():
        units.setdefault(unit_of(module), set()).update(unit_of(t) for t in targets if unit_of(t) != unit_of(module))
    assert _circles(units) == []


def test_no_two_modules_import_each_other():
    assert _circles(import_graph()) == []


def test_no_module_is_loaded_by_a_computed_name():
    """Every import is a statement the graph above reads: none by a name made at run time (importlib, __import__)."""
    computed = [f"{path.relative_to(GENERATOR.parent)}:{node.lineno}" for path in sorted(GENERATOR.rglob("*.py"))
                for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                if isinstance(node, ast.Call) and (
                    (isinstance(node.func, ast.Attribute) and node.func.attr == "import_module")
                    or (isinstance(node.func, ast.Name) and node.func.id in ("__import__", "import_module")))]
    assert computed == []


@pytest.mark.parametrize("graph, circles", [
    ({"a": {"b"}, "b": {"a"}}, [["a", "b"]]),
    ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
    ({"a": {"b"}, "b": {"c"}, "c": set()}, []),
])
def test_the_circle_finder_finds_circles(graph, circles):
    assert _circles(graph) == circles


def test_the_layer_check_sees_imports_inside_functions(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from generator.cli import main\n    import generator.tree\n")
    assert imports_of(module) == {"generator.cli", "generator.tree"}
