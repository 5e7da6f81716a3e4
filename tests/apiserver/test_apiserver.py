"""The rendered tree against a real kube-apiserver with the pinned CRDs (see control_plane.py).

Dry-run server-side apply with fieldValidation=Strict runs the CRD schemas, their CEL
rules, core validation and admission, without needing any controller or webhook.
"""
import copy

import pytest
import requests
import yaml

from simulation.control_plane import SCRATCH_NS
from simulation.pins import versions
from simulation.waiting import REQUEST
from simulation.kube import message
from simulation.manifests import load_one, manifest_files, rel, rendered_dir
from simulation.prerequisites import unavailable
from tests.apiserver.apiserver_support import header

pytestmark = pytest.mark.tools  # needs binaries from `make tools`


def test_rendered_object_dry_run_apply(tree_present, cluster, manifest_file):
    obj = load_one(manifest_file)
    r = cluster.apply(obj, dry_run=True)
    assert r.ok, f"{rel(manifest_file)}: {r.status_code} {message(r)}"
    # Warnings are how the server flags deprecated APIs and fields it will ignore.
    assert "Warning" not in r.headers, f"{rel(manifest_file)}: server warned: {r.headers['Warning']}"


def node_job(runtime):
    """A batch/v1 Job from the runtime's `node` replicated job, so core Pod validation runs."""
    jobs = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    node = [j for j in jobs if j["name"] == "node"]
    assert len(node) == 1, "a ClusterTrainingRuntime needs exactly one replicated job named node"
    template = copy.deepcopy(node[0]["template"])
    pod = template["spec"]["template"]["spec"]
    # JobSet's defaulting webhook (jobset_webhook.go) sets OnFailure when unset; a bare Job
    # would keep the Pod default Always, which Job validation rejects.
    pod.setdefault("restartPolicy", "OnFailure")
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": f"podcheck-{runtime['metadata']['name']}", "namespace": SCRATCH_NS,
                     "labels": template.get("metadata", {}).get("labels", {})},
        "spec": template["spec"],
    }


def test_runtime_pod_template_is_a_valid_job(tree_present, cluster, runtime_file):
    if runtime_file is None:
        pytest.fail("the rendered tree has no ClusterTrainingRuntime")
    job = node_job(load_one(runtime_file))
    containers = job["spec"]["template"]["spec"]["containers"]
    assert [c for c in containers if c["name"] == "node" and c.get("image")], \
        "the node replicated job needs a container named node with an image"
    r = cluster.create(job, dry_run=True)
    assert r.status_code == 201, f"{rel(runtime_file)}: {r.status_code} {message(r)}"
    assert "Warning" not in r.headers, f"{rel(runtime_file)}: server warned: {r.headers['Warning']}"


@pytest.fixture(scope="module")
def applied_tree(cluster):
    """The whole tree applied for real (namespaces already exist)."""
    objs = [(f, load_one(f)) for f in manifest_files()]
    if not objs:
        unavailable(f"no rendered objects under {rendered_dir()}")
    for f, obj in objs:
        r = cluster.apply(obj, dry_run=False)
        assert r.ok, f"{rel(f)}: {r.status_code} {message(r)}"
    return objs


def test_tree_applies_for_real_and_reapplies_cleanly(cluster, applied_tree):
    # A second apply of the same content must be accepted too (what Argo CD does on sync).
    for f, obj in applied_tree:
        r = cluster.apply(obj, dry_run=True)
        assert r.ok, f"{rel(f)}: {r.status_code} {message(r)}"
        assert cluster.get(obj).ok


def test_localqueue_cluster_queue_is_immutable(cluster, applied_tree):
    queues = [o for _, o in applied_tree if o["kind"] == "LocalQueue"]
    assert queues, "the rendered tree has no LocalQueue"
    for lq in queues:
        changed = copy.deepcopy(lq)
        changed["spec"]["clusterQueue"] = lq["spec"]["clusterQueue"] + "-other"
        r = cluster.apply(changed, dry_run=True)
        assert r.status_code == 422, f"changing {lq['metadata']['name']}.spec.clusterQueue: {r.status_code}"
        assert "field is immutable" in message(r), message(r)


def test_broken_object_is_rejected(cluster, broken_file):
    """Every object in broken/ must be refused, with the message its `# expect:` lines name."""
    expected = header(broken_file, "expect")
    assert expected, f"{broken_file.name} has no '# expect:' line"
    r = cluster.apply(load_one(broken_file), dry_run=True)
    assert not r.ok, f"{broken_file.name} was accepted"
    for text in expected:
        assert text in message(r), f"{broken_file.name}: {text!r} not in server message: {message(r)}"


@pytest.fixture(scope="module")
def several_clusters_rendered():
    from generator.tree import render_trees
    from tests.support.inventories import platform
    return render_trees(platform(), "platform.yaml")


@pytest.mark.parametrize("member", ["hub", "flame", "ember", "bootstrap"])
def test_each_tree_of_several_clusters_dry_run_applies(cluster, several_clusters_rendered, member):
    """tests/unit/test_several_clusters.py's platform: every object of one cluster's tree, MultiKueue's included,
    against the pinned CRDs (namespaces made first: the research namespaces exist, Kueue's is made here). An
    object equal to the FLAME tree's at the same path is left out: test_rendered_object_dry_run_apply has it."""
    rendered = several_clusters_rendered
    if member == "bootstrap":  # against FLAME's bootstrap/, beside the tree
        files, flame = {f"bootstrap/{path}": content for path, content in rendered.bootstrap.items()}, \
            rendered_dir().parent / "bootstrap"
    else:
        files, flame = rendered.synced, rendered_dir()
    # The tree under test may itself be of several clusters (GPUGEN_RENDERED_DIR): then the member's own folder.
    if (flame / member / "kustomization.yaml").is_file():
        flame = flame / member
    objects, covered = [], 0
    for path, content in sorted(files.items()):
        rest = path.partition("/")[2]
        if path.startswith(member + "/") and rest != "kustomization.yaml":
            obj = yaml.safe_load(content)
            if (flame / rest).is_file() and load_one(flame / rest) == obj:
                covered += 1
            else:
                objects.append(obj)
    assert objects or covered
    for namespace in sorted({obj["metadata"]["namespace"] for obj in objects if "namespace" in obj["metadata"]}):
        r = cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}, dry_run=False)
        assert r.ok, f"namespace {namespace}: {message(r)}"
    refused = []
    for obj in objects:
        r = cluster.apply(obj, dry_run=True)
        if not r.ok or "Warning" in r.headers:
            refused.append(f"{obj['kind']} {obj['metadata']['name']}: {r.status_code} {message(r)} "
                           f"{r.headers.get('Warning', '')}")
    assert not refused, "\n".join(refused)


def test_the_api_server_and_etcd_are_the_pinned_releases_of_their_line(control_plane, cluster):
    """The tier runs once per Kubernetes line (conftest.py): each control plane is that line's release, on that
    line's etcd (both servers' /version)."""
    served = cluster.http.get(f"{cluster.server}/version", timeout=REQUEST).json()["gitVersion"]
    assert served == control_plane.line.version
    direct = requests.Session()
    direct.trust_env = False  # never via a proxy
    etcd = direct.get(f"{control_plane.etcd_url}/version", timeout=REQUEST).json()
    assert f"v{etcd['etcdserver']}" == versions()[control_plane.line.etcd_pin]
