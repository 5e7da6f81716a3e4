"""Hostile and careless inventories: each is refused with FILE:LINE:COL naming its line, exit 2, nothing
written, within bounded memory and time; none raises a traceback.

The unbounded cases (alias bombs, deep nesting, /dev/zero, a FIFO) run as real processes under a 500 MB
address-space limit and a 20 s timeout, so a regression shows as a failure, not as a hung or swapped machine.
"""

from __future__ import annotations

import os
import re
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from tests.support import INVENTORY, REPO

from generator import limits
from generator.cli import main
from generator.inventory import InventoryInvalid, load_inventory_text
from generator.inventory import load as load_module
from generator.inventory import reading, yaml11

FLAME = INVENTORY.read_text()
MEMORY_LIMIT = 500 * 1024 * 1024
TIME_LIMIT_S = 20


def line_of(text: str, needle: str) -> int:
    """1-based line of the first line containing `needle`."""
    return next(number for number, line in enumerate(text.splitlines(), 1) if needle in line)


def replace_line(text: str, needle: str, new_value_line: str) -> str:
    """Replace the whole line holding `needle`, keeping its indentation."""
    lines = text.splitlines(keepends=True)
    index = line_of(text, needle) - 1
    indent = lines[index][:len(lines[index]) - len(lines[index].lstrip())]
    lines[index] = indent + new_value_line + "\n"
    return "".join(lines)


def outputs(tmp_path: Path) -> list[str]:
    return ["--out", str(tmp_path / "out"), "--bootstrap-out", str(tmp_path / "boot"),
            "--docs-out", str(tmp_path / "docs" / "runtimes.md")]


def render_process(inventory: str | Path, tmp_path: Path) -> subprocess.CompletedProcess:
    """`render` as a separate process under the 500 MB / 20 s bound."""
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))

    return subprocess.run([sys.executable, "-m", "generator", "render", "--inventory", str(inventory),
                           *outputs(tmp_path)], cwd=REPO, capture_output=True, text=True, timeout=TIME_LIMIT_S,
                          preexec_fn=limit)


def assert_refused(result, path: str, line: int | None, reason: str, tmp_path: Path) -> None:
    stderr = result.stderr if isinstance(result, subprocess.CompletedProcess) else result.output
    code = result.returncode if isinstance(result, subprocess.CompletedProcess) else result.exit_code
    assert "Traceback" not in stderr, stderr
    assert code == 2, stderr
    where = re.escape(path) + (f":{line}:\\d+: " if line else r"(:\d+:\d+)?: ")
    assert re.search(where + ".*" + reason, stderr), stderr
    assert not (tmp_path / "out").exists(), "nothing may be written"


def write(tmp_path: Path, text: str | bytes, name: str = "gpu_classes.yaml") -> Path:
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


SIZES = ["small", "large"]


