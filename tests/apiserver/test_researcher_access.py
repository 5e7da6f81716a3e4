"""Researchers' access (issue 11), proven by the real components on the other side of the seam: the pinned
kube-apiserver's RBAC and Pod Security admission, the real kubeflow SDK (the pinned KUBEFLOW_SDK) and kubectl.

The rendered tree is applied for real to this session's control plane. Researchers then talk to the API
server with client certificates issued by its CA (CN = user, O = the OIDC-style group the inventory lists),
never as admin, so the only thing that lets them in is the rendered RBAC:

- alice is in group A's identity provider group, bob in group B's, mallory is authenticated but in no group;
- the expectations come from the inventory (its classes and groups) and the issue's list of permissions,
  not from the rendered objects they check.

What no component here runs: Trainer's and Kueue's controllers and webhooks, Kyverno, kube-controller-manager.
The SDK's TrainJob is therefore stored, not admitted (tests/e2e covers admission). Argo CD cannot run here
either: a group leaving the inventory is synced with simulation/argo_sync.py, the project's model of
gitops-engine's order and pruning, against this real API server.
"""
from __future__ import annotations

import copy
import dataclasses
import json
import os
import pathlib
import shutil
import subprocess

from simulation import argo_sync  # Argo CD's sync, modelled
import pytest

from generator.inventory import load_inventory
from generator.inventory.naming import runtime_name

from simulation.control_plane import issue_certificate, write_kubeconfig
from simulation.kube import SyncApi
from simulation.kube import Kube, message
from simulation.manifests import load_one, manifest_files, rel, rendered_dir
from simulation.pins import REPO
from simulation.prerequisites import unavailable
from simulation.waiting import REQUEST, ceiling

pytestmark = pytest.mark.tools  # needs binaries from `make tools`

TRAINER = "trainer.kubeflow.org/v1alpha1"
FORBIDDEN = 403

# The issue's list, written out independently of generator/builders/rbac.py:
# (API group, resource) -> verbs a researcher has in the group's own namespaces.
RESEARCHER_PERMISSIONS = {
    ("trainer.kubeflow.org", "trainjobs"): {"create", "get", "list", "watch", "delete"},
    ("batch", "jobs"): {"create", "get", "list", "watch", "delete"},
    ("trainer.kubeflow.org", "trainingruntimes"): {"get", "list", "watch"},
    ("kueue.x-k8s.io", "localqueues"): {"get", "list", "watch"},
    ("kueue.x-k8s.io", "workloads"): {"get", "list", "watch"},
    ("visibility.kueue.x-k8s.io", "localqueues/pendingworkloads"): {"get"},
    ("", "configmaps[job-limits]"): {"get"},
    ("", "pods"): {"get", "list", "watch"},
    ("", "pods/log"): {"get", "list", "watch"},
    ("", "events"): {"get", "list", "watch"},
}
# Every authenticated user, everywhere (the seed's `kubectl get clustertrainingruntimes`).
EVERYONE = {("trainer.kubeflow.org", "clustertrainingruntimes"): {"get", "list", "watch"}}
# The API groups the platform's objects live in; Kubernetes' own default grants to every user (self-reviews,
# discovery) are outside them.
PLATFORM_GROUPS = {"", "batch", "trainer.kubeflow.org", "kueue.x-k8s.io", "visibility.kueue.x-k8s.io",
                   "rbac.authorization.k8s.io"}


def train_fn():  # the SDK sends this function's source as the container command
    print("training")


@dataclasses.dataclass
class Researcher:
    user: str
    group: str | None  # the identity provider's group (certificate O); None: in no research group
    namespaces: list[str]  # the research namespaces of that group
    cert: pathlib.Path
    key: pathlib.Path
    kube: Kube  # raw HTTP as this identity


@pytest.fixture(scope="module")
def inventory():
    return load_inventory(REPO / "gpu_classes.yaml")


@pytest.fixture(scope="module")
def applied_tree(cluster):
    """The synced tree (rendered/) applied for real by the admin, as Argo CD leaves it. bootstrap/ holds
    Argo CD's own objects, which grant researchers nothing."""
    files = [f for f in manifest_files() if rendered_dir() in f.parents]
    if not files:
        unavailable(f"no rendered objects under {rendered_dir()}")
    for f in files:
        r = cluster.apply(load_one(f), dry_run=False)
        assert r.ok, f"{rel(f)}: {r.status_code} {message(r)}"


