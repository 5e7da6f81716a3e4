"""Property: whatever the inventory and the command line, gpugen never raises a traceback, exits 0, 1 or 2,
and leaves every output either exactly as it was or exactly what the new inventory renders to.

Hypothesis mutates the committed inventory (lines deleted, duplicated, swapped or re-indented; YAML syntax,
anchors, aliases, merge keys, tags, control characters, invalid UTF-8 and hostile values inserted) and the
command line (render, render --check, the inventory edits with hostile arguments, outputs that coincide, nest
or are symlinks). The CLI runs in-process (click's CliRunner) against a copy of a rendered baseline in a
temporary directory.

CI runs GPUGEN_PROPERTY_EXAMPLES (default 300) examples with a fixed seed; the full run is
`GPUGEN_PROPERTY_EXAMPLES=10000 .venv/bin/python -m pytest -q tests/unit/test_property.py` (figures in the report
and README).
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

from click.testing import CliRunner
from tests.support import INVENTORY
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from generator.cli import main
from generator.inventory import InventoryInvalid, load_inventory_text
from generator.errors import OverLimits
from generator.tree import render_trees
from tests.support import read_files as read_tree
from generator.files.fs import TEMP_MARK

FLAME = INVENTORY.read_bytes()
NAME = "gpu_classes.yaml"
EXAMPLES = int(os.environ.get("GPUGEN_PROPERTY_EXAMPLES", "300"))

TOKENS = ["&a ", "*a", "<<: *a", "<<: [*a, *a]", "[", "]", "{", "}", ": ", "- ", "? ", "|", ">", "---", "...",
          "%YAML 1.1", "!!binary ", "!!python/object/apply:os.system ['true']", "!!str ", "!!int ", "!!set ",
          "#", "'", '"', "\t", "\0", "\r", "\r\n", "\x85", "\u2028", "\ufeff", "é", "\x7f", "yes", "on", "y", "1e3",
          "0x1F", "0777", "-1", "~", "null", "=", "9" * 40, "1_000", "2001-13-45", "12:30:00", ".inf", "x" * 300]
VALUES = ["", "''", '""', '"a\\n"', '"a\\tb"', "yes", "no", "-5", "0", "1.5", "10Ei", "1e400", "-0", "[]", "{}",
          "[a, b]", "{a: 1}", "null", "~", "*a", "&a x", "ghcr.io/x/y:latest", "ghcr.io/x/y", "UPPER", "a" * 64,
          "a" * 254, "system:authenticated", "/", "//x", "/personal/../etc", "nvidia.com/gpu", "kube-system",
          "default", '"\\u2028"', '"\\0"', "'it''s'", "x: y", "!!binary aGk=", "99999999999999999999999"]
HOSTILE_ARGS = ["", "-", "--", "yes", "a" * 300, "bad name", "vision-lab", "nlp-lab", "gh200", "ghost",
                "ghcr.io/urcf/pytorch:2.10.0-cuda13.0", "ghcr.io/x:latest", "x\n", "é", "-5", "0", "1e3", "10Ei",
                "../../etc/passwd"]


@st.composite
def mutated_inventory(draw) -> bytes:
    lines = FLAME.split(b"\n")
    for _ in range(draw(st.integers(0, 4))):
        if not lines:
            break
        at = draw(st.integers(0, len(lines) - 1))
        kind = draw(st.sampled_from(["delete", "duplicate", "swap", "indent", "token", "value", "bytes", "anchor"]))
        line = lines[at]
        if kind == "delete":
            del lines[at]
        elif kind == "duplicate":
            lines.insert(at, line)
        elif kind == "swap":
            other = draw(st.integers(0, len(lines) - 1))
            lines[at], lines[other] = lines[other], line
        elif kind == "indent":
            shift = draw(st.sampled_from([-4, -2, -1, 1, 2, 4]))
            lines[at] = b" " * shift + line if shift > 0 else line[-shift:]
        elif kind == "token":
            column = draw(st.integers(0, len(line)))
            lines[at] = line[:column] + draw(st.sampled_from(TOKENS)).encode() + line[column:]
        elif kind == "value" and b": " in line:
            lines[at] = line[:line.index(b": ") + 2] + draw(st.sampled_from(VALUES)).encode()
        elif kind == "bytes":
            column = draw(st.integers(0, len(line)))
            lines[at] = line[:column] + draw(st.binary(min_size=1, max_size=4)) + line[column:]
        elif kind == "anchor" and b": " in line and not line.rstrip().endswith(b":"):
            # anchor a value here, alias it at another line's value
            lines[at] = line.replace(b": ", b": &a ", 1)
            other = draw(st.integers(0, len(lines) - 1))
            if b": " in lines[other]:
                lines[other] = lines[other][:lines[other].index(b": ") + 2] + b"*a"
    return b"\n".join(lines)


@st.composite
def command(draw) -> tuple[str, list[str], str]:
    """(kind, arguments after the inventory option, output layout)."""
    kind = draw(st.sampled_from(["render", "render", "render", "check", "set-image", "add-namespace",
                                 "set-allocation", "add-group"]))
    layout = draw(st.sampled_from(["plain", "plain", "plain", "symlink", "same", "nested", "inventory-in-out"]))
    arg = st.sampled_from(HOSTILE_ARGS)
    if kind == "set-image":
        return kind, ["inventory", "set-image", "INVENTORY", draw(arg), draw(arg)], layout
    if kind == "add-namespace":
        return kind, ["inventory", "add-namespace", "INVENTORY", draw(arg), draw(arg)], layout
    if kind == "set-allocation":
        return kind, ["inventory", "set-allocation", "INVENTORY", draw(arg), draw(arg), "--cpu", draw(arg)], layout
    if kind == "add-group":
        return kind, ["inventory", "add-group", "INVENTORY", draw(arg), "--namespace", draw(arg), "--class", draw(arg),
                      "--gpus", "0", "--cpu", draw(arg), "--memory", "0"], layout
    return kind, [], layout


_BASELINE: dict[str, Path] = {}
# Examples work on tmpfs when there is one: thousands of small trees, and the disk is shared with builds.
SCRATCH = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None


def baseline() -> Path:
    """FLAME rendered once, copied into every example's directory (cheaper than rendering it each time)."""
    if "dir" not in _BASELINE:
        directory = Path(tempfile.mkdtemp(prefix="gpugen-property-baseline-", dir=SCRATCH))
        (directory / NAME).write_bytes(FLAME)
        result = CliRunner().invoke(main, ["render", "--inventory", str(directory / NAME),
                                           "--out", str(directory / "out"),
                                           "--bootstrap-out", str(directory / "boot"),
                                           "--docs-out", str(directory / "docs" / "runtimes.md")])
        assert result.exit_code == 0, result.output
        _BASELINE["dir"] = directory
        atexit.register(shutil.rmtree, directory, True)
    return _BASELINE["dir"]


