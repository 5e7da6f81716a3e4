"""Several clusters from one inventory (docs/multi-cluster.md), the synced trees so far: what the manager and each
worker get. The platform is the example examples/several-clusters/gpu_classes.yaml (tests/support/inventories
.platform_data()): manager hub, GH200s on flame, A100s on ember where only vision-lab holds GPUs. The objects are
checked against the pinned CRDs by the strict API-server tier (tests/apiserver/test_apiserver.py)."""

from __future__ import annotations

import subprocess

import pytest
import yaml

from generator.builders.rbac import RESEARCHER_RULES
from generator.components import COMPONENTS
from generator.errors import InventoryInvalid
from generator.inventory import load_inventory_text
from generator.kinds import SYNCED_KINDS, project_whitelist
from generator.layout import KUSTOMIZATION_FILE
from generator.tree import RenderedTrees, render_trees
from tests.support.inventories import edited, own_components, platform, platform_data, to_text

MULTIKUEUE_KINDS = {kind for kind, facts in SYNCED_KINDS.items() if facts.several_clusters}


@pytest.fixture(scope="module")
def rendered() -> RenderedTrees:
    return render_trees(platform(), "platform.yaml")


@pytest.fixture(scope="module")
def trees(rendered) -> dict[str, dict[str, dict]]:
    """cluster -> {path in its tree: object}, kustomization.yaml left out."""
    out: dict[str, dict[str, dict]] = {}
    for path, content in rendered.synced.items():
        cluster, _, rest = path.partition("/")
        if rest != KUSTOMIZATION_FILE:
            out.setdefault(cluster, {})[rest] = yaml.safe_load(content)
    return out


def of_kind(tree: dict[str, dict], kind: str) -> dict[str, dict]:
    return {obj["metadata"]["name"]: obj for obj in tree.values() if obj["kind"] == kind}


def test_one_tree_per_cluster_each_with_its_kustomization(rendered):
    synced = rendered.synced
    assert {path.partition("/")[0] for path in synced} == {"hub", "flame", "ember"}
    for cluster in ("hub", "flame", "ember"):
        listed = yaml.safe_load(synced[f"{cluster}/{KUSTOMIZATION_FILE}"])["resources"]
        assert sorted(listed) == sorted(path.partition("/")[2] for path in synced
                                        if path.startswith(cluster + "/") and not path.endswith(KUSTOMIZATION_FILE))


def test_the_manager_queues_every_class_behind_its_groups_multikueue_check(trees):
    hub = trees["hub"]
    assert set(of_kind(hub, "ResourceFlavor")) == {"gh200", "a100"}
    queues = of_kind(hub, "ClusterQueue")
    assert set(queues) == {"vision-lab", "nlp-lab"}
    for name, queue in queues.items():
        assert queue["spec"]["admissionChecksStrategy"] == {"admissionChecks": [{"name": name}]}
    assert [f["name"] for f in queues["vision-lab"]["spec"]["resourceGroups"][0]["flavors"]] == ["a100", "gh200"]
    checks = of_kind(hub, "AdmissionCheck")
    assert checks == {name: checks[name] for name in queues}
    for name, check in checks.items():
        assert check["spec"] == {"controllerName": "kueue.x-k8s.io/multikueue", "parameters": {
            "apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": name}}
    configs = of_kind(hub, "MultiKueueConfig")
    # Where each group holds GPUs, in the inventory's order of clusters.
    assert {name: c["spec"]["clusters"] for name, c in configs.items()} == {"vision-lab": ["flame", "ember"],
                                                                          "nlp-lab": ["flame"]}
    assert {name: c["spec"] for name, c in of_kind(hub, "MultiKueueCluster").items()} == {
        worker: {"clusterSource": {"kubeConfig": {"locationType": "Secret", "location": f"multikueue-{worker}"}}}
        for worker in ("flame", "ember")}
    # No credentials in Git.
    assert not [obj for obj in hub.values() if obj["kind"] == "Secret"]