@pytest.fixture(scope="module")
def researchers(control_plane, applied_tree, inventory, tmp_path_factory):
    """alice (first group with an identity provider group), bob (the next one), mallory (no group)."""
    groups = [(name, g) for name, g in inventory.groups.items() if g.identities.groups]
    assert len(groups) >= 2, "the inventory needs two groups with OIDC groups for the cross-group checks"
    out = tmp_path_factory.mktemp("researchers")
    people = {}
    for user, (_group_name, group) in (("alice", groups[0]), ("bob", groups[1]), ("mallory", (None, None))):
        oidc_group = group.identities.groups[0] if group else None
        subject = (f"/O={oidc_group}" if oidc_group else "") + f"/CN={user}"
        issue_certificate(control_plane.pki, out, user, subject, "extendedKeyUsage=clientAuth\n")
        cert, key = out / f"{user}.crt", out / f"{user}.key"
        people[user] = Researcher(user, oidc_group, list(group.namespaces) if group else [], cert, key,
                                  Kube(control_plane.kube.server, control_plane.pki / "ca.crt", cert, key))
    return people


@pytest.fixture()
def sdk(control_plane):
    """sdk(researcher, namespace): the real kubeflow TrainerClient, authenticated by the researcher's
    certificate (never the admin's), working in `namespace`. Thread pools closed afterwards."""
    from kubeflow.common.types import KubernetesBackendConfig
    from kubeflow.trainer import TrainerClient
    from kubernetes import client as k8s

    made = []

    def make(person: Researcher, namespace: str):
        config = k8s.Configuration()
        config.host = control_plane.kube.server
        config.ssl_ca_cert = str(control_plane.pki / "ca.crt")
        config.cert_file, config.key_file = str(person.cert), str(person.key)
        trainer = TrainerClient(backend_config=KubernetesBackendConfig(namespace=namespace,
                                                                         client_configuration=config))
        made.append(trainer)
        return trainer

    yield make
    for trainer in made:
        trainer.backend.custom_api.api_client.close()


def status_of(error: BaseException) -> int | None:
    """The HTTP status behind an SDK RuntimeError (the SDK wraps the client's ApiException)."""
    while error is not None:
        if getattr(error, "status", None) is not None:
            return error.status
        error = error.__cause__
    return None


def class_runtimes(inventory) -> list[str]:
    return sorted(runtime_name(name) for name in inventory.classes)


def a_runtime(inventory, kind, namespace=None):
    """A valid runtime object: the rendered torch-<first class> re-kinded (and renamed: a namespaced one
    named like a cluster runtime would shadow it)."""
    (path,) = [f for f in manifest_files() if load_one(f).get("kind") == "ClusterTrainingRuntime"
               and load_one(f)["metadata"]["name"] == class_runtimes(inventory)[0]]
    obj = copy.deepcopy(load_one(path))
    obj["kind"] = kind
    obj["metadata"] = {"name": "my-own-runtime", "labels": obj["metadata"]["labels"]}
    if namespace:
        obj["metadata"]["namespace"] = namespace
    return obj


# ---------------------------------------------------------------- the SDK as a researcher

def test_list_runtimes_returns_exactly_the_class_runtimes(researchers, sdk, inventory, cluster):
    served = cluster.http.get(cluster.resource_url(TRAINER, "ClusterTrainingRuntime"), timeout=REQUEST).json()["items"]
    assert sorted(rt["metadata"]["name"] for rt in served) == class_runtimes(inventory), \
        "the API server holds runtimes other than the classes' (or misses one)"
    for person in (researchers["alice"], researchers["bob"]):
        for namespace in person.namespaces:
            names = sorted(rt.name for rt in sdk(person, namespace).list_runtimes())
            assert names == class_runtimes(inventory), f"{person.user} in {namespace}"


