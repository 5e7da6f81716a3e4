"""Rendered YAML reads back with the same types under YAML 1.1, the dialect Kubernetes and Argo CD read.

The reader is ruamel.yaml in 1.1 mode: an implementation independent of the PyYAML emitter under test.
"""

from __future__ import annotations

import warnings

import pytest
from tests.support import REPO
from ruamel.yaml import YAML

from generator import emit
from generator.builders import bootstrap_objects, synced_objects
from generator.tree import object_path


def yaml11_load(text: str):
    yaml = YAML(typ="safe", pure=True)
    yaml.version = (1, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return yaml.load(text)


def same_types(a, b, path="") -> list[str]:
    if type(a) is not type(b):
        return [f"{path}: {a!r} ({type(a).__name__}) read back as {b!r} ({type(b).__name__})"]
    if isinstance(a, dict):
        if list(a) != list(b):
            return [f"{path}: keys {list(a)} != {list(b)}"]
        return [d for k in a for d in same_types(a[k], b[k], f"{path}.{k}")]
    if isinstance(a, list):
        if len(a) != len(b):
            return [f"{path}: length {len(a)} != {len(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in same_types(x, y, f"{path}[{i}]")]
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]


def test_every_rendered_file_reads_back_as_the_built_object(flame):
    built = {f"rendered/{object_path(o)}": o for o in synced_objects(flame)}
    built |= {f"bootstrap/{folder}/{object_path(o)}": o
              for folder, objs in bootstrap_objects(flame).items() for o in objs}
    on_disk = {p.relative_to(REPO).as_posix(): p for d in ("rendered", "bootstrap") for p in (REPO / d).rglob("*.yaml")
               if p.name != "kustomization.yaml"}
    assert set(on_disk) == set(built)
    problems = [d for name, path in sorted(on_disk.items())
                for d in same_types(built[name], yaml11_load(path.read_text()), name)]
    assert not problems, "\n".join(problems)


TRICKY = ["y", "Y", "n", "N", "yes", "No", "on", "OFF", "true", "~", "null", "", "1e3", "1E3", "0777", "0o17",
          "0x1F", "0b101", "1_000", "12:30", "190:20:30", "1.5", ".5", "+1", "-1", ".inf", "-.Inf", ".NaN",
          "2001-12-14", "2001-12-14t21:59:43.10-05:00", "<<", "=", "480Gi", "36", "nvidia.com/gpu", "torch-gh200",
          "yes please", "- item", "key: value", "#comment", "a\nb", " lead", "trail "]


@pytest.mark.parametrize("text", TRICKY)
def test_emitter_keeps_strings_strings_under_yaml_1_1(text):
    obj = {"value": text, "list": [text], text: "as key"} if text != "<<" else {"value": text, "list": [text]}
    assert same_types(obj, yaml11_load(emit.to_yaml(obj))) == []


def test_the_reader_is_really_yaml_1_1():
    """Guards the guard: unquoted, these ARE booleans and numbers to a YAML 1.1 reader."""
    assert yaml11_load("a: y\nb: 1e3\nc: on\nd: 0777\n") == {"a": True, "b": 1000.0, "c": True, "d": 511}
