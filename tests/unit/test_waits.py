"""No wait in simulation/ or tests/ is a bare wall-clock bound: each comes from simulation/waiting.py, which follows
progress and puts its ceiling far above a healthy run on a slow machine.

The scan reads the code's syntax: a `timeout=` given as a number (or arithmetic over numbers only), and a deadline
computed as `time.monotonic() + <number>`. Numbers up to a second are polling intervals (select, Event.wait), not
bounds on something that could be slow. Bounds passed to the wait helpers themselves (poll, wait_ready,
wait_until, wait_for) are a usual duration that waiting.py turns into a ceiling, and are not flagged.
"""
from __future__ import annotations

import ast
import pathlib

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
SCANNED = ("simulation", "tests", "benchmarks")
INTERVAL = 1.0  # seconds: at most this, a literal timeout is a polling interval


def _number(node: ast.AST) -> float | None:
    """The value of a literal number, or of arithmetic over literal numbers only; None otherwise."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return float(node.value)
    if isinstance(node, ast.BinOp):
        left, right = _number(node.left), _number(node.right)
        if left is not None and right is not None:
            try:
                return float(eval(compile(ast.Expression(node), "<n>", "eval")))  # literals only
            except ArithmeticError:
                return None
    return None


def _is_monotonic_call(node: ast.AST) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("monotonic", "time", "perf_counter"))


def bare_bounds(source: str, name: str = "<source>") -> list[str]:
    """Each bare wall-clock bound in `source`, as 'NAME:LINE: what'."""
    found = []
    for node in ast.walk(ast.parse(source, name)):
        if isinstance(node, ast.Call):
            for keyword in node.keywords:
                if keyword.arg == "timeout":
                    value = _number(keyword.value)
                    if value is not None and value > INTERVAL:
                        found.append(f"{name}:{node.lineno}: timeout={value:g}")
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            for clock, other in ((node.left, node.right), (node.right, node.left)):
                if _is_monotonic_call(clock) and _number(other) is not None:
                    found.append(f"{name}:{node.lineno}: a deadline {_number(other):g}s from now")
    return found


def scanned_files() -> list[pathlib.Path]:
    return sorted(p for folder in SCANNED for p in (REPO / folder).rglob("*.py") if ".venv" not in p.parts)


@pytest.mark.parametrize("snippet, expected", [
    ("requests.get(url, timeout=30)", 1),
    ("subprocess.run(cmd, timeout=5 * 60)", 1),
    ("deadline = time.monotonic() + 60", 1),
    ("deadline = 10 + time.monotonic()", 1),
    ("sel.select(timeout=1)", 0),                       # a polling interval
    ("requests.get(url, timeout=REQUEST)", 0),          # from simulation/waiting.py
    ("subprocess.run(cmd, timeout=ceiling(30))", 0),
    ("deadline = time.monotonic() + ceiling(60)", 0),
    ("poll(check, 60, 'x')", 0),                        # a usual duration, turned into a ceiling by waiting.py
])
def test_the_scan_finds_bare_bounds(snippet, expected):
    assert len(bare_bounds(snippet)) == expected, bare_bounds(snippet)


def test_no_bare_wall_clock_bound_in_the_simulation_or_the_tests():
    found = [hit for path in scanned_files()
             for hit in bare_bounds(path.read_text(), str(path.relative_to(REPO)))]
    assert not found, ("bounds that do not follow progress (use simulation/waiting.py: wait_for, ceiling(usual), "
                       "REQUEST):\n  " + "\n  ".join(found))
