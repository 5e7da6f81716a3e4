"""Edit gpu_classes.yaml in place, keeping its comments, key order and layout (ruamel.yaml round-trip).

Each edit is a pure function on the round-trip document; usecases.edit_inventory validates the edited text exactly
as a render would and refuses to write an invalid inventory. ruamel re-formats what it writes (indentation, flow
spacing, line endings); `edit_text` therefore applies only the lines the edit changed to the original text,
so every other line stays byte for byte as it was (CRLF files stay CRLF).
"""

from __future__ import annotations

import io
import re
import warnings
from collections.abc import Callable
from difflib import SequenceMatcher
from typing import Any

from ruamel.yaml import YAML, YAMLError
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.scalarstring import DoubleQuotedScalarString

from generator.errors import EditRefused

Edit = Callable[[CommentedMap], None]


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
              cohort: str | None = None, description: str | None = None, identity_groups: list[str] | None = None,
              users: list[str] | None = None) -> Edit:
    def edit(document: CommentedMap) -> None:
        groups = _section(document, "groups")
        if name in groups:
            raise EditRefused(f"group '{name}' already exists")
        identities = {"groups": identity_groups or None, "users": users or None}
        groups[name] = _mapping({
            "description": description, "namespaces": namespaces, "cohort": cohort,
            "identities": identities if identity_groups or users else None,
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


def _yaml(mapping: int, sequence: int, offset: int) -> YAML:
    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    yaml.width = 4096  # never re-wrap a person's long lines
    yaml.indent(mapping=mapping, sequence=sequence, offset=offset)
    return yaml


_KEY_LINE = re.compile(r"^( *)[^\s#-][^#]*:\s*(#.*)?$")
_CHILD_LINE = re.compile(r"^( *)(- )?\S")


def _guess_indent(text: str) -> tuple[int, int, int]:
    """(mapping indent, sequence indent, dash offset) as the file's block collections use them most often.
    ruamel's own guess takes one sequence's indentation for the mappings' too (`- x` at 4 under a key at 0
    made every mapping 4-indented), which rewrote every line of the file."""
    mapping: dict[int, int] = {}
    offsets: dict[int, int] = {}
    lines = text.split("\n")
    for index, line in enumerate(lines[:-1]):
        parent = _KEY_LINE.match(line)
        if not parent:
            continue
        for child in lines[index + 1:]:
            if not child.strip() or child.lstrip().startswith("#"):
                continue
            found = _CHILD_LINE.match(child)
            step = len(found.group(1)) - len(parent.group(1))
            if step >= 0 and found.group(2):
                offsets[step] = offsets.get(step, 0) + 1
            elif step > 0:
                mapping[step] = mapping.get(step, 0) + 1
            break
    indent = max(mapping, key=lambda k: (mapping[k], -k)) if mapping else 2
    offset = max(offsets, key=lambda k: (offsets[k], -k)) if offsets else 0
    return indent, offset + 2 if offset else indent, offset


def _round_trip(text: str, edit: Edit | None) -> str:
    yaml = _yaml(*_guess_indent(text))
    try:
        document = yaml.load(text)  # with preserve_quotes, so "yes" stays quoted
    except YAMLError as exc:
        # The file passed gpugen's reader; a construct the two readers take differently is refused, never guessed.
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise EditRefused(f"the round-trip editor reads the inventory differently{where} "
                          f"({getattr(exc, 'problem', None) or exc}): edit the file by hand") from None
    if not isinstance(document, CommentedMap):
        raise EditRefused("the inventory is not a mapping")
    if edit is not None:
        edit(document)
    out = io.StringIO()
    yaml.dump(document, out)
    return out.getvalue()


def _reapply(original: list[str], before: list[str], after: list[str]) -> list[str]:
    """The edit as ruamel made it (`before` -> `after`, both ruamel's own rendering) applied to the original
    lines: every line outside the edited regions is copied from the original byte for byte, even where
    ruamel would have re-formatted it. A region grows until it starts and ends at lines ruamel kept exactly."""
    kept: dict[int, int] = {}  # before index -> original index of the same line (or of the line ruamel re-spaced)
    for tag, i1, i2, j1, j2 in SequenceMatcher(None, before, original, autojunk=False).get_opcodes():
        # A replaced run as long as the original's is ruamel re-spacing those lines one for one.
        if tag == "equal" or (tag == "replace" and i2 - i1 == j2 - j1):
            kept.update((i1 + k, j1 + k) for k in range(i2 - i1))
    hunks = [(i1, i2, k1, k2) for tag, i1, i2, k1, k2 in
             SequenceMatcher(None, before, after, autojunk=False).get_opcodes() if tag != "equal"]
    if not hunks:
        return original
    opcodes = SequenceMatcher(None, before, after, autojunk=False).get_opcodes()

    def in_after(boundary: int, last: bool) -> int:
        """Where a boundary between `before` lines falls in `after` (not inside a hunk, by construction)."""
        found = [k1 + (boundary - i1) if tag == "equal" else (k2 if last else k1)
                 for tag, i1, i2, k1, k2 in opcodes
                 if i1 <= boundary <= i2 and (tag == "equal" or boundary in (i1, i2))]
        return max(found) if last else min(found)

    regions: list[list[int]] = []
    for i1, i2, _, _ in hunks:
        start, end = i1, i2
        while True:
            widened = (start, end)
            while start > 0 and (start - 1) not in kept:
                start -= 1
            while end < len(before) and end not in kept:
                end += 1
            for h1, h2, _, _ in hunks:  # never cut through another hunk
                if h1 < start < h2:
                    start = h1
                if h1 < end < h2:
                    end = h2
            if (start, end) == widened:
                break
        if regions and start <= regions[-1][1]:
            regions[-1][1] = max(regions[-1][1], end)
        else:
            regions.append([start, end])
    result: list[str] = []
    copied = 0  # original lines copied so far
    for start, end in regions:
        from_line = kept[start - 1] + 1 if start > 0 else 0
        to_line = kept[end] if end < len(before) else len(original)
        result += original[copied:from_line]
        result += after[in_after(start, False):in_after(end, True)]
        copied = to_line
    return result + original[copied:]


def edit_text(text: str, edit: Edit) -> str:
    """`text` with the edit applied; lines the edit does not touch stay as they were, line endings included."""
    newline = "\r\n" if text.count("\r\n") * 2 > text.count("\n") else "\n"
    original = text.splitlines(keepends=True)
    bare = [line.rstrip("\r\n") for line in original]
    plain = "\n".join(bare) + ("\n" if text.endswith("\n") else "")  # ruamel reads LF; CR is put back below
    before = _round_trip(plain, None).split("\n")
    after = _round_trip(plain, edit).split("\n")
    if before and before[-1] == "" and after and after[-1] == "":
        before, after = before[:-1], after[:-1]
    # Compared without line endings; lines copied from the original keep theirs, new lines get the file's
    # dominant one.
    merged = _reapply(bare, before, after)
    kept_positions = _kept_original_positions(bare, merged)
    out = [original[kept_positions[index]] if index in kept_positions else line + newline
           for index, line in enumerate(merged)]
    for index in range(len(out) - 1):  # the original's last line, without a line break, is no longer last
        if not out[index].endswith("\n"):
            out[index] += newline
    if out and not text.endswith(("\n", "\r")) and (len(merged) - 1) not in kept_positions:
        out[-1] = out[-1][:-len(newline)]
    return "".join(out)


def _kept_original_positions(bare: list[str], merged: list[str]) -> dict[int, int]:
    """merged index -> original index for the lines copied from the original."""
    positions: dict[int, int] = {}
    for tag, i1, i2, j1, _ in SequenceMatcher(None, merged, bare, autojunk=False).get_opcodes():
        if tag == "equal":
            positions.update((i1 + k, j1 + k) for k in range(i2 - i1))
    return positions


__all__ = ["EditRefused", "add_class", "add_group", "add_namespace", "edit_text", "set_allocation", "set_image"]
