"""One SHA-256 per inventory over everything `render` writes for it: the guard of a refactor.

A refactor must not change a byte of output. Run this before and after, and compare:

    .venv/bin/python -m tools.render_digests > /tmp/before.txt
    ... refactor ...
    .venv/bin/python -m tools.render_digests | diff /tmp/before.txt -

The inventories: FLAME, the test inventories on disk, FLAME with each optional setting switched (components
adopted, controllers named, a chart mirror, namespaces made elsewhere, a Kyverno image) so that every branch of
the builders is rendered, synthetic ones up to national scale (tests/support/synth.py), the examples
(examples/*/gpu_classes.yaml, several clusters among them) and several clusters at national scale.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Iterator
from pathlib import Path


from tests.support import synth
from tests.support.inventories import Change, edited, flame_data, setting, to_text
from generator.inventory.load import load_inventory_text
from generator.tree import render_trees

REPO = Path(__file__).resolve().parents[1]

VARIANTS: dict[str, Change] = {
    "adopted-components": setting("cluster.components", {
        name: {"install": False, "existing": True, "namespace": namespace} for name, namespace in
        (("kyverno", "kyverno"), ("jobset", "jobset-system"), ("trainer", "trainer-system"), ("kueue", "kueue"))}),
    "named-controllers": setting("cluster.controllers", {"kueue": "system:serviceaccount:kueue:kueue",
                                                      "trainer": "trainer-sa", "jobset": "jobset-sa"}),
    "chart-mirror": setting("cluster.chartMirror", {"url": "registry.example.org:5000/charts", "plainHTTP": True}),
    "namespaces-elsewhere": setting("cluster.createNamespaces", False),
    "kyverno-image": setting("cluster.components.kyverno.admissionControllerImage",
                          "registry.example.org/kyverno/kyverno:patched-arm64"),
    "kueue-timeout": setting("cluster.components.kueue.podsReadyTimeout", "1h30m"),
    "group-applications": setting("cluster.gitops.groupApplications", 3),
}


def inventories() -> Iterator[tuple[str, str]]:
    flame_text = (REPO / "gpu_classes.yaml").read_text(encoding="utf-8")
    yield "gpu_classes.yaml", flame_text
    for path in sorted(REPO.glob("tests/**/*.yaml")):
        text = path.read_text(encoding="utf-8")
        if text.startswith("classes:") or ("\nclasses:" in text and "\ncluster:" in text):
            yield path.relative_to(REPO).as_posix(), text
    for name, change in VARIANTS.items():
        yield f"flame+{name}", to_text(edited(flame_data(), change))
    for classes, groups, namespaces in ((2, 3, 1), (8, 40, 3), (64, 2000, 3)):
        yield (f"synth {classes}x{groups}x{namespaces}",
               synth.to_yaml(synth.build(classes, groups, namespaces)))
    # National scale split into the groups' Applications (docs/scale.md).
    national = synth.build(64, 2000, 3)
    national["cluster"]["gitops"]["groupApplications"] = 8
    yield "synth 64x2000x3 in 8 group Applications", synth.to_yaml(national)
    # The examples (several clusters among them: the simulated platform's), then national scale over 3 and 8 workers.
    for path in sorted(REPO.glob("examples/*/gpu_classes.yaml")):
        yield path.relative_to(REPO).as_posix(), path.read_text(encoding="utf-8")
    for classes, groups, namespaces, workers in ((8, 40, 3, 3), (64, 2000, 3, 8)):
        yield (f"synth {classes}x{groups}x{namespaces} over {workers} workers",
               synth.to_yaml(synth.spread(synth.build(classes, groups, namespaces), workers)))


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
    sys.exit(main())