def snapshot(work: Path, out: Path, boot: Path, docs: Path) -> tuple:
    return (read_tree(out), read_tree(boot), docs.read_bytes() if docs.is_file() else None,
            (work / NAME).read_bytes())


def expected_render(text: bytes, name: str):
    """What the new inventory renders to, or None when it is refused."""
    try:
        trees = render_trees(load_inventory_text(text.decode("utf-8"), name), name)
    except (InventoryInvalid, OverLimits, UnicodeDecodeError):
        return None
    return trees


@settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=bool(os.environ.get("CI")),
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])
@given(inventory=mutated_inventory(), cli=command())
def test_no_traceback_and_whole_old_or_whole_new_outputs(inventory, cli):
    kind, arguments, layout = cli
    work = Path(tempfile.mkdtemp(prefix="gpugen-property-", dir=SCRATCH))
    try:
        shutil.copytree(baseline(), work, dirs_exist_ok=True, symlinks=True)
        (work / NAME).write_bytes(inventory)
        out, boot, docs = work / "out", work / "boot", work / "docs" / "runtimes.md"
        out_arg = out
        if layout == "symlink":
            out.rename(work / "real-out")
            out.symlink_to(work / "real-out")
        elif layout == "same":
            boot = out
        elif layout == "nested":
            docs = out / "runtimes.md"
        elif layout == "inventory-in-out":
            out_arg = work
        before = snapshot(work, out, boot, docs)
        if kind in ("render", "check"):
            argv = ["render", "--inventory", str(work / NAME), "--out", str(out_arg), "--bootstrap-out", str(boot),
                    "--docs-out", str(docs)] + (["--check"] if kind == "check" else [])
        else:
            argv = [a if a != "INVENTORY" else "--inventory" for a in arguments]
            argv.insert(argv.index("--inventory") + 1, str(work / NAME))
        result = CliRunner().invoke(main, argv)
        event(f"{kind} ({layout}) exit {result.exit_code}")

        assert result.exception is None or isinstance(result.exception, SystemExit), (
            f"{type(result.exception).__name__}: {result.exception}\n{result.output}")
        assert result.exit_code in (0, 1, 2), result.output
        assert "Traceback" not in result.output
        after = snapshot(work, out, boot, docs)
        assert not [p for p in work.rglob("*") if p.name.startswith(".") and TEMP_MARK in p.name], "leftovers"
        if layout == "symlink":
            assert out.is_symlink()
        if kind == "check" or result.exit_code != 0:
            assert after == before, "a refused or checking run must change nothing"
            if result.exit_code == 2 and kind != "check" and not result.output.startswith("Usage"):
                assert str(work / NAME) in result.output or "error: " in result.output, result.output
            return
        if kind == "render":
            trees = expected_render(inventory, NAME)
            assert trees is not None, "render exited 0 on an inventory the library refuses"
            assert after[:3] == (trees.synced, trees.bootstrap, trees.docs), "the new tree, whole"
            assert after[3] == inventory
        else:  # an edit: the file changed into a valid inventory, outputs untouched
            assert after[:3] == before[:3]
            assert expected_render(after[3], NAME) is not None or after[3] == before[3]
            load_inventory_text(after[3].decode("utf-8"), NAME)
    finally:
        shutil.rmtree(work, ignore_errors=True)
