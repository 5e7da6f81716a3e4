"""The generator's layers, lowest first, as ARCHITECTURE.md draws them: checked against the code's imports by
tests/unit/test_import_layers.py and against the docs by tests/unit/test_docs.py."""

from __future__ import annotations

# Lowest first. A unit is a package (generator.inventory) or a top-level module (generator.tree).
LAYERS = [
    ("facts", {"generator.errors", "generator.versions", "generator.components", "generator.kinds",
               "generator.layout", "generator.limits", "generator.emit", "generator.parallel",
               "generator.freetext", "generator.fields"}),
    ("inventory", {"generator.inventory"}),
    ("builders", {"generator.builders"}),
    ("trees and files", {"generator.tree", "generator.applications", "generator.userdocs", "generator.plan",
                         "generator.files", "generator.report"}),
    ("use cases", {"generator.usecases"}),
    ("command line", {"generator.cli", "generator.__main__"}),
]
