"""The recipes of CONTRIBUTING.md, carried out as written: each block under a `<!-- recipe NAME: FILE, WHERE -->`
marker is put into a copy of the tree where the marker says, then the copy renders an inventory that uses the new
piece and runs the unit tier's checks for it. A recipe whose blocks no longer fit the code, or that leaves a step
out, fails here.

WHERE is one of `before "TEXT"`, `after "TEXT"` (after the line starting with TEXT), `replace "TEXT"` and
`create ""` (a new file)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from simulation.waiting import ceiling
from tests.support import REPO
from tests.support.policy_corpus import kyverno_engine

CONTRIBUTING = REPO / "CONTRIBUTING.md"
_MARKER = re.compile(r"<!-- recipe (?P<recipe>[\w-]+): (?P<file>\S+), "
                     r'(?P<how>before|after|replace|create) "(?P<text>[^"]*)" -->'
                     r"\s*```\w*\n(?P<block>.*?)\n\s*```", re.DOTALL)


def steps(recipe: str) -> list[dict[str, str]]:
    found = [m.groupdict() for m in _MARKER.finditer(CONTRIBUTING.read_text(encoding="utf-8"))
             if m["recipe"] == recipe]
    assert found, f"CONTRIBUTING.md has no step of the recipe {recipe!r}"
    for step in found:
        # The blocks sit in a list item: their indent is Markdown's, not the file's.
        lines = step["block"].splitlines()
        indent = min(len(line) - len(line.lstrip(" ")) for line in lines if line.strip())
        step["block"] = "\n".join(line[indent:] for line in lines)
    return found


def carry_out(tree: Path, step: dict[str, str]) -> None:
    path = tree / step["file"]
    if step["how"] == "create":
        assert not path.exists(), f"{step['file']} exists already"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(step["block"] + "\n", encoding="utf-8")
        return
    text = path.read_text(encoding="utf-8")
    anchor, block = step["text"], step["block"]
    assert text.count(anchor) == 1, f"{step['file']}: {anchor!r} is not there once"
    if step["how"] == "replace":
        text = text.replace(anchor, block)
    elif step["how"] == "before":
        text = text.replace(anchor, block + "\n" + anchor)
    else:
        start = text.index(anchor)
        end = text.index("\n", start) + 1
        text = text[:end] + block + "\n" + text[end:]
    path.write_text(text, encoding="utf-8")


def tree_copy(tmp_path: Path) -> Path:
    """The checkout's tracked files, as a new clone would have them."""
    tree = tmp_path / "tree"
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    for name in listed.decode().split("\0"):
        if name and (REPO / name).is_file():
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, tree / name)
    return tree


def recipe_tree(root: Path, recipe: str, leaving_out: str | None = None) -> Path:
    """A copy of the tree (tree_copy) with the recipe carried out, but for its steps on the file `leaving_out`."""
    tree = tree_copy(root)
    for step in steps(recipe):
        if step["file"] != leaving_out:
            carry_out(tree, step)
    return tree


def run(tree: Path, *args: str) -> subprocess.CompletedProcess:
    # The copy's own packages come first on the path: `python -m` puts its working directory there.
    return subprocess.run([sys.executable, *args], cwd=tree, capture_output=True, text=True, timeout=ceiling(300))


VENDOR_CHECKS = ["tests/unit/test_accelerators.py", "-p", "no:cacheprovider", "-q"]


@pytest.fixture(scope="module")
def vendor_tree(tmp_path_factory) -> Path:
    return recipe_tree(tmp_path_factory.mktemp("recipe-vendor"), "vendor")


def test_the_vendor_recipe_touches_its_table_row_and_the_docs_row(tmp_path):
    tree = recipe_tree(tmp_path, "vendor")
    assert changed_files(tree) == ["docs/policies.md", "generator/inventory/accelerators.py"]


def test_the_vendor_recipe_leaves_no_step_out(tmp_path):
    """Every step is needed: the facts without the docs' row fail the unit checks, naming the channels."""
    tree = recipe_tree(tmp_path, "vendor", leaving_out="docs/policies.md")
    checked = run(tree, "-m", "pytest", *VENDOR_CHECKS, "-k", "guardrails_page")
    assert checked.returncode == 1, checked.stdout[-3000:]
    assert "docs/policies.md does not name ['SCRATCH_VISIBLE_DEVICES', 'SCRATCH_DEVICE_'" in checked.stdout, \
        checked.stdout[-3000:]


