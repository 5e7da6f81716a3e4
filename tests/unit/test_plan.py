"""`plan`: golden tests on the inventory changes reviewers see most, and the risk flags they must not miss.

Goldens live in tests/golden/plan/<scenario>.txt. Each starts with a comment block saying what the inventory
change is and what a reviewer should find in the plan below it (SHOWS); the risk lines are also asserted
one by one in the tests further down, written from the scenario, not from the output. After an intended output
change, regenerate with `UPDATE_GOLDEN=1 pytest tests/unit/test_plan.py`, then read each golden against its SHOWS
text before committing it.
"""

from __future__ import annotations

import os
import re
import subprocess

import pytest
from click.testing import CliRunner
from tests.support.inventories import edited, flame_data, to_text
from tests.support import INVENTORY, REPO

from generator.cli import main
from generator.inventory import edit, load_inventory_text
from generator.plan.output.markdown import GITHUB_COMMENT_LIMIT, plan_markdown
from generator.plan.output.text import plan_text
from generator.plan.plans import make_plan
from generator.tree import render_trees

GOLDEN = REPO / "tests" / "golden" / "plan"
FLAME = INVENTORY.read_text(encoding="utf-8")

H100 = {"arch": "amd64", "label_value": "NVIDIA-H100-80GB-HBM3", "image": "ghcr.io/urcf/pytorch:2.9.1-cuda12.9",
        "nodes": 2, "gpus": 8, "cpu": "192", "memory": "1900Gi"}


def with_h100(text: str) -> str:
    text = edit.edit_text(text, edit.add_class("h100", **H100))
    return edit.edit_text(text, edit.set_allocation("vision-lab", "h100", gpus=8, cpu="96", memory="950Gi"))


def synced(text: str):
    return render_trees(load_inventory_text(text, "gpu_classes.yaml"), "gpu_classes.yaml").synced


SCENARIOS = {
    "add-amd64-h100-class": (FLAME, with_h100(FLAME)),
    "raise-group-quota": (FLAME, edit.edit_text(FLAME, edit.set_allocation("vision-lab", "gh200", cpu="40"))),
    "lower-group-quota": (FLAME, edit.edit_text(FLAME, edit.set_allocation("vision-lab", "gh200", memory="200G"))),
    "remove-class-still-allocated": (
        with_h100(FLAME),
        # The reviewer's view of removing h100: the allocation had to go too (else the inventory is invalid).
        FLAME,
    ),
    "retarget-local-queue": (FLAME, FLAME.replace("namespaces: [vision-lab]",
                                                  "namespaces: [vision-lab, nlp-lab-teaching]")
                             .replace("[nlp-lab, nlp-lab-teaching]", "[nlp-lab]")),
    "change-runtime-image": (FLAME,
                             edit.edit_text(FLAME, edit.set_image("gh200", "ghcr.io/urcf/pytorch:2.10.0-cuda13.0"))),
    "rename-flavor": (FLAME,
                      FLAME.replace("    arch: arm64\n", "    arch: arm64\n    flavor: gh200-grace-hopper\n", 1)),
    "tighten-contract": (FLAME, FLAME.replace("      maximum: 7d\n", "      maximum: 2d\n")
                         .replace("    finishedJobTTL: 7d\n", "    finishedJobTTL: 2d\n")
                         .replace("  deadline:\n    value: 1000\n    description: Runs for a paper or grant deadline; "
                                  "ahead of every other job of the group\n", "")),
    "start-reclaiming": (FLAME.replace("    cohort: flame\n", "    cohort: flame\n    reclaimWithinCohort: Never\n"
                                       "    preemptWithinGroup: Never\n"), FLAME),
}