def test_train_creates_a_trainjob_the_researcher_can_follow_and_delete(researchers, sdk, inventory, cluster):
    from kubeflow.trainer import CustomTrainer

    alice = researchers["alice"]
    namespace = alice.namespaces[0]
    runtime = class_runtimes(inventory)[0]
    trainer = sdk(alice, namespace)
    name = trainer.train(runtime=runtime, trainer=CustomTrainer(
        func=train_fn, num_nodes=1, resources_per_node={"cpu": 8, "memory": "64Gi", "gpu": 1}))

    stored = cluster.http.get(cluster.resource_url(TRAINER, "TrainJob", namespace, name), timeout=REQUEST)
    assert stored.ok, message(stored)
    assert stored.json()["spec"]["runtimeRef"]["name"] == runtime
    # Reading it back lists its pods (get_job) and finds it among the namespace's TrainJobs (list_jobs).
    assert trainer.get_job(name).name == name
    assert name in [job.name for job in trainer.list_jobs()]
    trainer.delete_job(name)
    gone = cluster.http.get(cluster.resource_url(TRAINER, "TrainJob", namespace, name), timeout=REQUEST)
    assert gone.status_code == 404


def test_another_groups_namespace_is_forbidden(researchers, sdk, inventory):
    from kubeflow.trainer import CustomTrainer

    alice, bob = researchers["alice"], researchers["bob"]
    for namespace in bob.namespaces:
        trainer = sdk(alice, namespace)
        with pytest.raises(RuntimeError) as listed:
            trainer.list_runtimes()
        assert status_of(listed.value) == FORBIDDEN, listed.value
        with pytest.raises(RuntimeError) as trained:
            trainer.train(runtime=class_runtimes(inventory)[0], trainer=CustomTrainer(func=train_fn))
        assert status_of(trained.value) == FORBIDDEN, trained.value

        job = {"apiVersion": TRAINER, "kind": "TrainJob", "metadata": {"name": "intruder", "namespace": namespace},
               "spec": {"runtimeRef": {"name": class_runtimes(inventory)[0]}}}
        for verb, response in (
                ("create TrainJob", alice.kube.create(job, dry_run=False)),
                ("list pods", alice.kube.http.get(alice.kube.resource_url("v1", "Pod", namespace), timeout=REQUEST)),
                ("list Jobs",
                 alice.kube.http.get(alice.kube.resource_url("batch/v1", "Job", namespace), timeout=REQUEST))):
            assert response.status_code == FORBIDDEN, f"alice may {verb} in {namespace}: {response.status_code}"


def test_a_user_in_no_group_reads_cluster_runtimes_but_cannot_use_the_sdk_in_a_research_namespace(
        researchers, sdk, inventory, cluster):
    """The binding is what grants access: the same SDK call as an authenticated user in no group fails."""
    mallory = researchers["mallory"]
    served = mallory.kube.http.get(mallory.kube.resource_url(TRAINER, "ClusterTrainingRuntime"), timeout=REQUEST)
    assert served.ok, message(served)
    with pytest.raises(RuntimeError) as listed:
        sdk(mallory, researchers["alice"].namespaces[0]).list_runtimes()
    assert status_of(listed.value) == FORBIDDEN


def test_only_platform_admins_create_runtimes(researchers, inventory, cluster):
    alice = researchers["alice"]
    namespace = alice.namespaces[0]
    namespaced = a_runtime(inventory, "TrainingRuntime", namespace)
    clustered = a_runtime(inventory, "ClusterTrainingRuntime")
    # The objects are valid: an admin's dry-run is accepted, so the researcher's 403 is RBAC's answer.
    for obj in (namespaced, clustered):
        assert cluster.create(obj, dry_run=True).status_code == 201, message(cluster.create(obj, dry_run=True))
        r = alice.kube.create(obj, dry_run=False)
        assert r.status_code == FORBIDDEN, f"alice created a {obj['kind']}: {r.status_code} {message(r)}"
    # Nor may a researcher change or delete the platform's runtimes.
    existing = cluster.resource_url(TRAINER, "ClusterTrainingRuntime", name=class_runtimes(inventory)[0])
    patch = alice.kube.http.patch(existing, data=json.dumps({"metadata": {"labels": {"x": "y"}}}),
                                  headers={"Content-Type": "application/merge-patch+json"}, timeout=REQUEST)
    assert patch.status_code == FORBIDDEN
    assert alice.kube.http.delete(existing, timeout=REQUEST).status_code == FORBIDDEN


