"""Inventory edit commands: comments, key order and layout survive; invalid results are never written."""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner
from tests.support import INVENTORY
from ruamel.yaml import YAML

from generator.cli import main
from generator.inventory import load_inventory_text

ORIGINAL = INVENTORY.read_text(encoding="utf-8")

EDITS = {
    "add-class": ["add-class", "h100", "--arch", "amd64", "--label-value", "NVIDIA-H100-80GB-HBM3",
                  "--image", "ghcr.io/urcf/pytorch:2.9.1-cuda12.9", "--nodes", "2", "--gpus-per-node", "8",
                  "--cpu-per-node", "192", "--memory-per-node", "1900Gi"],
    "set-image": ["set-image", "gh200", "ghcr.io/urcf/pytorch:2.10.0-cuda13.0"],
    "add-group": ["add-group", "physics-lab", "--namespace", "physics", "--namespace", "physics-teaching",
                  "--class", "gh200", "--gpus", "0", "--cpu", "0", "--memory", "0", "--cohort", "flame",
                  "--oidc-group", "oidc:physics-lab", "--user", "carol@example.org"],
    "add-namespace": ["add-namespace", "vision-lab", "vision-lab-students"],
    "set-allocation": ["set-allocation", "vision-lab", "gh200", "--cpu", "30", "--memory", "200G"],
}


def comments(text: str) -> list[str]:
    """Every comment, whole-line or trailing, in order."""
    return [m.group(0).strip() for line in text.splitlines() for m in [re.search(r"(^|\s)#.*$", line)] if m]


def key_paths(text: str) -> list[str]:
    def walk(node, prefix):
        if isinstance(node, dict):
            for key, value in node.items():
                yield f"{prefix}.{key}"
                yield from walk(value, f"{prefix}.{key}")
    return list(walk(YAML(typ="rt").load(text), ""))


def is_subsequence(small: list, big: list) -> bool:
    iterator = iter(big)
    return all(item in iterator for item in small)


@pytest.fixture()
def inventory(tmp_path):
    path = tmp_path / "gpu_classes.yaml"
    path.write_text(ORIGINAL, encoding="utf-8")
    return path


@pytest.mark.parametrize("name", sorted(EDITS))
def test_edit_keeps_comments_and_key_order_and_validates(name, inventory):
    result = CliRunner().invoke(main, ["inventory", EDITS[name][0], "--inventory", str(inventory), *EDITS[name][1:]])
    assert result.exit_code == 0, result.output
    edited = inventory.read_text(encoding="utf-8")
    assert edited != ORIGINAL
    assert comments(edited) == comments(ORIGINAL)
    assert is_subsequence(key_paths(ORIGINAL), key_paths(edited))
    load_inventory_text(edited)  # raises if invalid
    # Lines the edit had no reason to touch stay byte-identical: the diff is only additions or the edited values.
    untouched = [line for line in ORIGINAL.splitlines() if line.strip().startswith("#")]
    assert all(line in edited.splitlines() for line in untouched)


def test_edits_land_where_expected(inventory):
    runner = CliRunner()
    for name in ("add-class", "set-image", "add-namespace", "set-allocation", "add-group"):
        assert runner.invoke(main, ["inventory", EDITS[name][0], "--inventory", str(inventory),
                                    *EDITS[name][1:]]).exit_code == 0
    inv = load_inventory_text(inventory.read_text())
    assert inv.classes["h100"].nodeSelector == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    assert inv.classes["gh200"].image.endswith(":2.10.0-cuda13.0")
    assert inv.groups["vision-lab"].namespaces == ["vision-lab", "vision-lab-students"]
    identities = inv.groups["physics-lab"].identities
    assert (identities.groups, identities.users) == (["oidc:physics-lab"], ["carol@example.org"])
    allocation = inv.groups["vision-lab"].allocations["gh200"]
    assert (allocation.cpu, allocation.memory) == ("30", "200G")
    assert "        cpu: 30\n" in inventory.read_text(), "a whole number stays unquoted, as a person writes it"
    assert "namespaces: [vision-lab, vision-lab-students]" in inventory.read_text(), "flow style kept"


