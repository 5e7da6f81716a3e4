"""One SHA-256 per inventory over everything `render` writes for it: the guard of a refactor.

A refactor must not change a byte of output. Run this before and after, and compare:

    .venv/bin/python tools/render_digests.py > /tmp/before.txt
    ... refactor ...
    .venv/bin/python tools/render_digests.py | diff /tmp/before.txt -

The inventories: FLAME, the test inventories on disk, FLAME with each optional setting switched (components
adopted, controllers named, a chart mirror, namespaces made elsewhere, a Kyverno image) so that every branch of
the builders is rendered, and synthetic ones up to national scale (benchmarks/synth.py).
"""

from __future__ import annotations

import copy
import hashlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]

from benchmarks import synth  # noqa: E402
from generator.inventory.load import load_inventory_text  # noqa: E402
from generator.tree import render_trees  # noqa: E402

Change = Callable[[dict], None]


def _set(path: str, value) -> Change:
    def change(data: dict) -> None:
        *parents, last = path.split(".")
        node = data
        for key in parents:
            node = node.setdefault(key, {})
        node[last] = value
    return change


VARIANTS: dict[str, Change] = {
    "adopted-components": _set("cluster.components", {
        name: {"install": False, "existing": True, "namespace": namespace} for name, namespace in
        (("kyverno", "kyverno"), ("jobset", "jobset-system"), ("trainer", "trainer-system"), ("kueue", "kueue"))}),
    "named-controllers": _set("cluster.controllers", {"kueue": "system:serviceaccount:kueue:kueue",
                                                      "trainer": "trainer-sa", "jobset": "jobset-sa"}),
    "chart-mirror": _set("cluster.chartMirror", {"url": "registry.example.org:5000/charts", "plainHTTP": True}),
    "namespaces-elsewhere": _set("cluster.createNamespaces", False),
    "kyverno-image": _set("cluster.components.kyverno.admissionControllerImage",
                          "registry.example.org/kyverno/kyverno:v1.19.1-arm64"),
    "kueue-timeout": _set("cluster.components.kueue.podsReadyTimeout", "1h30m"),
}


def inventories() -> Iterator[tuple[str, str]]:
    flame_text = (REPO / "gpu_classes.yaml").read_text(encoding="utf-8")
    yield "gpu_classes.yaml", flame_text
    for path in sorted(REPO.glob("tests/**/*.yaml")):
        text = path.read_text(encoding="utf-8")
        if text.startswith("classes:") or "\nclasses:" in text and "\ncluster:" in text:
            yield path.relative_to(REPO).as_posix(), text
    flame = yaml.safe_load(flame_text)
    for name, change in VARIANTS.items():
        data = copy.deepcopy(flame)
        change(data)
        yield f"flame+{name}", yaml.safe_dump(data, sort_keys=False)
    for classes, groups, namespaces in ((2, 3, 1), (8, 40, 3), (64, 2000, 3)):
        yield (f"synth {classes}x{groups}x{namespaces}",
               synth.to_yaml(synth.build(classes, groups, namespaces)))


def digest(text: str, source: str) -> str:
    trees = render_trees(load_inventory_text(text, source), "gpu_classes.yaml")
    sha = hashlib.sha256()
    for prefix, files in (("rendered", trees.synced), ("bootstrap", trees.bootstrap)):
        for path, content in files.items():
            sha.update(f"{prefix}/{path}\0".encode())
            sha.update(content)
            sha.update(b"\0")
    sha.update(b"docs\0" + trees.docs)
    return sha.hexdigest()


def main() -> int:
    for name, text in inventories():
        print(f"{digest(text, name)}  {name}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    sys.exit(main())
