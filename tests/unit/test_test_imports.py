"""No module imports a test module (test_*.py), read from the code's imports (those inside functions too).

A helper two test modules share lives in a support module (tests/support/, or a tier's *_support.py): a test
module imported by another is collected twice in effect, its fixtures and marks leak into the importer, and a
change to one test breaks another tier.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ROOTS = ("generator", "simulation", "tests", "benchmarks", "tools")


def module_name(path: Path, root: Path = REPO) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_test_module(name: str) -> bool:
    return name.rsplit(".", 1)[-1].startswith("test_")


def imported_modules(path: Path, root: Path = REPO) -> set[str]:
    """The modules `path` may import: `import a.b`; `from a.b import c` gives a.b.c (c may be a module) unless a.b
    is a test module; relative imports resolved against the module's package."""
    package = module_name(path, root).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *(node.module.split(".") if node.module else [])])
            # `from pkg import test_x` imports the module pkg.test_x; `from test_x import y`, test_x alone.
            names |= {module} if is_test_module(module) else {f"{module}.{alias.name}" for alias in node.names}
    return names


def imports_of_test_modules(root: Path = REPO, roots=ROOTS) -> list[str]:
    """'importer imports test module' for each such import under `roots` of `root` (a module may name itself)."""
    found = []
    for top in roots:
        for path in sorted((root / top).rglob("*.py")):
            importer = module_name(path, root)
            found += [f"{importer} imports {name}" for name in sorted(imported_modules(path, root))
                      if is_test_module(name) and name != importer]
    return found


def test_no_module_imports_a_test_module():
    assert imports_of_test_modules() == [], "move what they share into a support module"


@pytest.mark.parametrize("source, found", [
    ("from tests.tier.test_a import helper", ["tests.tier.test_b imports tests.tier.test_a"]),
    ("import tests.tier.test_a", ["tests.tier.test_b imports tests.tier.test_a"]),
    ("from tests.tier import test_a", ["tests.tier.test_b imports tests.tier.test_a"]),
    ("from .test_a import helper", ["tests.tier.test_b imports tests.tier.test_a"]),
    ("from . import test_a", ["tests.tier.test_b imports tests.tier.test_a"]),
    ("def f():\n    from tests.tier.test_a import helper", ["tests.tier.test_b imports tests.tier.test_a"]),
    ("from tests.tier.tier_support import helper", []),
    ("from .tier_support import helper", []),
    ("from tests.tier.test_b import itself", []),
])
def test_the_check_sees_every_form_of_import(tmp_path, source, found):
    tier = tmp_path / "tests" / "tier"
    tier.mkdir(parents=True)
    for name in ("__init__.py", "test_a.py", "tier_support.py"):
        (tier / name).write_text("")
    (tier / "test_b.py").write_text(source + "\n")
    assert imports_of_test_modules(tmp_path, ("tests",)) == found


def test_a_support_module_may_not_import_a_test_module_either(tmp_path):
    tier = tmp_path / "tests" / "tier"
    tier.mkdir(parents=True)
    (tier / "test_a.py").write_text("")
    (tier / "tier_support.py").write_text("from tests.tier.test_a import helper\n")
    assert imports_of_test_modules(tmp_path, ("tests",)) == ["tests.tier.tier_support imports tests.tier.test_a"]
