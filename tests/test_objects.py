"""The objects hang together the way Kueue, Trainer and the seed page need them to."""

from __future__ import annotations

import re

import yaml
from conftest import REPO, of_kind

from generator.builders.argocd import SYNC_WAVE
from generator.layout import REPO_SERVER_MAX_DIRECTORY_BYTES, directory_size_warning
from generator.builders.kueue import COVERED_RESOURCES

POD_SPEC_PATH = ("spec", "template", "spec", "replicatedJobs", 0, "template", "spec", "template", "spec")


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


def test_runtime_shape_the_sdk_and_webhook_rely_on(flame, flame_objects):
    for runtime in of_kind(flame_objects, "ClusterTrainingRuntime"):
        labels = runtime["metadata"]["labels"]
        assert labels["trainer.kubeflow.org/framework"] == "torch"
        assert "trainer.kubeflow.org/webhook-validation" not in labels
        assert runtime["spec"]["mlPolicy"] == {"numNodes": 1, "torch": {}}
        job = node_job(runtime)
        assert (job["name"], job["replicas"]) == ("node", 1)
        assert job["template"]["metadata"]["labels"] == {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}
        pod = dig(runtime, POD_SPEC_PATH)
        (container,) = pod["containers"]
        assert container["name"] == "node"
        assert "resources" not in container, "no GPU by default, and a device-less limits map breaks the SDK"
        class_name = runtime["metadata"]["name"].removeprefix("torch-")
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
    for queue in of_kind(flame_objects, "ClusterQueue"):
        (group,) = queue["spec"]["resourceGroups"]
        assert tuple(group["coveredResources"]) == COVERED_RESOURCES == ("cpu", "memory", "nvidia.com/gpu", "pods")
        for flavor in group["flavors"]:
            assert [r["name"] for r in flavor["resources"]] == group["coveredResources"]


def test_cluster_queue_spells_out_server_defaults_and_its_namespaces(flame, flame_objects):
    for queue in of_kind(flame_objects, "ClusterQueue"):
        spec = queue["spec"]
        group = flame.groups[queue["metadata"]["name"]]
        assert spec["cohortName"] == group.cohort
        (selector,) = spec["namespaceSelector"]["matchExpressions"]
        assert selector == {"key": "kubernetes.io/metadata.name", "operator": "In", "values": sorted(group.namespaces)}
        for defaulted in ("queueingStrategy", "stopPolicy", "preemption", "flavorFungibility"):
            assert defaulted in spec


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
    (binding,) = of_kind(flame_objects, "ClusterRoleBinding")
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
    assert directory_size_warning({"kustomization.yaml": b"x" * 20_000_000, "a.yaml": b"x" * 100}) is None
    assert directory_size_warning({"a.yaml": b"x" * REPO_SERVER_MAX_DIRECTORY_BYTES}) is None
    warning = directory_size_warning({"a.yaml": b"x" * 6_000_000, "b.yaml": b"x" * 4_000_001})
    assert "10,000,001 bytes" in warning and "reposerver.max.combined.directory.manifests.size" in warning