def sized(text: str, size: str) -> str:
    """`text`, or ("large") followed by a comment that makes it large enough for its shape to be checked in a forked
    child while this process composes it (yaml11.PARALLEL_FROM): each refusal must be the same either way."""
    if size == "small":
        return text
    line = "# " + "padding " * 12 + "\n"
    return text + line * (yaml11.PARALLEL_FROM // len(line) + 1)


# ----------------------------------------------------------------------------------------- unbounded input

def alias_bomb(levels: int = 12, width: int = 9) -> str:
    lines = ["a0: &a0 [" + ", ".join(["lol"] * width) + "]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("where", ["top", "inside-a-class", "in-a-merge-key"])
def test_alias_bomb_is_refused_at_the_alias_within_bounds(where, size, tmp_path):
    bomb = alias_bomb()
    if where == "top":
        text = bomb + FLAME
        line = line_of(text, "a5: &a5")  # 9^6 > MAX_NODES: refused while reading a5
    elif where == "inside-a-class":
        indented = "".join("    x" + entry + "\n" for entry in bomb.splitlines())
        text = FLAME.replace("    arch: arm64\n",
                             "    arch: arm64\n    bomb:\n" + indented.replace("    x", "      "), 1)
        line = line_of(text, "a5: &a5")
    else:
        text = FLAME.replace("classes:\n", "defaults: &d\n" + "".join("  " + e + "\n" for e in bomb.splitlines())
                             + "classes:\n", 1).replace("    arch: arm64\n", "    arch: arm64\n    <<: *d\n", 1)
        line = line_of(text, "a5: &a5")
    result = render_process(write(tmp_path, sized(text, size)), tmp_path)
    assert_refused(result, str(tmp_path / "gpu_classes.yaml"), line, "expands to more than", tmp_path)


@pytest.mark.parametrize("size", SIZES)
def test_recursive_anchor_is_refused(size, tmp_path):
    text = FLAME.replace("    arch: arm64\n", "    arch: arm64\n    loop: &loop [a, *loop]\n", 1)
    result = render_process(write(tmp_path, sized(text, size)), tmp_path)
    assert_refused(result, str(tmp_path / "gpu_classes.yaml"), line_of(text, "loop: &loop"), "recursive", tmp_path)


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("style", ["flow", "block", "through-alias"])
def test_deep_nesting_is_refused_without_recursion_error(style, size, tmp_path):
    if style == "flow":
        text = FLAME + "deep: " + "[" * 400 + "]" * 400 + "\n"
    elif style == "block":
        text = FLAME + "deep:\n" + "".join(" " * i + f"k{i}:\n" for i in range(1, 300)) + " " * 300 + "end: 1\n"
    else:  # 20 levels anchored, used 20 levels down: 40 once followed
        nested = "[" * 20 + "]" * 20
        text = FLAME + f"anchor: &n {nested}\n" + "use: " + "[" * 20 + "*n" + "]" * 20 + "\n"
    result = render_process(write(tmp_path, sized(text, size)), tmp_path)
    # Flow: the line holding it all; block: the first key past the limit.
    line = line_of(text, {"flow": "deep:", "block": f"k{yaml11.MAX_DEPTH}:", "through-alias": "use:"}[style])
    assert_refused(result, str(tmp_path / "gpu_classes.yaml"), line, "nested more than", tmp_path)


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("first", ["alias bomb", "syntax error"])
def test_the_first_of_a_shape_problem_and_a_syntax_error_is_the_one_reported(first, size, tmp_path):
    broken = "oops: a\n  bad: b\n"  # a mapping value where none may start
    text = (alias_bomb() + broken if first == "alias bomb" else broken + alias_bomb()) + FLAME
    result = render_process(write(tmp_path, sized(text, size)), tmp_path)
    if first == "alias bomb":
        assert_refused(result, str(tmp_path / "gpu_classes.yaml"), line_of(text, "a5: &a5"), "expands to more than",
                       tmp_path)
    else:
        assert_refused(result, str(tmp_path / "gpu_classes.yaml"), line_of(text, "bad: b"),
                       "YAML: mapping values are not allowed", tmp_path)


def test_endless_input_is_refused_not_loaded(tmp_path):
    result = render_process("/dev/zero", tmp_path)
    assert_refused(result, "/dev/zero", 1, "larger than", tmp_path)


def test_large_file_is_refused(tmp_path):
    text = FLAME + "# padding\n" * (reading.MAX_INPUT_BYTES // 10 + 1)
    result = render_process(write(tmp_path, text), tmp_path)
    assert_refused(result, str(tmp_path / "gpu_classes.yaml"), 1, "larger than", tmp_path)


def test_fifo_without_writer_does_not_hang(tmp_path):
    fifo = tmp_path / "inventory.fifo"
    os.mkfifo(fifo)
    result = render_process(fifo, tmp_path)
    assert_refused(result, str(fifo), 1, "empty", tmp_path)


def test_directory_as_inventory_is_refused(tmp_path):
    invalid = None
    try:
        load_module.load_inventory(tmp_path)
    except InventoryInvalid as refused:
        invalid = refused
    assert invalid is not None and "cannot read" in str(invalid)


@pytest.mark.parametrize("folder", ["a{b}", "{count}", "a{0}"])
def test_braces_in_the_inventory_path_are_printed_not_formatted(folder, tmp_path):
    inventory = tmp_path / folder / "gpu_classes.yaml"
    inventory.parent.mkdir()
    inventory.write_text("cluster: {}\n")
    done = render_process(inventory, tmp_path)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.splitlines()[-1] == f"{inventory}: 7 problem(s); nothing written."


# ----------------------------------------------------------------------------------------- encoding

def test_nul_byte_is_reported_at_its_line(tmp_path):
    text = FLAME.replace("    arch: arm64", "    arch: ar\0m64", 1)
    result = CliRunner().invoke(main, ["render", "--inventory", str(write(tmp_path, text)), *outputs(tmp_path)])
    assert_refused(result, str(tmp_path / "gpu_classes.yaml"), line_of(text, "arch: ar"), "U\\+0000", tmp_path)


def test_invalid_utf8_is_reported_at_its_line(tmp_path):
    data = FLAME.encode().replace(b"    arch: arm64", b"    arch: arm\xff64", 1)
    result = CliRunner().invoke(main, ["render", "--inventory", str(write(tmp_path, data)), *outputs(tmp_path)])
    assert_refused(result, str(tmp_path / "gpu_classes.yaml"), line_of(FLAME, "arch: arm64"), "not UTF-8", tmp_path)



# YAML 1.1, 5.1: the printable set, as the specification words it.
YAML_PRINTABLE = ((0x09, 0x09), (0x0A, 0x0A), (0x0D, 0x0D), (0x20, 0x7E), (0x85, 0x85), (0xA0, 0xD7FF),
                  (0xE000, 0xFFFD), (0x10000, 0x10FFFF))


def test_every_code_point_outside_yaml_s_printable_set_and_only_those_is_refused():
    refused = {cp for cp in range(0x110000) if reading._NOT_YAML.fullmatch(chr(cp))}
    printable = {cp for low, high in YAML_PRINTABLE for cp in range(low, high + 1)}
    assert refused == set(range(0x110000)) - printable

# ----------------------------------------------------------------------------------------- values

@pytest.mark.parametrize("needle,value", [
    ("image: ", 'image: "ghcr.io/urcf/pytorch:2.9.1-cuda12.9\\n"'),
    ("nvidia.com/gpu.product: NVIDIA", 'nvidia.com/gpu.product: "NVIDIA-GH200-480GB\\n"'),
    ("nvidia.com/gpu.product: NVIDIA", 'nvidia.com/gpu.product: "NVIDIA-GH200\\t480GB"'),
    ("repoURL:", 'repoURL: "https://github.com/urcf/flame-gitops.git\\r"'),
    ("name: flame", 'name: "flame\\u2028"'),
    ("targetRevision:", 'targetRevision: "main\\x7f"'),
])
def test_line_breaks_and_controls_in_single_line_values_are_refused(needle, value, tmp_path):
    text = replace_line(FLAME, needle, value)
    with pytest.raises(InventoryInvalid) as refused:
        load_inventory_text(text, "inv.yaml")
    line = line_of(text, value.split(":")[0] + ":")
    assert re.match(rf"inv\.yaml:{line}:\d+: ", str(refused.value)), str(refused.value)


def test_trailing_newline_is_refused_by_the_patterns_too():
    """Belt and braces: the models' patterns match the whole string ($ alone accepts a final newline)."""
    from generator import fields
    from generator.inventory import models

    for check, value in ((fields._image, "ghcr.io/urcf/pytorch:2.9\n"), (models._label_value, "NVIDIA\n"),
                         (models._label_key, "nvidia.com/gpu\n")):
        with pytest.raises(ValueError):
            check(value)


def test_multiline_description_is_accepted_but_bounded():
    text = replace_line(FLAME, "description: NVIDIA", 'description: "line one\\n\\tline two"')
    assert load_inventory_text(text, "inv.yaml")
    huge = replace_line(FLAME, "description: NVIDIA", "description: " + "x" * (yaml11.MAX_TEXT + 1))
    with pytest.raises(InventoryInvalid, match=rf"inv\.yaml:{line_of(huge, 'description: xxx')}:\d+: .*at most"):
        load_inventory_text(huge, "inv.yaml")


def test_huge_integer_and_impossible_date_are_refused_at_their_line():
    for value in ("nodes: " + "9" * 5000, "nodes: 2001-13-45", "nodes: !!int ", "nodes: !!float x"):
        text = replace_line(FLAME, "nodes: ", value)
        with pytest.raises(InventoryInvalid, match=rf"inv\.yaml:{line_of(text, value[:12])}:\d+: "):
            load_inventory_text(text, "inv.yaml")


@pytest.mark.parametrize("needle, tagged", [
    ("cacheEnv:", "cacheEnv: !!python/object:os.system"),
    ("cacheEnv:", "cacheEnv: !!python/object/new:os.system"),
    ("cacheEnv:", "cacheEnv: !!set"),
    ("cacheEnv:", "cacheEnv: !!omap"),
    ("cacheEnv:", "cacheEnv: !local"),
    ("namespaces: [vision-lab]", "namespaces: !!python/tuple [vision-lab]"),
    ("namespaces: [vision-lab]", "namespaces: !!pairs [vision-lab]"),
    ("HF_HOME:", "HF_HOME: !!python/name:os.system x"),
])
def test_a_tag_on_a_mapping_list_or_scalar_is_refused_at_its_line(needle, tagged, tmp_path):
    # A collection's tag used to be dropped in silence while the same tag on a scalar was refused.
    text = FLAME.replace(needle, tagged, 1)
    assert text != FLAME
    result = CliRunner().invoke(main, ["render", "--inventory", str(write(tmp_path, text)), *outputs(tmp_path)])
    assert_refused(result, str(tmp_path / "gpu_classes.yaml"), line_of(text, tagged), "tag", tmp_path)


def test_plain_tags_on_collections_are_accepted():
    text = FLAME.replace("cacheEnv:", "cacheEnv: !!map", 1).replace("namespaces: [vision-lab]",
                                                                     "namespaces: !!seq [vision-lab]", 1)
    assert load_inventory_text(text, "inv.yaml") == load_inventory_text(FLAME, "inv.yaml")


def test_merge_key_with_override_is_accepted_and_duplicates_are_not():
    anchored = FLAME.replace("    perNode:\n", "    perNode: &node\n", 1)
    # A second class whose perNode merges the first one's and overrides cpu.
    second = ("  other:\n    arch: amd64\n    nodeSelector:\n      nvidia.com/gpu.product: OTHER\n"
              "    image: ghcr.io/urcf/pytorch:2.9.1-cuda12.9\n    nodes: 1\n    perNode:\n      <<: *node\n"
              "      cpu: 30\n")
    text = anchored.replace("\ngroups:\n", "\n" + second + "\ngroups:\n", 1)
    inventory = load_inventory_text(text, "inv.yaml")
    assert str(inventory.classes["other"].perNode.cpu) == "30"
    assert inventory.classes["other"].perNode.gpus == inventory.classes["gh200"].perNode.gpus
    duplicate = text.replace("      cpu: 30\n", "      cpu: 30\n      cpu: 31\n", 1)
    line = line_of(duplicate, "cpu: 31")
    with pytest.raises(InventoryInvalid, match=rf"inv\.yaml:{line}:\d+: .*duplicate key 'cpu'"):
        load_inventory_text(duplicate, "inv.yaml")


def test_a_valid_253_character_group_name_is_refused_at_its_line_not_with_enametoolong(tmp_path):
    name = ".".join(["a" * 63] * 4)[:253].rstrip(".")
    assert len(name) >= 250
    text = FLAME.replace("\n  vision-lab:\n", f"\n  {name}:\n", 1)
    result = CliRunner().invoke(main, ["render", "--inventory", str(write(tmp_path, text)), *outputs(tmp_path)])
    assert_refused(result, str(tmp_path / "gpu_classes.yaml"), line_of(text, name), "255-byte file-name limit",
                   tmp_path)


def test_too_many_namespaces_are_refused_before_building(tmp_path):
    many = "[" + ", ".join(f"ns-{i}" for i in range(load_module.MAX_ENTRIES)) + "]"
    text = replace_line(FLAME, "namespaces: [vision-lab]", f"namespaces: {many}")
    with pytest.raises(InventoryInvalid, match=r"inv\.yaml:\d+:\d+: groups: .*renders at most"):
        load_inventory_text(text, "inv.yaml")


# ----------------------------------------------------------------------------------------- rendered limits

def test_rendered_objects_are_checked_against_kubernetes_limits():
    base = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "ok"}}
    assert limits.object_problems(base, "kueue/clusterqueue/ok.yaml", b"") == []
    big_annotations = {**base, "metadata": {"name": "ok", "annotations": {"a": "x" * (256 * 1024)}}}
    assert "annotations add up" in limits.object_problems(big_annotations, "p.yaml", b"")[0]
    huge = {**base, "spec": {"x": ["y" * 100] * 20000}}
    assert any("as JSON" in p for p in limits.object_problems(huge, "p.yaml", b"x" * 2_000_000))
    bad_label = {**base, "metadata": {"name": "ok", "labels": {"a": "b" * 64}}}
    assert "label value" in limits.object_problems(bad_label, "p.yaml", b"")[0]
    assert "file name" in limits.object_problems(base, "kueue/" + "n" * 256 + ".yaml", b"")[0]
    cel = {"apiVersion": "policies.kyverno.io/v1", "kind": "ValidatingPolicy", "metadata": {"name": "p"},
           "spec": {"validations": [{"expression": "x" * (limits.MAX_CEL_CHARACTERS + 1)}]}}
    assert "CEL" in limits.object_problems(cel, "p.yaml", b"")[0]


def test_render_refuses_an_object_over_the_limits_naming_the_inventory(tmp_path, monkeypatch):
    monkeypatch.setattr(limits, "MAX_ANNOTATIONS_BYTES", 100)  # FLAME's descriptions pass it
    result = CliRunner().invoke(main, ["render", "--inventory", str(write(tmp_path, FLAME)), *outputs(tmp_path)])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert re.search(rf"{re.escape(str(tmp_path / 'gpu_classes.yaml'))}: rendered \S+\.yaml: annotations add up",
                     result.output), result.output
    assert not (tmp_path / "out").exists()


# ----------------------------------------------------------------------------------------- outputs and plan

@pytest.mark.parametrize("layout", ["bootstrap-is-out", "docs-inside-out", "out-inside-bootstrap",
                                    "out-holds-inventory", "docs-is-inventory"])
def test_overlapping_outputs_are_refused(layout, tmp_path):
    inventory = write(tmp_path, FLAME)
    out, boot, docs = tmp_path / "out", tmp_path / "boot", tmp_path / "docs.md"
    if layout == "bootstrap-is-out":
        boot = out
    elif layout == "docs-inside-out":
        docs = out / "runtimes.md"
    elif layout == "out-inside-bootstrap":
        out = boot / "rendered"
    elif layout == "out-holds-inventory":
        out = tmp_path
    else:
        docs = inventory
    result = CliRunner().invoke(main, ["render", "--inventory", str(inventory), "--out", str(out),
                                       "--bootstrap-out", str(boot), "--docs-out", str(docs)])
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    assert "error: " in result.output
    assert inventory.read_text() == FLAME
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gpu_classes.yaml"]


def test_symlinked_output_and_inventory_are_followed_not_replaced(tmp_path):
    real_out, real_inv = tmp_path / "real-out", tmp_path / "real.yaml"
    real_out.mkdir()
    real_inv.write_text(FLAME)
    (tmp_path / "out").symlink_to(real_out)
    (tmp_path / "inv.yaml").symlink_to(real_inv)
    args = ["render", "--inventory", str(tmp_path / "inv.yaml"), *outputs(tmp_path)]
    assert CliRunner().invoke(main, args).exit_code == 0
    assert (tmp_path / "out").is_symlink() and (real_out / "kustomization.yaml").is_file()
    result = CliRunner().invoke(main, [*args, "--check"])
    assert result.exit_code == 0, result.output
    edited = CliRunner().invoke(main, ["inventory", "set-image", "--inventory", str(tmp_path / "inv.yaml"), "gh200",
                                       "ghcr.io/urcf/pytorch:2.10.0-cuda13.0"])
    assert edited.exit_code == 0, edited.output
    assert (tmp_path / "inv.yaml").is_symlink() and "2.10.0" in real_inv.read_text()
    assert CliRunner().invoke(main, args).exit_code == 0
    assert (tmp_path / "out").is_symlink() and "2.10.0" in "".join(p.read_text() for p in real_out.rglob("*.yaml"))


def test_plan_at_an_unexpected_tree_is_refused_cleanly(tmp_path):
    inventory = write(tmp_path, FLAME)
    for out in (str(tmp_path / "elsewhere"), "docs", "/"):
        result = CliRunner().invoke(main, ["plan", "--inventory", str(inventory), "--out", out])
        assert (result.exit_code in (0, 2) and result.exception is None) or isinstance(result.exception, SystemExit), (
            out, result.output)
        assert "Traceback" not in result.output
    result = CliRunner().invoke(main, ["plan", "--inventory", str(inventory), "--out", "docs"])
    assert result.exit_code == 2 and "gpugen did not write" in result.output, result.output


def test_an_edit_whose_result_is_over_kubernetes_limits_is_refused(tmp_path, monkeypatch):
    inventory = write(tmp_path, FLAME)
    monkeypatch.setattr(limits, "MAX_ANNOTATIONS_BYTES", 100)
    result = CliRunner().invoke(main, ["inventory", "set-image", "--inventory", str(inventory), "gh200",
                                       "ghcr.io/urcf/pytorch:2.10.0-cuda13.0"])
    assert result.exit_code == 2 and "annotations add up" in result.output, result.output
    assert inventory.read_text() == FLAME