def test_a_vendor_added_by_the_recipe_is_guarded_and_checked(vendor_tree):
    tree = vendor_tree
    inventory = tree / "scratch.yaml"
    inventory.write_text((tree / "tests" / "policies" / "amd-gaudi.yaml").read_text(encoding="utf-8").replace(
        "      resource: habana.ai/gaudi\n      unit: Gaudi 3 card\n",
        "      resource: npu.example.org/npu-half\n      unit: half an NPU\n"), encoding="utf-8")
    rendered = run(tree, "-m", "generator", "render", "--inventory", str(inventory), "--out", "out/rendered",
                   "--bootstrap-out", "out/bootstrap", "--docs-out", "out/runtimes.md")
    assert rendered.returncode == 0, rendered.stderr
    # A vendor gpugen knows now: no unknownVendor, no warning about what it cannot check.
    assert "does not know" not in rendered.stderr, rendered.stderr
    policy = (tree / "out" / "rendered" / "kyverno" / "validatingpolicy" / "gpu-visibility.yaml").read_text()
    for channel in ("SCRATCH_VISIBLE_DEVICES", "SCRATCH_DEVICE_", "devices.npu.example.org"):
        assert channel in policy, channel
    assert "npu.example.org/npu-half" in (tree / "out" / "runtimes.md").read_text()
    # A name its plugin does not advertise is refused at its line, as for every vendor.
    typo = tree / "typo.yaml"
    typo.write_text(inventory.read_text().replace("npu.example.org/npu-half", "npu.example.org/npus"))
    refused = run(tree, "-m", "generator", "render", "--inventory", str(typo), "--check")
    assert refused.returncode == 2, refused.stderr
    assert "Scratch NPU's device plugin advertises no npu.example.org/npus" in refused.stderr, refused.stderr
    checked = run(tree, "-m", "pytest", *VENDOR_CHECKS)
    assert checked.returncode == 0, checked.stdout[-3000:]


def test_the_guardrail_recipe_leaves_no_step_out(tmp_path):
    """Without its docs row, the policy's unit checks fail, naming it."""
    tree = recipe_tree(tmp_path, "guardrail", leaving_out="docs/policies.md")
    checked = run(tree, "-m", "pytest", "tests/unit/test_policies.py", "-p", "no:cacheprovider", "-q",
                  "-k", "guardrails_page")
    assert checked.returncode == 1, checked.stdout[-3000:]
    assert "has no row for ['scratch-job-names']" in checked.stdout, checked.stdout[-3000:]


def test_a_guardrail_added_by_the_recipe_is_rendered_and_judges(tmp_path):
    tree = recipe_tree(tmp_path, "guardrail")
    # Its CEL, its builder and its line in policies(), its docs row.
    assert changed_files(tree) == ["docs/policies.md", "generator/builders/kyverno.py",
                                   "generator/builders/kyverno_cel/scratch-job-names.yaml"]
    rendered = run(tree, "-m", "generator", "render")
    assert rendered.returncode == 0, rendered.stderr
    policy = tree / "rendered" / "kyverno" / "validatingpolicy" / "scratch-job-names.yaml"
    assert policy.is_file(), rendered.stdout
    # The unit tier's checks of every policy: its CEL parses with cel-go, its template takes exactly its
    # parameters, it enforces (Deny, Fail, one shared selector) and the docs list it.
    checked = run(tree, "-m", "pytest", "tests/unit/test_policies.py", "-p", "no:cacheprovider", "-q", "-k",
                  "every_cel_expression_parses or templates_need or every_policy_enforces or guardrails_page "
                  "or policies_follow_the_inventory or render_is_deterministic")
    assert checked.returncode == 0, checked.stdout[-3000:]
    # Kyverno's engine, the admission controller's packages, judges a Job with it.
    engine = kyverno_engine(_Factory(tmp_path))
    jobs = [{"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": "vision-lab"},
             "spec": {"template": {"spec": {"restartPolicy": "Never",
                                            "containers": [{"name": "main", "image": "busybox:1.37"}]}}}}
            for name in ("tmp-sweep", "sweep")]
    requests = [{"id": job["metadata"]["name"], "operation": "CREATE", "subResource": "", "username": "alice",
                 "object": job, "oldObject": None, "namespaces": ["vision-lab"], "resources": []} for job in jobs]
    done = subprocess.run([str(engine), str(policy)], input=json.dumps(requests), capture_output=True, text=True,
                          timeout=ceiling(30))
    assert done.returncode == 0, done.stderr
    verdicts = {(r["id"], r["status"]): r["message"] for r in json.loads(done.stdout)}
    assert verdicts.get(("tmp-sweep", "fail")) == (
        "rename Job tmp-sweep: names starting with tmp- are the platform's"), verdicts
    assert ("sweep", "pass") in verdicts, verdicts


# The unit tier's checks that read the components: their folders, the app-of-apps and its projects (through Argo CD's
# own code), the names they render, several clusters, the alerts on their metrics, the layers, the schema and docs.
COMPONENT_CHECKS = ["tests/unit/test_components.py", "tests/unit/test_bootstrap.py",
                    "tests/unit/test_argocd_projects.py", "tests/unit/test_rendered_names.py",
                    "tests/unit/test_several_clusters.py",
                    "tests/unit/test_prometheus_rules.py", "tests/unit/test_import_layers.py",
                    "tests/unit/test_schema_and_docs.py", "-p", "no:cacheprovider", "-q"]
# What the commands of the recipe's last step write: generated, never edited by hand.
GENERATED = ("rendered/", "bootstrap/", "docs/runtimes.md", "schema/")


