"""The objects hang together the way Kueue, Trainer and the seed page need them to.

Expectations come from the other side of each seam, never from the builders' own constants: the Kubeflow SDK's
and the pinned Trainer module's constants, the pinned Kueue CRDs' schema defaults, the pinned Argo CD's
repo-server default, the seed page, or values read off gpu_classes.yaml by hand (noted where used).
"""

from __future__ import annotations

import re
import subprocess
from functools import cache
from pathlib import Path

import pytest
import yaml
from tests.support import REPO, of_kind
from kubeflow.trainer.constants import constants as sdk
from simulation import go_tools
from simulation.prerequisites import unavailable

from generator.inventory.quantity import parse_quantity
from generator.layout import APPLICATION_TARGET_BYTES, directory_size_warning
from generator.versions import pin
from simulation.waiting import ceiling

POD_SPEC_PATH = ("spec", "template", "spec", "replicatedJobs", 0, "template", "spec", "template", "spec")
SYNC_WAVE = "argocd.argoproj.io/sync-wave"  # Argo CD's annotation (argo-cd docs: Sync Phases and Waves)


def module_dir(module: str, version: str) -> Path:
    try:
        return go_tools.module_dir(module, version)
    except go_tools.ModuleUnavailable as missing:
        unavailable(f"{module}@{version} is not in the Go module cache: {missing}")


@cache
def trainer_constants() -> dict[str, str]:
    """`Name string = "value"` constants of the pinned Trainer's pkg/constants (what its controller matches on)."""
    source = module_dir("github.com/kubeflow/trainer/v2", pin("TRAINER")) / "pkg" / "constants" / "constants.go"
    return dict(re.findall(r'^\s*(\w+)\s+string\s*=\s*"([^"]*)"', source.read_text(), flags=re.MULTILINE))


@cache
def crd_schema(file_name: str, version: str) -> dict:
    done = subprocess.run(["bash", str(REPO / "tools" / "crds.sh")], capture_output=True, text=True,
                          timeout=ceiling(60))
    if done.returncode != 0:
        unavailable(f"tools/crds.sh could not assemble the pinned CRDs: {done.stderr[-300:]}")
    crd = yaml.safe_load((Path(done.stdout.strip()) / file_name).read_text())
    (served,) = [v for v in crd["spec"]["versions"] if v["name"] == version]
    return served["schema"]["openAPIV3Schema"]


def dig(obj, path):
    for part in path:
        obj = obj[part]
    return obj


def node_job(runtime):
    (job,) = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    return job


def test_one_runtime_per_class_and_no_gpu_agnostic_runtime(flame, flame_objects):
    names = [rt["metadata"]["name"] for rt in of_kind(flame_objects, "ClusterTrainingRuntime")]
    assert names == [f"torch-{name}" for name in sorted(flame.classes)]
    assert "torch-distributed" not in names


def test_runtime_shape_the_sdk_and_the_trainer_controller_rely_on(flame, flame_objects):
    """Names from the pinned Trainer's pkg/constants and the Kubeflow SDK's constants, which must agree."""
    trainer = trainer_constants()
    node, ancestor_label, trainer_step = trainer["Node"], trainer["LabelTrainJobAncestor"], trainer["AncestorTrainer"]
    assert (node, ancestor_label) == (sdk.NODE, sdk.TRAINJOB_ANCESTOR_LABEL)
    for runtime in of_kind(flame_objects, "ClusterTrainingRuntime"):
        class_name = runtime["metadata"]["name"].removeprefix("torch-")
        labels = runtime["metadata"]["labels"]
        assert labels[sdk.RUNTIME_FRAMEWORK_LABEL] == "torch"  # the seed: the PyTorch runtime
        assert trainer["LabelSupport"] not in labels, "a support label would mark the runtime deprecated"
        assert runtime["spec"]["mlPolicy"]["numNodes"] == flame.classes[class_name].numNodes
        assert "torch" in runtime["spec"]["mlPolicy"]
        job = node_job(runtime)
        assert (job["name"], job["replicas"]) == (node, 1)
        assert job["template"]["metadata"]["labels"] == {ancestor_label: trainer_step}
        pod = dig(runtime, POD_SPEC_PATH)
        (container,) = pod["containers"]
        assert container["name"] == node
        assert "resources" not in container, "no GPU by default, and a device-less limits map breaks the SDK"
        assert container["image"] == flame.classes[class_name].image