def test_each_worker_gets_its_classes_and_the_groups_that_hold_them(trees):
    flame, ember = trees["flame"], trees["ember"]
    assert set(of_kind(flame, "ResourceFlavor")) == {"gh200"}
    assert set(of_kind(ember, "ResourceFlavor")) == {"a100"}
    assert set(of_kind(flame, "ClusterQueue")) == {"vision-lab", "nlp-lab"}
    assert set(of_kind(ember, "ClusterQueue")) == {"vision-lab"}
    assert [f["name"] for f in of_kind(ember, "ClusterQueue")["vision-lab"]["spec"]["resourceGroups"][0]["flavors"]] \
        == ["a100"]
    assert set(of_kind(ember, "Namespace")) == {"vision-lab"}
    assert {(q["metadata"]["namespace"], q["spec"]["clusterQueue"]) for q in of_kind(ember, "LocalQueue").values()} \
        == {("vision-lab", "vision-lab")}
    assert set(of_kind(ember, "ClusterTrainingRuntime")) == {"torch-a100"}
    for tree in (flame, ember):
        assert not [obj for obj in tree.values() if obj["kind"] in MULTIKUEUE_KINDS - {"ServiceAccount"}]
        assert "admissionChecksStrategy" not in str(of_kind(tree, "ClusterQueue"))


def test_a_runtime_is_the_same_on_the_manager_and_on_its_worker(rendered):
    """MultiKueue copies the TrainJob; the worker's Trainer resolves the runtime by name, so both copies must be
    identical (Kueue's documentation)."""
    synced = rendered.synced
    for cls, worker in (("gh200", "flame"), ("a100", "ember")):
        path = f"trainer/clustertrainingruntime/torch-{cls}.yaml"
        assert synced[f"hub/{path}"] == synced[f"{worker}/{path}"]


def test_researchers_only_read_on_workers_and_the_manager_acts_there_as_multikueue(trees):
    submit = {"create", "delete"}
    hub_role = of_kind(trees["hub"], "ClusterRole")["researcher"]
    assert hub_role["rules"] == RESEARCHER_RULES
    for worker in ("flame", "ember"):
        tree = trees[worker]
        rules = of_kind(tree, "ClusterRole")["researcher"]["rules"]
        assert not [rule for rule in rules if submit & set(rule["verbs"])]
        assert [{k: v for k, v in r.items() if k != "verbs"} for r in rules] == \
               [{k: v for k, v in r.items() if k != "verbs"} for r in RESEARCHER_RULES]
        (account,) = of_kind(tree, "ServiceAccount").values()
        assert account["metadata"] == {**account["metadata"], "name": "multikueue", "namespace": "kueue-system"}
        binding = of_kind(tree, "ClusterRoleBinding")["multikueue"]
        assert binding["roleRef"]["name"] == "multikueue"
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "multikueue", "namespace": "kueue-system"}]
        granted = {(group, resource): rule["verbs"] for rule in of_kind(tree, "ClusterRole")["multikueue"]["rules"]
                   for group in rule["apiGroups"] for resource in rule["resources"]}
        # Kueue's rules for a MultiKueue worker (test/util/multikueue.go), for the platform's integrations.
        everything = ["create", "update", "patch", "delete", "get", "list", "watch"]
        assert granted == {
            ("kueue.x-k8s.io", "workloads"): everything,
            ("kueue.x-k8s.io", "workloads/status"): ["get", "patch", "update"],
            ("kueue.x-k8s.io", "clusterqueues"): ["get", "list", "watch"],
            ("kueue.x-k8s.io", "localqueues"): ["get", "list", "watch"],
            ("batch", "jobs"): everything, ("batch", "jobs/status"): ["get"],
            ("jobset.x-k8s.io", "jobsets"): everything, ("jobset.x-k8s.io", "jobsets/status"): ["get"],
            ("trainer.kubeflow.org", "trainjobs"): everything, ("trainer.kubeflow.org", "trainjobs/status"): ["get"]}


def test_every_kind_rendered_is_known_and_multikueues_only_for_several_clusters(trees):
    for tree in trees.values():
        assert {obj["kind"] for obj in tree.values()} <= set(SYNCED_KINDS)
    listed = {entry["kind"] for scope in (True, False) for entry in project_whitelist(scope, True)}
    assert not listed & MULTIKUEUE_KINDS
    listed = {entry["kind"] for scope in (True, False) for entry in project_whitelist(scope, True, True)}
    assert listed >= MULTIKUEUE_KINDS