def test_a_user_identity_is_bound_like_a_group(control_plane, applied_tree, cluster, inventory, sdk, tmp_path):
    """identities.users: a group whose member is named as a user (certificate CN, no group) gets the same
    access, rendered by the same builders, and still none in other groups' namespaces."""
    from generator.builders import synced_objects
    from generator.inventory import load_inventory_text

    user = "oidc:carol@example.org"
    first_class = next(iter(inventory.classes))
    text = (REPO / "gpu_classes.yaml").read_text(encoding="utf-8") + (
        f"  user-lab:\n    namespaces: [user-lab]\n    identities:\n      users: [\"{user}\"]\n"
        f"    allocations:\n      {first_class}: {{gpus: 0, cpu: 0, memory: 0}}\n")
    objects = synced_objects(load_inventory_text(text, "gpu_classes.yaml"))
    for obj in objects:
        if obj["metadata"].get("name") == "user-lab" or obj["metadata"].get("namespace") == "user-lab":
            r = cluster.apply(obj, dry_run=False)
            assert r.ok, f"{obj['kind']}: {message(r)}"
    issue_certificate(control_plane.pki, tmp_path, "carol", f"/CN={user}", "extendedKeyUsage=clientAuth\n")
    cert, key = tmp_path / "carol.crt", tmp_path / "carol.key"
    carol = Researcher(user, None, ["user-lab"], cert, key,
                       Kube(cluster.server, control_plane.pki / "ca.crt", cert, key))
    assert sorted(rt.name for rt in sdk(carol, "user-lab").list_runtimes()) == class_runtimes(inventory)
    with pytest.raises(RuntimeError) as listed:
        sdk(carol, next(iter(inventory.groups.values())).namespaces[0]).list_runtimes()
    assert status_of(listed.value) == FORBIDDEN


# ---------------------------------------------------------------- exactly the listed permissions

def rules_review(person: Researcher, namespace: str) -> dict[tuple[str, str], set[str]]:
    """The API server's own account (SelfSubjectRulesReview) of what `person` may do in `namespace`,
    restricted to the platform's API groups."""
    review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview",
              "spec": {"namespace": namespace}}
    r = person.kube.http.post(f"{person.kube.server}/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
                              json=review, timeout=REQUEST)
    assert r.status_code == 201, message(r)
    status = r.json()["status"]
    assert not status.get("incomplete"), status
    allowed: dict[tuple[str, str], set[str]] = {}
    for rule in status["resourceRules"]:
        # A rule on named objects only is keyed resource[name,...].
        names = f"[{','.join(sorted(rule['resourceNames']))}]" if rule.get("resourceNames") else ""
        for group in rule.get("apiGroups", []):
            if group not in PLATFORM_GROUPS and group != "*":
                continue
            for resource in rule["resources"]:
                allowed.setdefault((group, resource + names), set()).update(rule["verbs"])
    return allowed


def test_researchers_have_exactly_the_listed_permissions(researchers):
    alice, bob, mallory = researchers["alice"], researchers["bob"], researchers["mallory"]
    for namespace in alice.namespaces:
        assert rules_review(alice, namespace) == {**RESEARCHER_PERMISSIONS, **EVERYONE}, namespace
    for namespace in bob.namespaces:
        assert rules_review(alice, namespace) == EVERYONE, f"alice in bob's {namespace}"
        assert rules_review(mallory, namespace) == EVERYONE, f"mallory in {namespace}"


# ---------------------------------------------------------------- kubectl as a researcher

@pytest.fixture(scope="module")
def kubectl(control_plane, researchers, tmp_path_factory):
    """kubectl(user, *args): the CLI with a kubeconfig holding only that researcher's certificate."""
    binary = shutil.which("kubectl")
    if binary is None:
        unavailable("kubectl is not installed")
    out = tmp_path_factory.mktemp("kubeconfigs")
    configs = {user: write_kubeconfig(out / user, control_plane.kube.server, control_plane.pki / "ca.crt",
                                      person.cert, person.key, user=user)
               for user, person in researchers.items()}

    def run(user, *args):
        env = {**os.environ, "KUBECONFIG": str(configs[user])}
        return subprocess.run([binary, *args], capture_output=True, text=True, env=env, timeout=ceiling(6))
    return run