def test_runtime_sets_cache_env_under_personal_and_memory_backed_shm(flame_objects):
    for runtime in of_kind(flame_objects, "ClusterTrainingRuntime"):
        pod = dig(runtime, POD_SPEC_PATH)
        env = {item["name"]: item["value"] for item in pod["containers"][0]["env"]}
        for name in ("HF_HOME", "TORCH_HOME", "PIP_CACHE_DIR", "XDG_CACHE_HOME", "TRITON_CACHE_DIR"):
            assert env[name].startswith("/personal/"), name
        mounts = {m["mountPath"]: m["name"] for m in pod["containers"][0]["volumeMounts"]}
        volumes = {v["name"]: v for v in pod["volumes"]}
        assert volumes[mounts["/dev/shm"]]["emptyDir"] == {"medium": "Memory"}


def test_runtime_node_selector_equals_its_flavor_node_labels(flame, flame_objects):
    flavors = {f["metadata"]["name"]: f for f in of_kind(flame_objects, "ResourceFlavor")}
    for runtime in of_kind(flame_objects, "ClusterTrainingRuntime"):
        class_name = runtime["metadata"]["name"].removeprefix("torch-")
        flavor = flavors[flame.classes[class_name].flavor or class_name]
        assert dig(runtime, POD_SPEC_PATH)["nodeSelector"] == flavor["spec"]["nodeLabels"]
        assert flame.cluster.gpuClassLabel in flavor["spec"]["nodeLabels"]


def test_every_cluster_queue_flavor_exists(flame_objects):
    flavors = {f["metadata"]["name"] for f in of_kind(flame_objects, "ResourceFlavor")}
    for queue in of_kind(flame_objects, "ClusterQueue"):
        for group in queue["spec"]["resourceGroups"]:
            for flavor in group["flavors"]:
                assert flavor["name"] in flavors, (queue["metadata"]["name"], flavor["name"])


def test_each_flavor_lists_resources_in_covered_resources_order(flame_objects):
    """Kueue's webhook: every flavor lists the group's coveredResources, in that order. The GPU resource is the
    one the seed page's TrainJob requests (nvidia.com/gpu); pods is covered so that GPU-less pod sets get a flavor."""
    for queue in of_kind(flame_objects, "ClusterQueue"):
        (group,) = queue["spec"]["resourceGroups"]
        assert sorted(group["coveredResources"]) == ["cpu", "memory", "nvidia.com/gpu", "pods"]
        for flavor in group["flavors"]:
            assert [r["name"] for r in flavor["resources"]] == group["coveredResources"]


def test_cluster_queue_quotas_are_flames_allocations(flame_objects):
    """Read off gpu_classes.yaml by hand: each group holds 1 GH200 GPU, 36 CPU, 240G on flavor gh200; pods is its
    GPU share of the class's pod slots, 1 GPU x 110 pods per node / 1 GPU per node = 110."""
    quotas = {(queue["metadata"]["name"], flavor["name"], resource["name"]): resource["nominalQuota"]
              for queue in of_kind(flame_objects, "ClusterQueue")
              for flavor in queue["spec"]["resourceGroups"][0]["flavors"]
              for resource in flavor["resources"]}
    expected = {"cpu": "36", "memory": "240G", "nvidia.com/gpu": "1", "pods": "110"}
    assert quotas == {(group, "gh200", resource): amount for group in ("nlp-lab", "vision-lab")
                      for resource, amount in expected.items()}


def test_cluster_queue_names_its_cohort_and_namespaces(flame, flame_objects):
    for queue in of_kind(flame_objects, "ClusterQueue"):
        spec = queue["spec"]
        group = flame.groups[queue["metadata"]["name"]]
        assert spec["cohortName"] == group.cohort
        (selector,) = spec["namespaceSelector"]["matchExpressions"]
        assert selector == {"key": "kubernetes.io/metadata.name", "operator": "In", "values": sorted(group.namespaces)}


def server_defaults(schema: dict, value, path: str = "") -> dict[str, object]:
    """{path: default} for every field the API server would default in `value` under the CRD `schema`: a
    property with a `default` whose parent object is present (structural defaulting, as kube-apiserver does)."""
    found: dict[str, object] = {}
    if isinstance(value, dict):
        for name, prop in schema.get("properties", {}).items():
            where = f"{path}.{name}" if path else name
            if "default" in prop:
                found[where] = prop["default"]
            if name in value:
                found.update(server_defaults(prop, value[name], where))
    elif isinstance(value, list) and "items" in schema:
        for index, item in enumerate(value):
            found.update(server_defaults(schema["items"], item, f"{path}[{index}]"))
    return found