def changed_files(tree: Path) -> list[str]:
    """The files of `tree` that differ from the checkout's, or are new (outside the generated outputs)."""
    changed = []
    for path in sorted(p for p in tree.rglob("*") if p.is_file()):
        name = path.relative_to(tree).as_posix()
        if name.startswith(GENERATED) or "__pycache__" in name or name.startswith(".pytest_cache"):
            continue
        original = REPO / name
        if not original.is_file() or original.read_bytes() != path.read_bytes():
            changed.append(name)
    return changed


@pytest.fixture(scope="module")
def component_tree(tmp_path_factory) -> Path:
    """The copy with the recipe's two scratch components, rendered and its schema exported as the recipe says."""
    tree = recipe_tree(tmp_path_factory.mktemp("recipe-component"), "component")
    for command in (("render",), ("schema", "--out", "schema/gpu_classes.schema.json")):
        done = run(tree, "-m", "generator", *command)
        assert done.returncode == 0, done.stderr
    return tree


def test_the_component_recipe_touches_its_folder_its_pins_and_the_registry(component_tree):
    assert changed_files(component_tree) == [
        "generator/components/__init__.py", "generator/components/deviceplugin/__init__.py",
        "generator/components/kwok/__init__.py", "generator/versions.env"]


def test_components_added_by_the_recipe_render_and_pass_the_unit_checks(component_tree):
    tree = component_tree
    objects = [yaml.safe_load(path.read_text()) for path in sorted((tree / "bootstrap" / "platform").rglob("*.yaml"))]
    apps = {o["metadata"]["labels"].get("gpugen/component"): o for o in objects if o["kind"] == "Application"}
    pinned = dict(line.split("=", 1) for line in (tree / "generator" / "versions.env").read_text().splitlines()
                  if "=" in line and not line.startswith("#"))
    assert apps["deviceplugin"]["spec"]["source"] == {
        "repoURL": "https://nvidia.github.io/k8s-device-plugin", "chart": "nvidia-device-plugin",
        "targetRevision": pinned["DEVICEPLUGIN_CHART_VERSION"],
        "helm": {"releaseName": "nvidia-device-plugin"}}  # no values: the chart's own
    assert apps["deviceplugin"]["spec"]["destination"]["namespace"] == "nvidia-device-plugin"
    assert apps["kwok"]["spec"]["source"]["chart"] == "kwok"
    projects = {o["metadata"]["name"] for o in objects if o["kind"] == "AppProject"}
    assert {"flame-deviceplugin", "flame-kwok"} <= projects, projects
    checked = run(tree, "-m", "pytest", *COMPONENT_CHECKS)
    assert checked.returncode == 0, checked.stdout[-4000:]
    assert " passed" in checked.stdout and "deviceplugin" not in checked.stdout, checked.stdout[-2000:]
    # The render is the committed one: what the recipe's step says to commit.
    assert run(tree, "-m", "generator", "render", "--check").returncode == 0


def test_the_component_recipe_leaves_no_step_out(tmp_path):
    """A folder not in the registry fails the component checks, naming it."""
    tree = recipe_tree(tmp_path, "component", leaving_out="generator/components/__init__.py")
    checked = run(tree, "-m", "pytest", "tests/unit/test_components.py", "-p", "no:cacheprovider", "-q",
                  "-k", "there_are_component_folders")
    assert checked.returncode == 1, checked.stdout[-3000:]
    assert "deviceplugin" in checked.stdout and "kwok" in checked.stdout, checked.stdout[-3000:]


def test_a_chart_no_module_ships_is_declared_and_render_says_what_it_goes_without(tmp_path):
    """The same chart taken from its Helm repository alone (no `module`): it renders, and `render` warns that the
    chart tier and the simulations cannot check it; the component checks still pass."""
    tree = recipe_tree(tmp_path, "component")
    folder = tree / "generator" / "components" / "deviceplugin" / "__init__.py"
    text = folder.read_text()
    assert text.count('module="github.com/NVIDIA/k8s-device-plugin", ') == 1
    folder.write_text(text.replace('module="github.com/NVIDIA/k8s-device-plugin", ', ""))
    rendered = run(tree, "-m", "generator", "render")
    assert rendered.returncode == 0, rendered.stderr
    assert "component deviceplugin: its chart comes only from https://nvidia.github.io/k8s-device-plugin" in \
        rendered.stderr, rendered.stderr
    assert "component deviceplugin: the simulated clusters do not run it" in rendered.stderr
    assert run(tree, "-m", "generator", "schema", "--out", "schema/gpu_classes.schema.json").returncode == 0
    # Its facts hold without a module (the module's checks are the other test's).
    checked = run(tree, "-m", "pytest", "tests/unit/test_components.py", "-p", "no:cacheprovider", "-q",
                  "-k", "facts or values or settings or folders")
    assert checked.returncode == 0, checked.stdout[-3000:]


class _Factory:
    """tmp_path_factory's one method the engine's build uses."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def mktemp(self, name: str) -> Path:
        path = self.root / name
        path.mkdir()
        return path