def test_the_platform_breaks_no_rule_and_monitoring_is_refused_for_several_clusters():
    platform()  # no finding
    with pytest.raises(InventoryInvalid) as refused:
        load_inventory_text(to_text(edited(platform_data(), lambda d: d["cluster"].__setitem__(
            "monitoring", {"namespace": "monitoring"}))), "platform.yaml")
    assert [p.field for p in refused.value.problems] == ["cluster.monitoring"]


def test_the_worker_flame_has_flames_policies(trees):
    """tests/policies/cases.yaml sends MultiKueue's copies (resources/multikueue.yaml) to FLAME's policies as the
    worker's ServiceAccount: that stands for the worker flame only while its policies are FLAME's."""
    from simulation.manifests import load_one, rendered_dir
    policies = {path: obj for path, obj in trees["flame"].items() if path.startswith("kyverno/")}
    assert policies
    assert policies == {path: load_one(rendered_dir() / path) for path in policies}
    assert sorted(p.relative_to(rendered_dir()).as_posix() for p in (rendered_dir() / "kyverno").rglob("*.yaml")) \
        == sorted(policies)


def test_each_cluster_gets_every_component_with_its_own_values_inside_the_component_projects(rendered):
    """One Application per component and cluster, at that cluster's server. Only the manager's Kueue runs MultiKueue
    (written out, the inventory's timeout included); each cluster's Kueue brings the chart's kube-system binding,
    which its project allows on every cluster; the app-of-apps itself stays on the manager."""
    bootstrap = [yaml.safe_load(content) for content in rendered.bootstrap.values()]
    servers = {"hub": "https://kubernetes.default.svc", "flame": "https://flame.example.org:6443",
               "ember": "https://ember.example.org:6443"}
    projects = {o["metadata"]["name"]: o for o in bootstrap if o["kind"] == "AppProject"}
    components = [o for o in bootstrap if o["kind"] == "Application" and "gpugen/component" in o["metadata"]["labels"]]
    by_name = {a["metadata"]["name"]: a for a in components}
    assert set(by_name) == {f"{c}-{k}" for c in servers for k in COMPONENTS}
    for name, app in by_name.items():
        cluster, _, component = name.partition("-")
        assert app["spec"]["destination"]["server"] == servers[cluster]
        project = projects[app["spec"]["project"]]
        permitted = {(d["server"], d["namespace"]) for d in project["spec"]["destinations"]}
        assert (servers[cluster], app["spec"]["destination"]["namespace"]) in permitted
        if component == "kueue":
            values = app["spec"]["source"]["helm"]["valuesObject"]
            configuration = yaml.safe_load(values["managerConfig"]["controllerManagerConfigYaml"])
            assert values["enableVisibilityAuthReaderRoleBinding"] is True
            assert (servers[cluster], "kube-system") in permitted
            if cluster == "hub":
                assert configuration["multiKueue"] == {
                    "gcInterval": "1m", "origin": "multikueue", "workerLostTimeout": "15m",
                    "dispatcherName": "kueue.x-k8s.io/multikueue-dispatcher-all-at-once"}
                assert sorted(configuration["managedJobsNamespaceSelector"]["matchExpressions"][0]["values"]) == [
                    "nlp-lab", "nlp-lab-teaching", "vision-lab"]
            else:
                assert "multiKueue" not in configuration
    ember = yaml.safe_load(by_name["ember-kueue"]["spec"]["source"]["helm"]["valuesObject"]["managerConfig"]
                           ["controllerManagerConfigYaml"])
    assert ember["managedJobsNamespaceSelector"]["matchExpressions"][0]["values"] == ["vision-lab"]
    (root_project,) = [o for o in bootstrap if o["kind"] == "AppProject" and o["metadata"]["name"] == "flame-bootstrap"]
    assert {d["server"] for d in root_project["spec"]["destinations"]} == {servers["hub"]}
    assert not [o for o in bootstrap if o["kind"] == "RoleBinding"]


