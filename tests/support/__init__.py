"""What every test tier shares: where the repository and the FLAME inventory are, the rule for real tools (fail
in CI, skip elsewhere), and snapshots of directories. Variant inventories: tests.support.inventories."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
INVENTORY = REPO / "gpu_classes.yaml"
# The inventories a platform engineer copies, one folder each (examples/<name>/gpu_classes.yaml).
EXAMPLES = REPO / "examples"
# The small Go programs the tests build, one folder each (tests/README.md).
ORACLES = REPO / "tests" / "oracles"


def require_tool(path: str | Path | None, name: str, how: str = "run `make tools`") -> str:
    """The tool's path; a missing tool fails the test in CI (CI=true) and skips it elsewhere."""
    found = shutil.which(str(path)) if path else None
    if found is None:
        message = f"{name} not found ({path}); {how}"
        if os.environ.get("CI"):
            pytest.fail(f"CI must run this check: {message}")
        pytest.skip(message)
    return found


def of_kind(objects, kind):
    return [obj for obj in objects if obj["kind"] == kind]


def snapshot(directory):
    """Every file under `directory` with its bytes and mtime: equal snapshots mean nothing was written."""
    return {p.relative_to(directory).as_posix(): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted(directory.rglob("*")) if p.is_file()}


def read_files(directory):
    """Every regular file under `directory`, by relative POSIX path."""
    if not directory.is_dir():
        return {}
    return {path.relative_to(directory).as_posix(): path.read_bytes()
            for path in sorted(directory.rglob("*")) if path.is_file() and not path.is_symlink()}