# What each golden shows: the inventory change, then what the reviewer must see (and must not see).
SHOWS = {
    "add-amd64-h100-class": """\
Change: add class h100 (amd64, 2 nodes x 8 GPUs) and give vision-lab 8 GPUs, 96 CPU, 950Gi on it.
Expect: runtime torch-h100 and flavor h100 added; vision-lab's ClusterQueue gains flavor h100 with the four
nominal quotas (pods 110 = 8 GPUs x 110 pods / 8 GPUs per node); the policies that list the runtimes
now name torch-h100 too, and the image-arch policy maps it to amd64. The monitoring follows: vision-lab's
PrometheusRule and dashboard gain h100, the platform's rules and dashboard the class. No risk: nothing is taken
away.""",
    "raise-group-quota": """\
Change: vision-lab's gh200 CPU quota 36 -> 40.
Expect: one field changed, and the allocation shown on vision-lab's dashboard; no risk (a raise never blocks
admitted or waiting jobs).""",
    "lower-group-quota": """\
Change: vision-lab's gh200 memory quota 240G -> 200G.
Expect: one field changed, and the allocation shown on vision-lab's dashboard; one quota-reduction risk naming
memory, flavor gh200 and both amounts.""",
    "remove-class-still-allocated": """\
Change: the reverse of add-amd64-h100-class (class h100 and vision-lab's allocation on it removed).
Expect: torch-h100 and flavor h100 removed; four quota-reduction risks (one per resource on h100); the
runtime's risk names vision-lab as the group that held h100; the flavor's risk says vision-lab used it. The
monitoring loses h100 (vision-lab's PrometheusRule and dashboard, the platform's).""",
    "retarget-local-queue": """\
Change: namespace nlp-lab-teaching moves from group nlp-lab to group vision-lab.
Expect: both ClusterQueues' namespace lists change; the LocalQueue's spec.clusterQueue changes, which the API
server refuses in place: a delete-and-recreate risk. The namespace's group label and its researcher RoleBinding
follow: oidc:nlp-lab loses access, oidc:vision-lab gains it; both groups' dashboards list their new LocalQueues.""",
    "change-runtime-image": """\
Change: gh200's image 2.9.1-cuda12.9 -> 2.10.0-cuda13.0.
Expect: exactly one field changed (the runtime container's image), no risk.""",
    "tighten-contract": """\
Change: gh200's walltime maximum 7d -> 2d, priority class deadline removed (nobody may use it), finished jobs kept
2d instead of 7d.
Expect: the WorkloadPriorityClass deadline removed, with a risk (jobs naming it refused; queued ones keep their
priority); every job-limits ConfigMap's gh200 and class-less maximum 604800 -> 172800, each with a walltime risk
(running jobs keep their limit); vision-lab's ConfigMaps lose deadline from their priorities, with a risk; the
DeletingPolicy finished-trainjobs' TTL 604800s -> 172800s with a risk (finished TrainJobs deleted sooner), and
job-defaults' ttlSecondsAfterFinished for new Jobs changed without one.""",
    "start-reclaiming": """\
Change: both groups from reclaimWithinCohort: Never and preemptWithinGroup: Never to the defaults (Any,
LowerPriority).
Expect: two fields changed per ClusterQueue, each flagged "preempts running work", naming whose jobs may now
be stopped.""",
    "rename-flavor": """\
Change: class gh200's flavor renamed gh200 -> gh200-grace-hopper (same nodes, same quotas).
Expect: the flavor gh200 removed and gh200-grace-hopper added; both ClusterQueues move their quotas to the new
name. Quotas are compared per class, so there is NO quota-reduction risk; the one risk is the old flavor's
removal (its admitted workloads keep running), naming the flavor that replaces it. The rules and dashboards
select the new flavor name.""",
}


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_plan_matches_golden(scenario):
    base, new = SCENARIOS[scenario]
    plan = make_plan(synced(base), synced(new))
    text = "".join(f"# {line}".rstrip() + "\n" for line in SHOWS[scenario].splitlines()) + "\n" + plan_text(plan)
    golden = GOLDEN / f"{scenario}.txt"
    if os.environ.get("UPDATE_GOLDEN"):
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text, encoding="utf-8")
    assert text == golden.read_text(encoding="utf-8")


def risks(scenario):
    base, new = SCENARIOS[scenario]
    return [f"{r.key[0]} {r.key[2]}: {r.what}" for r in make_plan(synced(base), synced(new)).risks]


def test_retargeted_local_queue_is_flagged_delete_and_recreate():
    assert any(r.startswith("LocalQueue default: delete and recreate: spec.clusterQueue is immutable")
               for r in risks("retarget-local-queue"))