def test_the_worker_lost_timeout_is_read_from_the_inventory():
    data = edited(platform_data(), lambda d: d["cluster"]["components"]["kueue"].update(workerLostTimeout="45s"))
    bootstrap = [yaml.safe_load(c) for c in render_trees(platform(data), "platform.yaml").bootstrap.values()]
    (hub,) = [o for o in bootstrap if o["kind"] == "Application" and o["metadata"]["name"] == "hub-kueue"]
    values = hub["spec"]["source"]["helm"]["valuesObject"]["managerConfig"]["controllerManagerConfigYaml"]
    assert yaml.safe_load(values)["multiKueue"]["workerLostTimeout"] == "45s"


def test_the_users_page_is_one_page_naming_where_each_runtime_runs(rendered):
    """One page for the whole platform: each runtime with the cluster of its class, and where to submit. The
    researcher's choice stays the runtime."""
    page = rendered.docs.decode()
    assert "| runtime | GPU class | runs on cluster | CPU architecture | default image | nodes × GPUs |" in page
    rows = {line.split("|")[1].strip(): line.split("|")[3].strip() for line in page.splitlines()
            if line.startswith("| `torch-")}
    assert rows == {"`torch-a100`": "`ember`", "`torch-gh200`": "`flame`"}
    assert "Submit, list and delete your jobs on the `hub` cluster" in page
    assert "clusters `flame`, `ember`" in page