@pytest.mark.parametrize("args, reason", [
    (["set-allocation", "vision-lab", "gh200", "--gpus", "2"], r"gpus oversubscribed"),
    (["add-namespace", "vision-lab", "nlp-lab"], r"group 'nlp-lab' and group 'vision-lab' \(.+:\d+:\d+\) would "
                                                 r"both render Namespace nlp-lab"),
    (["set-image", "gh200", "ghcr.io/urcf/pytorch:latest"], r":latest"),
    (["set-image", "h100", "ghcr.io/urcf/pytorch:1"], r"no class 'h100'"),
    (["add-group", "vision-lab", "--namespace", "x", "--class", "gh200", "--gpus", "0", "--cpu", "0",
      "--memory", "0"], r"group 'vision-lab' already exists"),
    (["add-namespace", "vision-lab", "Bad_Name"], r"should match pattern"),
    (["add-group", "physics", "--namespace", "physics", "--class", "gh200", "--gpus", "0", "--cpu", "0",
      "--memory", "0", "--oidc-group", "oidc:vision-lab"], r"'oidc:vision-lab' already belongs to group 'vision-lab'"),
    (["add-group", "physics", "--namespace", "kube-system", "--class", "gh200", "--gpus", "0", "--cpu", "0",
      "--memory", "0"], r"'kube-system' belongs to the platform"),
    (["add-namespace", "vision-lab", "yes"], None),  # quoted on insertion: a valid namespace named "yes"
])
def test_invalid_edits_are_refused_and_write_nothing(args, reason, inventory):
    before = inventory.read_bytes(), inventory.stat().st_mtime_ns
    result = CliRunner().invoke(main, ["inventory", args[0], "--inventory", str(inventory), *args[1:]])
    if reason is None:
        assert result.exit_code == 0, result.output
        assert "vision-lab, \"yes\"]" in inventory.read_text()
        assert load_inventory_text(inventory.read_text()).groups["vision-lab"].namespaces[-1] == "yes"
        return
    assert result.exit_code == 2, result.output
    assert re.search(reason, result.stderr), result.stderr
    assert "nothing written" in result.stderr
    assert (inventory.read_bytes(), inventory.stat().st_mtime_ns) == before


@pytest.mark.parametrize("mode", [0o444, 0o400, 0o555])
@pytest.mark.parametrize("through_link", [False, True])
def test_a_read_only_inventory_is_refused_not_replaced(mode, through_link, inventory):
    # Editors refuse to write a file someone made read-only; replacing it by rename would succeed (even as
    # root), so the edit must look at the file's mode itself.
    target = inventory
    if through_link:
        target = inventory.with_name("link.yaml")
        target.symlink_to(inventory.name)
    inventory.chmod(mode)
    before = inventory.read_bytes(), inventory.stat().st_ino, inventory.stat().st_mtime_ns
    result = CliRunner().invoke(main, ["inventory", *EDITS["set-image"][:1], "--inventory", str(target),
                                       *EDITS["set-image"][1:]])
    assert result.exit_code == 2, result.output
    assert re.search(rf"read-only \(mode 0{mode:o}\).*nothing written", result.stderr), result.stderr
    assert (inventory.read_bytes(), inventory.stat().st_ino, inventory.stat().st_mtime_ns) == before
    assert sorted(path.name for path in inventory.parent.iterdir()) == sorted(
        ["gpu_classes.yaml"] + (["link.yaml"] if through_link else [])), "no temporary or lock file left"


def test_a_byte_order_mark_inside_the_file_is_refused_by_edits_and_renders_alike(inventory):
    """gpugen's reader and the round-trip editor once disagreed about a U+FEFF after the first line (the editor
    crashed with ruamel's ParserError): it is refused at its line, by every command, and nothing is written."""
    text = inventory.read_text(encoding="utf-8")
    second = text.index("\n") + 1
    inventory.write_text(text[:second] + "\ufeff" + text[second:], encoding="utf-8")
    before = inventory.read_bytes(), inventory.stat().st_mtime_ns
    result = CliRunner().invoke(main, ["inventory", "set-image", "--inventory", str(inventory), "gh200",
                                       "ghcr.io/urcf/pytorch:2.10.0"])
    assert result.exit_code == 2, result.output
    assert re.search(r":2:1: \(file\): a byte order mark \(U\+FEFF\) inside the file", result.stderr), result.stderr
    assert (inventory.read_bytes(), inventory.stat().st_mtime_ns) == before