def test_lowered_quota_is_flagged_and_raised_quota_is_not():
    assert risks("lower-group-quota") == [
        "ClusterQueue vision-lab: quota reduction: memory on flavor gh200 240G -> 200G; "
        "admitted workloads keep running, new ones may wait"]
    assert risks("raise-group-quota") == []


def test_removed_class_names_the_groups_that_held_it():
    flagged = risks("remove-class-still-allocated")
    assert any("class h100 removed while groups held allocations on it: vision-lab" in r for r in flagged)
    assert any(r.startswith("ResourceFlavor h100: flavor removed that ClusterQueues used: vision-lab") for r in flagged)
    assert any("quota reduction: nvidia.com/gpu on flavor h100 removed" in r for r in flagged)


def test_renamed_flavor_moves_quotas_without_reporting_reductions():
    assert risks("rename-flavor") == [
        "ResourceFlavor gh200: flavor removed that ClusterQueues used: nlp-lab, vision-lab; workloads admitted on it "
        "keep running until they finish; class gh200 now uses flavor gh200-grace-hopper"]


def test_a_lowered_quota_under_a_renamed_flavor_is_still_a_reduction():
    base, _ = SCENARIOS["rename-flavor"]
    renamed = SCENARIOS["rename-flavor"][1]
    lowered = edit.edit_text(renamed, edit.set_allocation("vision-lab", "gh200", memory="200G"))
    flagged = [f"{r.key[0]} {r.key[2]}: {r.what}" for r in make_plan(synced(base), synced(lowered)).risks]
    assert ("ClusterQueue vision-lab: quota reduction: memory on flavor gh200 (now flavor gh200-grace-hopper) "
            "240G -> 200G; admitted workloads keep running, new ones may wait") in flagged


def test_image_change_is_a_change_not_a_risk():
    base, new = SCENARIOS["change-runtime-image"]
    plan = make_plan(synced(base), synced(new))
    assert plan.risks == []
    (change,) = [c for c in plan.changes if c.key[0] == "ClusterTrainingRuntime"]
    assert [f.path for f in change.fields] == [
        "spec.template.spec.replicatedJobs[node].template.spec.template.spec.containers[node].image"]


def test_identical_renders_plan_nothing():
    assert plan_text(make_plan(synced(FLAME), synced(FLAME))).startswith("No changes")


def test_markdown_for_a_64_class_change_stays_under_the_comment_limit():
    classes = "".join(
        f"  gpu{i:02d}:\n    arch: {'amd64' if i % 2 else 'arm64'}\n"
        f"    nodeSelector: {{nvidia.com/gpu.product: GPU-MODEL-{i:02d}}}\n"
        f"    image: registry.example.org/ml/pytorch:2.9.{i}\n    nodes: 4\n"
        f"    perNode: {{gpus: 8, cpu: 128, memory: 1Ti}}\n" for i in range(64))
    allocation = "      gpu{:02d}: {{gpus: 16, cpu: 256, memory: 2Ti}}\n".format
    # Half the classes to each group: one ClusterQueue holds at most 64 flavors.
    text = FLAME.replace("\ngroups:\n", "\n" + classes + "\ngroups:\n").replace(
        "    allocations:\n      gh200:\n        gpus: 1\n        cpu: 36\n        memory: 240G\n  nlp-lab:",
        "    allocations:\n      gh200:\n        gpus: 1\n        cpu: 36\n        memory: 240G\n"
        + "".join(allocation(i) for i in range(0, 64, 2)) + "  nlp-lab:")
    assert text.endswith("        memory: 240G\n")  # nlp-lab's allocations end the file
    text += "".join(allocation(i) for i in range(1, 64, 2))
    plan = make_plan(synced(FLAME), synced(text))
    markdown = plan_markdown(plan)
    assert len(markdown) < GITHUB_COMMENT_LIMIT
    assert sum(c.action == "added" for c in plan.changes) == 128  # a runtime and a flavor per class
    full = plan_markdown(plan, limit=10**9)
    if len(full) >= GITHUB_COMMENT_LIMIT:
        assert "Truncated to fit a GitHub comment" in markdown
    assert markdown.count("<details>") == markdown.count("</details>")