def lookup(obj, path: str):
    for part in re.findall(r"[^.\[\]]+|\[\d+\]", path):
        if part.startswith("["):
            obj = obj[int(part[1:-1])]
        elif not isinstance(obj, dict) or part not in obj:
            return "<not set>"
        else:
            obj = obj[part]
    return obj


# Defaulted fields whose value comes from the inventory (a group's reclaim, preemption within the group, and
# fair-sharing weight): written, whatever their value.
INVENTORY_CHOSEN = {"spec.preemption.reclaimWithinCohort", "spec.preemption.withinClusterQueue",
                    "spec.fairSharing.weight"}


@pytest.mark.parametrize("kind, crd_file", [("ClusterQueue", "kueue.x-k8s.io_clusterqueues.yaml"),
                                            ("LocalQueue", "kueue.x-k8s.io_localqueues.yaml"),
                                            ("ResourceFlavor", "kueue.x-k8s.io_resourceflavors.yaml")])
def test_kueue_objects_spell_out_every_server_default_so_argo_cd_sees_no_drift(flame_objects, kind, crd_file):
    """Every field the pinned Kueue CRD defaults is written, with the CRD's default value unless the inventory
    chooses it (INVENTORY_CHOSEN): what the API server stores equals what Argo CD compares against."""
    schema = crd_schema(crd_file, "v1beta2")
    for obj in of_kind(flame_objects, kind):
        defaults = server_defaults(schema, obj)
        # An object default ({}) only makes the server create the object and default its fields (checked too).
        differing = {path: (lookup(obj, path), default) for path, default in defaults.items()
                     if not (lookup(obj, path) == default or (default == {} and isinstance(lookup(obj, path), dict))
                             or (path in INVENTORY_CHOSEN and lookup(obj, path) != "<not set>"))}
        assert not differing, f"{kind} {obj['metadata']['name']}: (rendered, CRD default) {differing}"


def test_every_group_namespace_has_a_default_local_queue_to_its_cluster_queue(flame, flame_objects):
    queues = {q["metadata"]["name"] for q in of_kind(flame_objects, "ClusterQueue")}
    local = {(lq["metadata"]["namespace"], lq["metadata"]["name"]): lq["spec"]["clusterQueue"]
             for lq in of_kind(flame_objects, "LocalQueue")}
    expected = {(ns, "default"): group for group, g in flame.groups.items() for ns in g.namespaces}
    assert local == expected
    assert set(local.values()) <= queues


def test_two_node_job_fits_the_cohort_when_the_other_group_is_idle(flame):
    """The seed's num_nodes=2 example: a group can reach both GH200s only by borrowing within its cohort."""
    for name, group in flame.groups.items():
        in_cohort = [g for g in flame.groups.values() if g.cohort and g.cohort == group.cohort]
        reachable = sum(g.allocations["gh200"].gpus for g in in_cohort if "gh200" in g.allocations)
        assert reachable >= 2, name


def test_rbac_lets_every_authenticated_user_read_runtimes(flame_objects):
    (role,) = [r for r in of_kind(flame_objects, "ClusterRole") if r["metadata"]["name"] == "training-runtime-reader"]
    (binding,) = [b for b in of_kind(flame_objects, "ClusterRoleBinding")
                  if b["roleRef"]["name"] == "training-runtime-reader"]
    (rule,) = role["rules"]
    assert rule == {"apiGroups": ["trainer.kubeflow.org"], "resources": ["clustertrainingruntimes"],
                    "verbs": ["get", "list", "watch"]}
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group",
                                    "name": "system:authenticated"}]


def test_sync_waves_order_flavors_then_queues_then_local_queues(flame_objects):
    wave = {}
    for obj in flame_objects:
        wave.setdefault(obj["kind"], set()).add(int(obj["metadata"]["annotations"][SYNC_WAVE]))
    assert all(len(waves) == 1 for waves in wave.values())
    assert max(wave["ResourceFlavor"]) < min(wave["ClusterQueue"]) < min(wave["LocalQueue"])
    assert max(wave["ClusterTrainingRuntime"]) <= min(wave["ResourceFlavor"])


def test_application_syncs_the_rendered_path_with_prune_self_heal_and_ssa(flame, gpugen_application):
    app = gpugen_application
    policy = app["spec"]["syncPolicy"]
    assert policy["automated"] == {"prune": True, "selfHeal": True}
    assert {"ServerSideApply=true", "SkipDryRunOnMissingResource=true"} <= set(policy["syncOptions"])
    assert app["spec"]["source"]["path"] == flame.cluster.gitops.path == "rendered"


