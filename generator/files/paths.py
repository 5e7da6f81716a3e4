"""Which outputs may be written: resolved through symlinks, apart from each other and from the inputs."""

from __future__ import annotations

import os
from pathlib import Path

from generator.errors import OutputRefused


def resolve_output(path: Path) -> Path:
    """The path an output really is: symlinks followed (the link stays, its target is written)."""
    resolved = Path(os.path.realpath(path))
    if resolved.is_symlink():  # realpath gives up on a symlink loop
        raise OutputRefused(f"{path}: symbolic link loop")
    return resolved


def check_outputs_apart(directories: list[Path], files: list[Path], inputs: list[Path]) -> None:
    """Refuse outputs that coincide or nest (one would replace the other), and outputs that hold an input.
    Paths must be resolved."""
    outputs = [(d, True) for d in directories] + [(f, False) for f in files]
    for index, (first, first_is_tree) in enumerate(outputs):
        for second, second_is_tree in outputs[index + 1:]:
            if first == second:
                raise OutputRefused(f"{first}: given as two outputs; each output needs its own path")
            for outer, outer_is_tree, inner in ((first, first_is_tree, second), (second, second_is_tree, first)):
                if outer_is_tree and outer in inner.parents:
                    raise OutputRefused(f"{inner} is inside the output {outer}, which is replaced whole: "
                                        "give outputs that do not nest")
        for source in inputs:
            if source == first or (first_is_tree and first in source.parents):
                raise OutputRefused(f"{first}: would replace the input {source}: give an output elsewhere")