def test_cli_plan_against_a_git_base(tmp_path):
    """The CLI reads the base tree from git: commit FLAME's render, then plan a changed inventory."""
    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    inventory = tmp_path / "gpu_classes.yaml"
    inventory.write_text(FLAME)
    args = ["--inventory", str(inventory), "--out", str(tmp_path / "rendered")]
    assert CliRunner().invoke(main, ["render", *args, "--bootstrap-out", str(tmp_path / "bootstrap"),
                                     "--docs-out", str(tmp_path / "docs.md")]).exit_code == 0
    git("init", "-q")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-qm", "base")
    inventory.write_text(SCENARIOS["lower-group-quota"][1])
    result = CliRunner().invoke(main, ["plan", *args, "--base", "HEAD", "--format", "markdown"])
    assert result.exit_code == 0, result.output
    assert "quota reduction: memory on flavor gh200 240G -> 200G" in result.output
    missing = CliRunner().invoke(main, ["plan", *args, "--base", "no-such-ref"])
    assert missing.exit_code == 2
    assert "cannot read" in missing.stderr


def test_cli_plan_with_out_under_a_missing_directory(tmp_path, monkeypatch):
    """--out under a directory that does not exist: inside a repository the base simply had no such tree
    (everything is added); outside one git says so; and a missing git is reported only when git is missing."""
    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    inventory = tmp_path / "gpu_classes.yaml"
    inventory.write_text(FLAME)
    git("init", "-q")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-qm", "base")
    inside = CliRunner().invoke(main, ["plan", "--inventory", str(inventory),
                                       "--out", str(tmp_path / "a" / "b" / "rendered")])
    assert inside.exit_code == 0, inside.output
    assert re.match(r"Plan: [1-9]\d* added, 0 changed, 0 removed", inside.output), inside.output
    outside = tmp_path.parent / f"{tmp_path.name}-not-a-repository"
    outside.mkdir()
    result = CliRunner().invoke(main, ["plan", "--inventory", str(inventory), "--out", str(outside / "a" / "rendered")])
    assert result.exit_code == 2 and "not a git repository" in result.stderr, result.output
    assert "git is not installed" not in result.stderr
    monkeypatch.setenv("PATH", str(tmp_path / "no-git-here"))
    result = CliRunner().invoke(main, ["plan", "--inventory", str(inventory), "--out", str(tmp_path / "rendered")])
    assert result.exit_code == 2 and "git is not installed" in result.stderr, result.output


@pytest.mark.parametrize("limit", [1500, 3000, 600])
def test_markdown_truncation_keeps_risks_first_and_stays_valid(limit):
    base, new = SCENARIOS["remove-class-still-allocated"]
    plan = make_plan(synced(base), synced(new))
    full = plan_markdown(plan, limit=10**9)
    cut = plan_markdown(plan, limit=limit)
    assert len(full) > limit >= len(cut)
    assert "Truncated to fit a GitHub comment" in cut
    assert cut.count("<details>") == cut.count("</details>")
    counts = next(line for line in full.splitlines() if line.startswith("**"))  # e.g. **0 added, ... 6 risk(s)**
    assert counts in cut
    if limit >= 1500:
        assert all(f"`{_name}`" in cut for _name in ("vision-lab", "torch-h100", "h100")), "every risk is kept"
    else:
        assert "more risk(s)" in cut


def test_removing_a_group_names_the_cluster_queue_that_waits_on_running_workloads():
    """Kueue keeps a deleted ClusterQueue Terminating while workloads reserve quota in it (shown against the real
    Kueue in tests/e2e): the reviewer must see that before merging."""
    data = edited(flame_data(), lambda d: d["groups"].pop("nlp-lab"))
    plan = make_plan(synced(FLAME), synced(to_text(data)))
    waits = [r for r in plan.risks if "waits on running workloads" in r.what]
    assert [(r.key[0], r.key[2]) for r in waits] == [("ClusterQueue", "nlp-lab")]