def test_kubectl_get_clustertrainingruntimes_as_any_researcher(kubectl, researchers, inventory):
    for user in researchers:
        result = kubectl(user, "get", "clustertrainingruntimes", "-o", "name")
        assert result.returncode == 0, result.stderr
        names = sorted(line.rpartition("/")[2] for line in result.stdout.split())
        assert names == class_runtimes(inventory), user


def test_kubectl_auth_can_i_matches_the_contract(kubectl, researchers):
    alice, bob = researchers["alice"], researchers["bob"]

    def can(user, verb, resource, namespace):
        result = kubectl(user, "auth", "can-i", verb, resource, "-n", namespace)
        assert result.stdout.strip() in ("yes", "no"), result.stderr
        return result.stdout.strip() == "yes"

    own, other = alice.namespaces[0], bob.namespaces[0]
    assert can("alice", "create", "trainjobs.trainer.kubeflow.org", own)
    assert can("alice", "get", "trainingruntimes.trainer.kubeflow.org", own)
    assert not can("alice", "create", "trainingruntimes.trainer.kubeflow.org", own)
    assert not can("alice", "create", "clustertrainingruntimes.trainer.kubeflow.org", own)
    assert not can("alice", "update", "trainjobs.trainer.kubeflow.org", own)
    assert not can("alice", "create", "trainjobs.trainer.kubeflow.org", other)
    assert not can("alice", "create", "pods", own), "pods come from Jobs, never straight from researchers"


# ---------------------------------------------------------------- Pod Security on the research namespaces

def pod(namespace, host_dev=False):
    """A plain pod; host_dev: one mounting the node's /dev (its GPU device files) through a hostPath."""
    container = {"name": "c", "image": "registry.example/busybox:1"}
    spec = {"containers": [container]}
    if host_dev:
        container["volumeMounts"] = [{"name": "dev", "mountPath": "/host-dev"}]
        spec["volumes"] = [{"name": "dev", "hostPath": {"path": "/dev"}}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "psa-check", "namespace": namespace}, "spec": spec}


def test_research_namespaces_enforce_baseline_and_warn_restricted(cluster, inventory):
    if not inventory.cluster.createNamespaces:
        pytest.skip("the inventory does not render Namespaces")
    for group in inventory.groups.values():
        for namespace in group.namespaces:
            # kube-controller-manager, which would create it, does not run here; admission needs it.
            account = {"apiVersion": "v1", "kind": "ServiceAccount",
                       "metadata": {"name": "default", "namespace": namespace}}
            assert cluster.apply(account, dry_run=False).ok
            # (The test API server refuses privileged containers outright: --allow-privileged is off.)
            host_dev = cluster.create(pod(namespace, host_dev=True), dry_run=True)
            assert host_dev.status_code == FORBIDDEN, f"{namespace}: {host_dev.status_code} {message(host_dev)}"
            assert 'violates PodSecurity "baseline' in message(host_dev), message(host_dev)
            plain = cluster.create(pod(namespace), dry_run=True)
            assert plain.status_code == 201, message(plain)
            warning = plain.headers.get("Warning", "")
            assert 'would violate PodSecurity' in warning and 'restricted:' in warning, plain.headers


# ---------------------------------------------------------------- a group leaves: Argo CD keeps its Namespace