def test_plan_shows_each_cluster_and_names_a_class_that_moves_between_clusters(rendered):
    """A100s moved from ember to flame: the plan per cluster (ember loses its flavor, flame gains it, the manager's
    queues are unchanged) and the move named, with what happens to running jobs."""
    from generator.plan.clusters import make_cluster_plans
    from generator.plan.output.markdown import cluster_plans_markdown
    from generator.plan.output.text import cluster_plans_text

    def moved(data):
        data["classes"]["a100"]["cluster"] = "flame"
    data = edited(platform_data(), moved)
    data["classes"]["h100"] = {**data["classes"]["a100"], "cluster": "ember",
                               "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}}
    data["groups"]["vision-lab"]["allocations"]["h100"] = {"gpus": 4, "cpu": 32, "memory": "256G"}
    after = render_trees(platform(data), "platform.yaml").synced
    result = make_cluster_plans(rendered.synced, after)
    assert list(result.plans) == ["ember", "flame", "hub"]
    assert [(m.gpu_class, m.old, m.new) for m in result.moves] == [("a100", "ember", "flame")]

    def flavors(cluster):
        return {(c.key[2], c.action) for c in result.plans[cluster].changes if c.key[0] == "ResourceFlavor"}

    assert flavors("ember") == {("a100", "removed"), ("h100", "added")}
    assert flavors("flame") == {("a100", "added")}
    assert flavors("hub") == {("h100", "added")}
    text = cluster_plans_text(result)
    assert "class a100 moves from ember to flame: its jobs on ember run to the end there" in text
    assert "=== cluster ember" in text and "=== cluster hub" in text
    markdown = cluster_plans_markdown(result)
    assert "**a100**: class a100 moves from ember to flame" in markdown
    assert "#### cluster `flame`" in markdown and len(markdown) < 65_536
    unchanged = make_cluster_plans(rendered.synced, rendered.synced)
    assert not unchanged.moves and not any(p.changes for p in unchanged.plans.values())


def test_the_cli_renders_several_clusters_and_plans_them_against_git(tmp_path):
    """What a platform engineer runs: FLAME's one-cluster render committed, the inventory spread over clusters, the
    plan against that commit (every cluster's tree is new), the render (a tree per cluster, each with its
    kustomization.yaml; the ApplicationSet), a no-op render and the drift check; then a class moved, planned."""
    from click.testing import CliRunner

    from generator.cli import main
    from tests.support.inventories import flame_data
    from tests.support import snapshot

    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    def run(*args):
        return CliRunner().invoke(main, [*args, "--inventory", str(inventory), "--out", str(tmp_path / "rendered"),
                                         *outputs[args[0]]])
    inventory = tmp_path / "gpu_classes.yaml"
    outputs = {"render": ["--bootstrap-out", str(tmp_path / "bootstrap"), "--docs-out", str(tmp_path / "runtimes.md")],
               "plan": ["--base", "HEAD"]}
    inventory.write_text(to_text(flame_data()))
    assert run("render").exit_code == 0
    git("init", "-q")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-qm", "one cluster")

    inventory.write_text(to_text(platform_data()))
    planned = run("plan")
    assert planned.exit_code == 0, planned.output
    assert planned.output.startswith("Plan for 3 clusters: ember: ")
    assert "=== cluster hub" in planned.output
    rendered = run("render")
    assert rendered.exit_code == 0, rendered.output
    assert sorted(p.name for p in (tmp_path / "rendered").iterdir()) == ["ember", "flame", "hub"]
    for cluster in ("ember", "flame", "hub"):
        listed = yaml.safe_load((tmp_path / "rendered" / cluster / KUSTOMIZATION_FILE).read_text())["resources"]
        assert sorted(listed) == sorted(p.relative_to(tmp_path / "rendered" / cluster).as_posix()
                                        for p in (tmp_path / "rendered" / cluster).rglob("*.yaml")
                                        if p.name != KUSTOMIZATION_FILE)
    assert list((tmp_path / "bootstrap").rglob("applicationset/*.yaml"))
    before = snapshot(tmp_path / "rendered")
    again = run("render")
    assert again.output.count(": up to date") == 3 and snapshot(tmp_path / "rendered") == before
    assert run("render", "--check").exit_code == 0

    git("add", "-A")
    git("-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-qm", "three clusters")
    inventory.write_text(to_text(edited(platform_data(), lambda d: d["classes"]["a100"].__setitem__("cluster", "flame"),
                                        lambda d: d["clusters"].pop("ember"))))
    moved = CliRunner().invoke(main, ["plan", "--inventory", str(inventory), "--out", str(tmp_path / "rendered"),
                                      "--format", "markdown"])
    assert moved.exit_code == 0, moved.output
    assert "**a100**: class a100 moves from ember to flame" in moved.output
    assert "#### cluster `ember`" in moved.output  # everything there removed


def test_a_cluster_with_components_of_its_own_gets_them_and_the_others_are_untouched(rendered):
    """A cluster's own components: no Application for what it adopts, its Kueue where it says, everything that
    names Kueue's namespace or identity on that cluster following; the other clusters render as before."""
    changed = render_trees(platform(edited(platform_data(), own_components)), "platform.yaml")
    for cluster in ("hub", "flame"):
        assert {p: c for p, c in changed.synced.items() if p.startswith(cluster + "/")} == \
            {p: c for p, c in rendered.synced.items() if p.startswith(cluster + "/")}
    bootstrap = {path: yaml.safe_load(content) for path, content in changed.bootstrap.items()}
    apps = {o["metadata"]["name"]: o for o in bootstrap.values() if o["kind"] == "Application"}
    assert "ember-kyverno" not in apps and {"hub-kyverno", "flame-kyverno", "ember-jobset"} <= set(apps)
    assert apps["ember-kueue"]["spec"]["destination"] == {"server": "https://ember.example.org:6443",
                                                          "namespace": "kueue"}
    projects = {o["metadata"]["name"]: o["spec"] for o in bootstrap.values() if o["kind"] == "AppProject"}
    assert "https://ember.example.org:6443" not in {d["server"] for d in projects["flame-kyverno"]["destinations"]}
    assert {"server": "https://ember.example.org:6443", "namespace": "kueue"} in projects["flame-kueue"]["destinations"]
    assert {"group": "", "kind": "Namespace", "name": "kueue"} in projects["flame-kueue"]["clusterResourceWhitelist"]
    ember = {p.removeprefix("ember/"): c.decode() for p, c in changed.synced.items() if p.startswith("ember/")}
    assert "core/serviceaccount/kueue.multikueue.yaml" in ember
    assert not [p for p in ember if p.startswith("core/serviceaccount/kueue-system.")]
    identities = [p for p, text in ember.items() if "system:serviceaccount:kueue:" in text]
    assert identities and not [p for p, text in ember.items() if "system:serviceaccount:kueue-system:" in text]
    # The gpugen project lets ember's tree write MultiKueue's ServiceAccount into that namespace.
    (appset_project,) = [s for name, s in projects.items() if name.endswith("-gpugen")]
    assert {"server": "https://ember.example.org:6443", "namespace": "kueue"} in appset_project["destinations"]


# ------------------------------------------------------------------ API servers as URLs


@pytest.mark.parametrize("spellings", [
    ("https://flame.example.org:6443", "https://flame.example.org:6443/", "https://FLAME.Example.org:6443",
     "https://flame.example.org.:6443", "https://flame.example.org:06443"),
    ("https://hub.example.org", "https://hub.example.org:443", "https://hub.example.org:443/", "https://hub.example.org/"),
    ("https://rancher.example.org/k8s/clusters/c-1", "https://rancher.example.org:443/k8s/clusters/c-1/",
     "https://rancher.example.org/k8s//clusters/./c-1", "https://rancher.example.org/k8s/x/../clusters/c-1//"),
    ("https://hub.example.org/", "https://hub.example.org//", "https://hub.example.org/.", "https://hub.example.org/.."),
    ("https://10.0.0.1:6443", "https://10.0.0.1.:6443/"),
    ("https://[::1]:6443", "https://[0:0:0:0:0:0:0:1]:6443", "https://[0::1]:6443/"),
])
def test_one_api_server_in_several_spellings_is_one_server(spellings):
    from generator.inventory import servers
    assert len({servers.parse(spelling).normalised for spelling in spellings}) == 1
    data = edited(platform_data(), lambda d: d["clusters"]["flame"].update(server=spellings[0]),
                  lambda d: d["clusters"]["ember"].update(server=spellings[-1]))
    with pytest.raises(InventoryInvalid) as refused:
        load_inventory_text(to_text(data), "platform.yaml")
    (problem,) = refused.value.problems
    flame_line = to_text(data).splitlines().index("  flame:") + 3  # role, then server
    assert problem.field == "clusters.ember.server"
    assert problem.reason.startswith(f"{spellings[-1]} is already the API server of cluster 'flame' "
                                     f"(platform.yaml:{flame_line}:5")


@pytest.mark.parametrize("server", [
    "https://kubernetes.default.svc", "https://kubernetes.default.svc:443/", "https://Kubernetes.Default.Svc",
    "https://kubernetes.default.svc.cluster.local", "https://kubernetes.default.svc.example.internal.:443",
    "https://kubernetes.default", "https://kubernetes.default.svc:6443/api"])
def test_a_worker_may_not_name_the_in_cluster_address(server):
    data = edited(platform_data(), lambda d: d["clusters"]["flame"].update(server=server))
    with pytest.raises(InventoryInvalid) as refused:
        load_inventory_text(to_text(data), "platform.yaml")
    assert [(p.field, p.reason.split(" is ")[1]) for p in refused.value.problems] == [
        ("clusters.flame.server",
         "the in-cluster address, where Argo CD reaches the manager (its own Applications "
         "go to https://kubernetes.default.svc): this worker's tree would land on the manager; "
         "give the worker's own API server")]
    # The manager is reached in-cluster anyway: naming it so is no mistake.
    platform(edited(platform_data(), lambda d: d["clusters"]["hub"].update(server=server)))


@pytest.mark.parametrize("server, reason", [
    ("https://flame.example.org:65536", "port 65536 is outside 1-65535"),
    ("https://flame.example.org:99999/", "port 99999 is outside 1-65535"),
    ("https://flame.example.org:0", "port 0 is outside 1-65535"),
    ("https://flame..example.org", "flame..example.org is not a DNS name"),
    ("https://-flame.example.org", "-flame.example.org is not a DNS name"),
    ("https://" + "a" * 64 + ".example.org", "is not a DNS name"),
    ("https://256.1.1.1:6443", "256.1.1.1 is not an IPv4 address"),
    ("https://[1::2::3]:6443", "[1::2::3] is not an IPv6 address"),
])
def test_a_server_is_parsed_as_a_url(server, reason):
    data = edited(platform_data(), lambda d: d["clusters"]["flame"].update(server=server))
    with pytest.raises(InventoryInvalid) as refused:
        load_inventory_text(to_text(data), "platform.yaml")
    assert [p.field for p in refused.value.problems] == ["clusters.flame.server"]
    assert reason in refused.value.problems[0].reason


def test_kubernetes_near_misses_are_other_servers():
    """Only the API server's own Service is reserved: a host that merely starts like it is another server."""
    from generator.inventory import servers
    for server in ("https://kubernetes.example.org", "https://kubernetes.default.example.org",
                   "https://kubernetes-default.svc", "https://kubernetes"):
        assert not servers.parse(server).in_cluster, server
