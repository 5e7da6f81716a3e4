"""Edit gpu_classes.yaml in place, keeping its comments, key order and layout (ruamel.yaml round-trip).

Each edit is a pure function on the round-trip document; `apply_edit` validates the edited text exactly as a
render would and refuses to write an invalid inventory.
"""

from __future__ import annotations

import io
import os
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.scalarstring import DoubleQuotedScalarString
from ruamel.yaml.util import load_yaml_guess_indent

from generator.inventory.load import load_inventory_text

Edit = Callable[[CommentedMap], None]


class EditRefused(Exception):
    """The edit does not apply (unknown class, existing name, ...)."""


def _reads_as_string(text: str) -> bool:
    reader = YAML(typ="safe", pure=True)
    reader.version = (1, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return isinstance(reader.load(f"k: {text}\n")["k"], str)
        except Exception:  # noqa: BLE001 - anything that does not parse plain needs quotes
            return False


def _scalar(value: Any) -> Any:
    # New strings that the inventory's YAML 1.1 reading would take for a boolean or number are quoted.
    if isinstance(value, str) and not _reads_as_string(value):
        return DoubleQuotedScalarString(value)
    return value


def _mapping(values: dict[str, Any]) -> CommentedMap:
    result = CommentedMap()
    for key, value in values.items():
        if value is None:
            continue
        if isinstance(value, dict):
            result[key] = _mapping(value)
        elif isinstance(value, list):
            result[key] = CommentedSeq(_scalar(v) for v in value)
        else:
            result[key] = _scalar(value)
    return result


def _section(document: CommentedMap, name: str) -> CommentedMap:
    section = document.get(name)
    if not isinstance(section, dict):
        raise EditRefused(f"the inventory has no '{name}' mapping")
    return section


_SINGULAR = {"classes": "class", "groups": "group"}


def _entry(document: CommentedMap, section: str, name: str) -> CommentedMap:
    """The existing entry `name` of `section` (classes, groups), or a refusal listing what exists."""
    entries = _section(document, section)
    if name not in entries:
        raise EditRefused(f"no {_SINGULAR[section]} '{name}' ({section}: {', '.join(entries)})")
    return entries[name]


def add_class(name: str, *, arch: str, label_value: str, image: str, nodes: int, gpus: int, cpu: str, memory: str,
              flavor: str | None = None, num_nodes: int | None = None, description: str | None = None) -> Edit:
    def edit(document: CommentedMap) -> None:
        classes = _section(document, "classes")
        if name in classes:
            raise EditRefused(f"class '{name}' already exists")
        label = _section(document, "cluster").get("gpuClassLabel")
        classes[name] = _mapping({
            "description": description, "arch": arch, "nodeSelector": {label: label_value}, "flavor": flavor,
            "image": image, "nodes": nodes, "perNode": {"gpus": gpus, "cpu": _quantity(cpu), "memory": memory},
            "numNodes": num_nodes,
        })
    return edit


def set_image(class_name: str, image: str) -> Edit:
    def edit(document: CommentedMap) -> None:
        _entry(document, "classes", class_name)["image"] = _scalar(image)
    return edit


def add_group(name: str, *, namespaces: list[str], class_name: str, gpus: int, cpu: str, memory: str,
              cohort: str | None = None, description: str | None = None) -> Edit:
    def edit(document: CommentedMap) -> None:
        groups = _section(document, "groups")
        if name in groups:
            raise EditRefused(f"group '{name}' already exists")
        groups[name] = _mapping({
            "description": description, "namespaces": namespaces, "cohort": cohort,
            "allocations": {class_name: {"gpus": gpus, "cpu": _quantity(cpu), "memory": memory}},
        })
    return edit


def add_namespace(group: str, namespace: str) -> Edit:
    def edit(document: CommentedMap) -> None:
        namespaces = _entry(document, "groups", group).get("namespaces")
        if not isinstance(namespaces, list):
            raise EditRefused(f"group '{group}' has no namespaces list")
        if namespace in namespaces:
            raise EditRefused(f"namespace '{namespace}' is already in group '{group}'")
        namespaces.append(_scalar(namespace))
    return edit


def set_allocation(group: str, class_name: str, *, gpus: int | None = None, cpu: str | None = None,
                   memory: str | None = None) -> Edit:
    def edit(document: CommentedMap) -> None:
        allocations = _entry(document, "groups", group).setdefault("allocations", CommentedMap())
        if class_name not in allocations:
            if None in (gpus, cpu, memory):
                raise EditRefused(f"'{group}' has no allocation on '{class_name}' yet: give --gpus, --cpu and --memory")
            allocations[class_name] = CommentedMap()
        allocation = allocations[class_name]
        for key, value in (("gpus", gpus), ("cpu", None if cpu is None else _quantity(cpu)), ("memory", memory)):
            if value is not None:
                allocation[key] = _scalar(value)
    return edit


def _quantity(text: str) -> int | str:
    """`72` stays an integer, as a person would write it; `500m` stays a string."""
    return int(text) if text.isdigit() else text


def _yaml(indent: int, block_seq_indent: int | None) -> YAML:
    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    yaml.width = 4096  # never re-wrap a person's long lines
    offset = block_seq_indent or 0
    yaml.indent(mapping=indent, sequence=indent + offset, offset=offset)
    return yaml


def edit_text(text: str, edit: Edit) -> str:
    _, indent, block_seq_indent = load_yaml_guess_indent(text)
    yaml = _yaml(indent or 2, block_seq_indent)
    document = yaml.load(text)  # with preserve_quotes, so "yes" stays quoted
    if not isinstance(document, CommentedMap):
        raise EditRefused("the inventory is not a mapping")
    edit(document)
    out = io.StringIO()
    yaml.dump(document, out)
    return out.getvalue()


def apply_edit(path: Path, edit: Edit) -> str:
    """Edit the file at `path`; write it only if the result is a valid inventory. Returns the new text."""
    original = path.read_text(encoding="utf-8")
    # Validate the starting point too: editing a broken file would blame the edit for old problems.
    load_inventory_text(original, str(path))
    edited = edit_text(original, edit)
    load_inventory_text(edited, f"{path} (after the edit)")
    if edited != original:
        fd, staging = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(edited)
        os.chmod(staging, path.stat().st_mode & 0o777)
        os.replace(staging, path)
    return edited


__all__ = ["EditRefused", "add_class", "add_group", "add_namespace", "apply_edit", "edit_text",
           "set_allocation", "set_image"]
