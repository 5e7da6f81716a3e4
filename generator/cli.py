"""Command line: wires loading, building and writing together; no logic of its own."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from generator.inventory import InventoryInvalid, load_inventory
from generator.tree import render_trees
from generator.write import NotOurDirectory, diff_tree, ensure_replaceable, write_tree

EXIT_STALE = 1
EXIT_INVALID = 2


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """gpugen: render a GPU cluster's Kubeflow Trainer runtimes, Kueue queues, Kyverno policies, RBAC
    and Argo CD Application from the inventory gpu_classes.yaml."""


@main.command()
@click.option("--inventory", "inventory_path", default="gpu_classes.yaml", show_default=True,
              type=click.Path(dir_okay=False, path_type=Path), help="Inventory to render.")
@click.option("--out", "out_dir", default="rendered", show_default=True,
              type=click.Path(file_okay=False, path_type=Path),
              help="Tree Argo CD syncs; gets its own kustomization.yaml. Replaced whole: stale files disappear.")
@click.option("--bootstrap-out", "bootstrap_dir", default="bootstrap", show_default=True,
              type=click.Path(file_okay=False, path_type=Path),
              help="Where the Argo CD Application goes (outside the synced tree).")
@click.option("--check", is_flag=True,
              help="Write nothing; exit 1 listing added, changed and removed files if the trees are stale.")
def render(inventory_path: Path, out_dir: Path, bootstrap_dir: Path, check: bool) -> None:
    """Render the inventory into OUT and BOOTSTRAP-OUT.

    Exit codes: 0 written or up to date; 1 stale (--check); 2 invalid inventory, nothing written.
    """
    try:
        inventory = load_inventory(inventory_path)
    except InventoryInvalid as invalid:
        for problem in invalid.problems:
            click.echo(str(problem), err=True)
        click.echo(f"{inventory_path}: {len(invalid.problems)} problem(s); nothing written.", err=True)
        sys.exit(EXIT_INVALID)
    trees = render_trees(inventory, inventory_path.name)
    targets = ((out_dir, trees.synced), (bootstrap_dir, trees.bootstrap))
    if check:
        stale = [line for directory, files in targets for line in diff_tree(files, directory).lines(directory)]
        for line in stale:
            click.echo(line)
        if stale:
            click.echo(f"Stale: run `make render` and commit the result ({len(stale)} file(s) differ).", err=True)
            sys.exit(EXIT_STALE)
        click.echo(f"Up to date: {out_dir}/ and {bootstrap_dir}/ match {inventory_path}.")
        return
    try:
        for directory, _ in targets:
            # Refuse before writing anything, so neither tree is replaced when one cannot be.
            ensure_replaceable(directory)
        for directory, files in targets:
            changes = write_tree(files, directory)
            summary = (f"{len(changes.added)} added, {len(changes.changed)} changed, {len(changes.removed)} removed"
                       if changes else "up to date")
            click.echo(f"{directory}/: {summary} ({len(files)} files)")
    except NotOurDirectory as refused:
        click.echo(f"error: {refused}", err=True)
        sys.exit(EXIT_INVALID)