def test_argo_cd_reads_the_tree_as_plain_manifests_without_the_kustomization(gpugen_application):
    """What Argo CD v3.6's directory source reads (reposerver/repository/repository.go: files matching
    ^.*\\.(yaml|yml|json|jsonnet)$ under the path, `exclude` matched against paths relative to it) is exactly the
    object files the kustomization lists: the same objects with or without kustomize."""
    app = gpugen_application
    directory = app["spec"]["source"]["directory"]
    assert directory["recurse"] is True  # objects sit in <api>/<kind>/ folders
    exclude = directory["exclude"]
    assert not set(exclude) & set("*?[]{}!\\"), "a literal pattern: it matches that relative path only"
    tree = REPO / app["spec"]["source"]["path"]
    manifest = re.compile(r"^.*\.(yaml|yml|json|jsonnet)$")
    read_by_argo = sorted(p.relative_to(tree).as_posix() for p in tree.rglob("*")
                          if p.is_file() and manifest.match(p.name) and p.relative_to(tree).as_posix() != exclude)
    kustomization = yaml.safe_load((tree / exclude).read_text())
    assert kustomization["kind"] == "Kustomization"
    assert read_by_argo == kustomization["resources"]
    for path in read_by_argo:
        (obj,) = list(yaml.safe_load_all((tree / path).read_text()))
        assert SYNC_WAVE in obj["metadata"]["annotations"], path


def test_render_warns_when_argo_cds_directory_size_limit_would_refuse_the_tree():
    """The limit is the pinned Argo CD repo server's flag default, read from its source (a Kubernetes quantity)."""
    source = (module_dir("github.com/argoproj/argo-cd/v3", pin("ARGOCD")) / "cmd" / "argocd-repo-server" / "commands"
              / "argocd_repo_server.go").read_text()
    (default,) = re.findall(r'"max-combined-directory-manifests-size", env\.StringFromEnv\("[A-Z_]+", "([^"]+)"\)',
                            source)
    limit = int(parse_quantity(default))
    assert directory_size_warning({"kustomization.yaml": b"x" * 2 * limit, "a.yaml": b"x" * 100}) is None
    assert directory_size_warning({"a.yaml": b"x" * APPLICATION_TARGET_BYTES}) is None
    # Over the target, under the limit: the split is advised, the limit not named.
    warning = directory_size_warning({"a.yaml": b"x" * limit})
    assert "groupApplications" in warning and "reposerver.max" not in warning
    warning = directory_size_warning({"a.yaml": b"x" * (limit // 2), "b.yaml": b"x" * (limit - limit // 2 + 1)})
    assert f"{limit + 1:,} bytes" in warning and "reposerver.max.combined.directory.manifests.size" in warning
    # Several clusters: one Application per cluster's folder, each within the limit however large the whole.
    half = b"x" * (APPLICATION_TARGET_BYTES // 2)
    several = {f"{cluster}/{name}": content for cluster in ("hub", "flame", "ember")
               for name, content in (("kustomization.yaml", b"resources: []"), ("a.yaml", half))}
    assert directory_size_warning(several) is None
    several["flame/b.yaml"] = half + b"xx"
    assert directory_size_warning(several).startswith(
        f"the synced manifests of flame/ (one Application) add up to {2 * len(half) + 2:,} bytes")
    assert "groupApplications" in directory_size_warning(several)


def test_the_inventory_rules_hold_the_pinned_kueue_crd_limits():
    """rules.py refuses, with a line, what Kueue's CRD would refuse at sync time: its limits are read from the
    pinned CRDs, so a Kueue upgrade that changes one fails here."""
    from generator.inventory import rules
    flavor = crd_schema("kueue.x-k8s.io_resourceflavors.yaml", "v1beta2")["properties"]["spec"]["properties"]
    assert flavor["nodeLabels"]["maxProperties"] == rules.FLAVOR_MAX_NODE_LABELS
    assert flavor["tolerations"]["maxItems"] == rules.FLAVOR_MAX_TOLERATIONS
    queue = crd_schema("kueue.x-k8s.io_clusterqueues.yaml", "v1beta2")["properties"]["spec"]["properties"]
    assert queue["resourceGroups"]["items"]["properties"]["flavors"]["maxItems"] == rules.CLUSTER_QUEUE_MAX_FLAVORS
    group = queue["resourceGroups"]["items"]["properties"]
    assert group["coveredResources"]["maxItems"] == rules.CLUSTER_QUEUE_MAX_RESOURCES
    assert group["flavors"]["items"]["properties"]["resources"]["maxItems"] == rules.CLUSTER_QUEUE_MAX_RESOURCES
