"""The examples a platform engineer copies, examples/<name>/gpu_classes.yaml, each checked as FLAME's inventory is:
rendered by the CLI into a temporary directory as its README says, the render clean (the same bytes from another
process, a second render touching nothing, `render --check` finding nothing stale), kubeconform over the rendered
trees and bootstrap/, and the Kyverno policies of each tree either those the policy corpus judges
(tests/unit/test_policies.py: the same objects as one of its inventories renders) or, where the corpus has no cases
for them, every CEL expression parsed by cel-go. A new folder under examples/ is picked up by the glob.

Their rendered output is not committed: nothing syncs it, and the render here is the check."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from generator.inventory import load_inventory
from generator.tree import render_trees
from simulation.go_tools import go_program, tool_bin
from simulation.pins import TOOLS
from simulation.prerequisites import unavailable
from simulation.waiting import ceiling
from tests.support import EXAMPLES, REPO, read_files, snapshot
from tests.support.policy_corpus import CELPARSE_SOURCE, INVENTORIES, cel_go_version, expressions

EXAMPLE_FILES = sorted(EXAMPLES.glob("*/gpu_classes.yaml"))
OUTPUTS = ("--out", "--bootstrap-out", "--docs-out")


@dataclasses.dataclass
class Rendered:
    inventory: Path  # relative to the repository, as the README names it
    out: Path

    @property
    def outputs(self) -> list[str]:
        return ["--out", str(self.out / "rendered"), "--bootstrap-out", str(self.out / "bootstrap"),
                "--docs-out", str(self.out / "runtimes.md")]


def render(inventory: Path, out: Path, *extra: str, seed: str = "0") -> subprocess.CompletedProcess:
    """`gpugen render` of `inventory` into `out`, from the repository as the README says; PYTHONHASHSEED varies the
    order of sets and dicts of strings between processes, the usual source of a render that is not deterministic."""
    rendered = Rendered(inventory, out)
    return subprocess.run([sys.executable, "-m", "generator", "render", "--inventory", str(inventory),
                           *rendered.outputs, *extra], cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, "PYTHONHASHSEED": seed}, timeout=ceiling(30))


@pytest.fixture(scope="module", params=EXAMPLE_FILES, ids=[p.parent.name for p in EXAMPLE_FILES])
def example(request, tmp_path_factory) -> Rendered:
    inventory = request.param.relative_to(REPO)
    out = tmp_path_factory.mktemp(request.param.parent.name)
    done = render(inventory, out)
    assert done.returncode == 0, done.stdout + done.stderr
    return Rendered(inventory, out)


def test_every_example_has_a_readme_with_its_render_command():
    """Each README names its own inventory and all three outputs: without them the render would write the
    repository's own rendered/, bootstrap/ and docs/runtimes.md."""
    assert EXAMPLE_FILES
    for path in EXAMPLE_FILES:
        readme = path.parent / "README.md"
        assert readme.is_file(), f"{path.parent.relative_to(REPO)} has no README.md"
        text = readme.read_text(encoding="utf-8")
        assert f"render --inventory {path.relative_to(REPO).as_posix()}" in text, readme
        assert all(option in text for option in OUTPUTS), readme


def test_the_render_is_deterministic_and_a_second_one_touches_nothing(example, tmp_path):
    again = render(example.inventory, tmp_path, seed="1")
    assert again.returncode == 0, again.stdout + again.stderr
    assert read_files(tmp_path) == read_files(example.out)
    before = snapshot(example.out)
    noop = render(example.inventory, example.out, seed="2")
    assert noop.returncode == 0, noop.stdout + noop.stderr
    assert all(": up to date (" in line for line in noop.stdout.splitlines() if line), noop.stdout
    assert snapshot(example.out) == before
    check = render(example.inventory, example.out, "--check")
    assert check.returncode == 0, check.stdout + check.stderr


def test_kubeconform_passes_the_rendered_trees_and_bootstrap(example):
    """tools/kubeconform.sh fails on an invalid object, an object without a schema and a skipped one that is not a
    Kustomization, as for FLAME (tests/apiserver/test_kubeconform.py)."""
    if not os.access(tool_bin("kubeconform"), os.X_OK):
        unavailable("kubeconform is not built: run `make tools` (tools/build.sh kubeconform)")
    targets = [str(example.out / "rendered"), str(example.out / "bootstrap")]
    done = subprocess.run([str(TOOLS / "kubeconform.sh"), *targets], capture_output=True, text=True,
                          env={**os.environ, "PYTHON": sys.executable}, timeout=ceiling(60))
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr
    assert "Invalid: 0, Errors: 0" in done.stdout, done.stdout[-5000:]


def policy_trees(root: Path) -> dict[str, dict[str, dict]]:
    """The Kyverno policies of each tree under `root` (rendered/, or rendered/<cluster>/ for several clusters), by
    tree and path in it."""
    trees: dict[str, dict[str, dict]] = {}
    for path in sorted(root.rglob("kyverno/*/*.yaml")):
        tree = path.parent.parent.parent
        trees.setdefault(tree.relative_to(root).as_posix() or ".", {})[
            path.relative_to(tree).as_posix()] = yaml.safe_load(path.read_text())
    return trees


@pytest.fixture(scope="module")
def corpus_policies() -> dict[str, dict[str, dict]]:
    """The policies the corpus's cases are written for, as each of its inventories renders them (without the test
    registry the corpus adds: the image check reads it, the cases decide nothing else by it)."""
    out = {}
    for name, path in INVENTORIES.items():
        synced = render_trees(load_inventory(path), path.name).synced
        out[name] = {p: yaml.safe_load(c) for p, c in synced.items() if p.startswith("kyverno/")}
    return out


@pytest.mark.tools
def test_each_trees_policies_are_judged_by_the_corpus_or_parse_with_cel_go(example, corpus_policies, tmp_path_factory):
    trees = policy_trees(example.out / "rendered")
    assert trees, "no Kyverno policy rendered"
    judged = {tree: name for tree, policies in trees.items() for name, known in corpus_policies.items()
              if policies == known}
    others = {f"{tree}:{path}:{where}": text for tree, policies in trees.items() if tree not in judged
              for path, policy in policies.items() for where, text in expressions(policy).items()}
    if not others:
        return
    binary = go_program(CELPARSE_SOURCE, "gpugen.local/celparse", [f"github.com/google/cel-go@{cel_go_version()}"],
                        tmp_path_factory)
    done = subprocess.run([str(binary)], input=json.dumps([{"id": k, "expression": v} for k, v in others.items()]),
                          capture_output=True, text=True, timeout=ceiling(12))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [], done.stdout
