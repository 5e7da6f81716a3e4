"""Inventory edits change only the lines they must: every other line stays byte for byte, comments, spacing,
indentation, quoting and line endings included, whatever layout the file has (ruamel.yaml alone would
re-indent and re-space the whole file)."""

from __future__ import annotations

import difflib
import re

import pytest
from tests.support import INVENTORY

from generator.inventory import edit, load_inventory_text

FLAME = INVENTORY.read_text()


def four_spaces(text: str) -> str:
    return "".join(re.sub(r"^( +)", lambda m: m.group(1) * 2, line) for line in text.splitlines(keepends=True))


def odd_spacing(text: str) -> str:
    """Extra spaces after colons, padded flow lists, a trailing comment on every value line."""
    out = []
    for line in text.splitlines(keepends=True):
        body = line.rstrip("\n")
        if re.match(r"^\s*[\w./-]+: \S", body) and "#" not in body:
            key, value = body.split(": ", 1)
            body = f"{key}:   {value.replace('[', '[ ').replace(']', ' ]')}   # note"
        out.append(body + "\n")
    return "".join(out)


VARIANTS = {
    "flame": FLAME,
    "crlf": FLAME.replace("\n", "\r\n"),
    "four-spaces": four_spaces(FLAME),
    "odd-spacing": odd_spacing(FLAME),
    "no-final-newline": FLAME.rstrip("\n"),
    "mixed": odd_spacing(four_spaces(FLAME)).replace("\n", "\r\n"),
}
EDITS = {
    "set-image": (edit.set_image("gh200", "ghcr.io/urcf/pytorch:2.10.0-cuda13.0"), 1),
    "set-allocation": (edit.set_allocation("vision-lab", "gh200", cpu="30"), 1),
    "add-namespace": (edit.add_namespace("vision-lab", "vision-lab-extra"), 1),
    "add-group": (edit.add_group("physics-lab", namespaces=["physics"], class_name="gh200", gpus=0, cpu="0",
                                 memory="0", cohort="flame"), 0),
    "add-class": (edit.add_class("h100", arch="amd64", label_value="NVIDIA-H100", image="ghcr.io/urcf/pytorch:2.9.1",
                                 nodes=1, gpus=8, cpu="96", memory="1Ti"), 0),
}


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("name", EDITS)
def test_every_untouched_line_stays_byte_identical(variant, name):
    original = VARIANTS[variant]
    assert load_inventory_text(original, "inv.yaml")
    change, most_lines_changed = EDITS[name]
    edited = edit.edit_text(original, change)
    load_inventory_text(edited, "inv.yaml")  # still valid
    before, after = original.splitlines(keepends=True), edited.splitlines(keepends=True)
    # Every original line is either kept byte for byte or among the few the edit had to change.
    changed = [before[i] for tag, i1, i2, _, _ in difflib.SequenceMatcher(None, before, after, autojunk=False)
               .get_opcodes() if tag in ("replace", "delete") for i in range(i1, i2)]
    if not original.endswith("\n") and name.startswith("add-"):
        most_lines_changed += 1  # the last line gains the line break that separates it from the new entry
    assert len(changed) <= most_lines_changed, changed
    if "\r\n" in original:
        assert edited.count("\n") == edited.count("\r\n"), "new lines take the file's CRLF"
    else:
        assert "\r" not in edited
    assert edited.endswith("\n") == original.endswith("\n") or name.startswith("add-")


def test_no_op_edit_returns_the_text_unchanged():
    for text in VARIANTS.values():
        assert edit.edit_text(text, lambda document: None) == text