def test_a_group_leaving_keeps_its_namespace_and_loses_its_binding(cluster, applied_tree, inventory):
    """Synced in Argo CD's order (waves, PruneLast, waiting on pruned objects): the leaving group's Namespace
    is kept (Prune=false); its RoleBinding and LocalQueue are pruned. Without Prune=false the Namespace, and
    with it the users' PVCs, would be deleted (here it would stay terminating: no namespace controller runs)."""
    if not inventory.cluster.createNamespaces:
        pytest.skip("the inventory does not render Namespaces")
    from generator.builders import synced_objects
    from generator.inventory import load_inventory_text

    flame = (REPO / "gpu_classes.yaml").read_text(encoding="utf-8")
    first_class = next(iter(inventory.classes))
    leaving = flame + ("  leaving-lab:\n    namespaces: [leaving-lab]\n"
                       "    identities:\n      groups: [\"oidc:leaving-lab\"]\n"
                       f"    allocations:\n      {first_class}: {{gpus: 0, cpu: 0, memory: 0}}\n")
    with_group = synced_objects(load_inventory_text(leaving, "gpu_classes.yaml"))
    without = synced_objects(load_inventory_text(flame, "gpu_classes.yaml"))
    assert any(o["kind"] == "Namespace" and o["metadata"]["name"] == "leaving-lab" for o in with_group)

    api = SyncApi(cluster)
    argo = argo_sync.ArgoSync(api, "research-access", prune_last=True, propagation="Background")
    first = argo.sync(with_group, usual=6)
    assert first.phase == "Succeeded", first.message
    assert api.get("rbac.authorization.k8s.io/v1", "RoleBinding", "researcher", "leaving-lab") is not None

    second = argo.sync(without, usual=6)
    assert second.phase == "Succeeded", f"{second.message}: {second.waiting_on}"
    namespace = api.get("v1", "Namespace", "leaving-lab")
    assert namespace is not None and "deletionTimestamp" not in namespace["metadata"], namespace
    assert any("prune skipped (Prune=false) Namespace/leaving-lab" in step for step in second.steps), second.steps
    assert api.get("rbac.authorization.k8s.io/v1", "RoleBinding", "researcher", "leaving-lab") is None
    assert api.get("kueue.x-k8s.io/v1beta2", "LocalQueue", "default", "leaving-lab") is None


# ---------------------------------------------------------------- the components' charts grant no runtime writes

RUNTIME_RESOURCES = {"trainingruntimes", "clustertrainingruntimes"}
WRITE_VERBS = {"create", "update", "patch", "delete", "deletecollection", "*"}
# Kubernetes' user-facing roles gather every ClusterRole carrying one of these labels.
AGGREGATE_TO_USERS = {f"rbac.authorization.k8s.io/aggregate-to-{role}" for role in ("admin", "edit", "view")}


def writes_runtimes(role: dict) -> bool:
    for rule in role.get("rules") or []:
        groups, resources, verbs = set(rule.get("apiGroups", [])), set(rule.get("resources", [])), set(rule["verbs"])
        if (groups & {"trainer.kubeflow.org", "*"} and (resources & RUNTIME_RESOURCES or "*" in resources)
                and verbs & WRITE_VERBS):
            return True
    return False


def test_no_component_chart_lets_users_write_runtimes():
    """Only platform admins create runtimes: no role in the components' charts (as the bootstrap Applications
    install them, rendered by the real helm) that may write runtimes is aggregated into Kubernetes' user
    roles or bound to anything but the components' own service accounts."""
    from simulation import charts

    from generator.builders.bootstrap import COMPONENT_LABEL

    from simulation.manifests import bootstrap_dir

    apps = [a for a in (load_one(f) for f in sorted((bootstrap_dir() / "platform").rglob("*.yaml")))
            if a["kind"] == "Application" and COMPONENT_LABEL in a["metadata"].get("labels", {})]
    if not apps:
        unavailable(f"no component Applications under {bootstrap_dir() / 'platform'}")
    if not charts.tool("helm").exists():
        unavailable(f"{charts.tool('helm')} is missing: run `bash tools/build.sh helm`")
    writers_seen = 0
    for app in apps:
        objects = charts.helm_template(app)
        writers = {(o["kind"], o["metadata"]["name"]) for o in objects
                   if o["kind"] in ("ClusterRole", "Role") and writes_runtimes(o)}
        writers_seen += len(writers)
        for kind, name in writers:
            role = next(o for o in objects if (o["kind"], o["metadata"]["name"]) == (kind, name))
            labels = role["metadata"].get("labels") or {}
            assert not [k for k in AGGREGATE_TO_USERS if labels.get(k) == "true"], \
                f"{app['metadata']['name']}: {kind} {name} writes runtimes and is aggregated into users' roles"
        for binding in (o for o in objects if o["kind"] in ("ClusterRoleBinding", "RoleBinding")):
            if (binding["roleRef"]["kind"], binding["roleRef"]["name"]) not in writers:
                continue
            for subject in binding.get("subjects") or []:
                assert subject["kind"] == "ServiceAccount", \
                    f"{app['metadata']['name']}: {binding['metadata']['name']} lets {subject} write runtimes"
    # Trainer's controller manages runtimes (finalizers, status): the check has something to look at.
    assert writers_seen, "no chart role writes runtimes at all: is Trainer's chart still rendered?"
